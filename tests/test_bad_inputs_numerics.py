"""Bad input to every public function of `theory.numerics`: (call, exception, message
fragment)."""

import diffrax
import jax
import jax.numpy as jnp
from helpers import bad_input_test, public_functions, table_rows

import theory.numerics as TN

A2, ONE1 = jnp.array([1.0, -1.0]), jnp.array([1.0])
NAN = float("nan")


def _decay(t0, t1, ts, dt0=0.1):
    import diffrax

    term = diffrax.ODETerm(lambda t, y, a: -y)
    saveat = diffrax.SaveAt(ts=ts)
    return TN.diffeqsolve(term, diffrax.Tsit5(), t0, t1, dt0, jnp.array(1.0), saveat=saveat)


CASES = {
    "diffeqsolve": [
        (lambda: _decay(1.0, 0.0, jnp.array([0.5])), ValueError, "t1"),
        (lambda: _decay(jnp.nan, 1.0, jnp.array([0.5])), ValueError, "t0"),
        (lambda: _decay(0.0, 1.0, jnp.array([0.5]), dt0=-0.1), ValueError, "dt0"),
        (lambda: _decay(0.0, 1.0, jnp.array([0.5, 0.2])), ValueError, "saveat.ts"),
        (lambda: _decay(0.0, 1.0, jnp.array([1.5])), ValueError, "saveat.ts"),
        # a failed solve raises with diffrax's default throw=True (it came back NaN)
        (
            lambda: TN.diffeqsolve(
                diffrax.ODETerm(lambda t, y, a: -y),
                diffrax.Tsit5(),
                0.0,
                10.0,
                0.01,
                jnp.array(1.0),
                max_steps=3,
            ),
            ValueError,
            "the solve failed",
        ),  # fmt: skip
        (
            lambda: jax.jit(
                lambda y: (
                    TN.diffeqsolve(
                        diffrax.ODETerm(lambda t, y, a: -y),
                        diffrax.Tsit5(),
                        0.0,
                        10.0,
                        0.01,
                        y,
                        max_steps=3,
                    ).ys
                )
            )(jnp.array(1.0)),
            Exception,
            "the solve failed",
        ),  # fmt: skip
    ],
    "nnqp": [
        (lambda: TN.nnqp(jnp.eye(3), jnp.ones(2), tol=1e-9, max_steps=5), ValueError, "`G`"),
        (lambda: TN.nnqp(jnp.eye(2), jnp.ones(2), tol=NAN, max_steps=5), ValueError, "`tol`"),
        (lambda: TN.nnqp(jnp.eye(2), jnp.ones(2), tol=1e-9, max_steps=0), ValueError, "steps"),
        (
            lambda: TN.nnqp(jnp.diag(jnp.array([1.0, -1.0])), jnp.ones(2), tol=1e-9, max_steps=5),
            ValueError,
            "semidefinite",
        ),
        (
            lambda: TN.nnqp(
                jnp.array([[1.0, 1.0], [0.0, 1.0]]), jnp.ones(2), tol=1e-9, max_steps=5
            ),
            ValueError,
            "symmetric",
        ),
        (
            lambda: TN.nnqp(jnp.zeros((0, 0)), jnp.zeros(0), tol=1e-9, max_steps=5),
            ValueError,
            "at least one",
        ),
        (
            lambda: TN.nnqp(jnp.array([[1.0, 0.0], [0.0, NAN]]), A2, tol=1e-9, max_steps=5),
            ValueError,
            "`G`",
        ),
        (lambda: TN.nnqp(jnp.eye(2), A2, tol=1e-9, max_steps=5, throw=1), ValueError, "`throw`"),
    ],
}

CASES["lu_solve"] = [
    (lambda: TN.lu_solve(jnp.eye(3), jnp.ones(2)), ValueError, "`M` must have shape"),
    (lambda: TN.lu_solve(jnp.ones((2, 3)), jnp.ones(2)), ValueError, "`M` must have shape"),
    (lambda: TN.lu_solve(jnp.eye(2), jnp.ones((2, 1, 1))), ValueError, "`b`"),
    (lambda: TN.lu_solve(jnp.eye(2), jnp.ones((3, 2))), ValueError, "`M` must have shape"),
]

CASES["spd_inverse"] = [
    (lambda: TN.spd_inverse(jnp.ones(3)), ValueError, "`M` must have shape"),
    (lambda: TN.spd_inverse(jnp.ones((2, 3))), ValueError, "`M` must have shape"),
    (lambda: TN.spd_inverse(jnp.ones((4, 3, 2))), ValueError, "`M` must have shape"),
]

CASES["dense_shifted_solve"] = [
    (
        lambda: TN.dense_shifted_solve(lambda t, y, a: -y, 0.0, ONE1, None, NAN),
        ValueError,
        "`shift`",
    ),
    (
        lambda: TN.dense_shifted_solve(lambda t, y, a: -y, 0.0, ONE1, None, jnp.ones(2)),
        ValueError,
        "one finite",
    ),
    (
        lambda: TN.dense_shifted_solve(lambda t, y, a: y, 0.0, ONE1, None, 1.0),
        ValueError,
        "singular",
    ),
    (
        lambda: TN.dense_shifted_solve(lambda t, y, a: y * NAN, 0.0, ONE1, None, 1.0),
        ValueError,
        "singular",
    ),
]

CASES["times_power_of_two"] = [
    (lambda: TN.times_power_of_two(jnp.ones(2), 2.5), ValueError, "`e` must be an integer"),
    (lambda: TN.times_power_of_two("1", 2), ValueError, "`x`"),
]

CASES["binary_exponent"] = [
    (lambda: TN.binary_exponent(), ValueError, "at least one"),
    (lambda: TN.binary_exponent(jnp.ones(2) * 1j), ValueError, "real"),
]

CASES["default_controller"] = [
    (lambda: TN.default_controller(-1.0, 1e-9), ValueError, "`rtol`"),
    (lambda: TN.default_controller(1e-6, NAN), ValueError, "`atol`"),
    # traced: the check stays in the program (its value is the one used)
    (lambda: jax.jit(lambda r: TN.default_controller(r, 1e-9).rtol)(-1.0), Exception, "`rtol`"),
]


test_bad_input_is_refused_with_a_message_naming_it = bad_input_test(table_rows(CASES))


def test_every_public_function_has_a_bad_input_case():
    public = public_functions(TN) - {"diffrax_stats"}  # a diffrax adaptor
    assert public <= set(CASES), sorted(public - set(CASES))
