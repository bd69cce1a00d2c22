import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import integrators as I
from integrators._vanishing import _shifted_solve, _step_args, _vector_field
from theory.numerics import HoldArgs, Rodas4, Rodas5P, dense_shifted_solve


def _pendulum(t, y, args):
    return jnp.stack([y[1], -jnp.sin(y[0]) + 0.1 * jnp.cos(t)])  # non-autonomous: df/dt used


def _errors(solver, steps, ts):
    """Errors at t = 2 and at `ts` (inside steps) of fixed-step solves against Dopri8."""
    y0 = jnp.array([1.0, 0.0])
    save = diffrax.SaveAt(ts=ts)
    ref = diffrax.diffeqsolve(
        diffrax.ODETerm(_pendulum), diffrax.Dopri8(), 0.0, 2.0, 1e-3, y0, saveat=save,
        stepsize_controller=diffrax.PIDController(rtol=1e-14, atol=1e-14),
    )  # fmt: skip
    out = []
    for n in steps:
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(_pendulum), solver, 0.0, 2.0, 2.0 / n, y0, saveat=save, max_steps=200
        )
        out.append(np.max(np.abs(np.asarray(sol.ys - ref.ys)), axis=1))
    return np.array(out)


@pytest.mark.parametrize(
    ("solver", "order"), [pytest.param(Rodas4(), 4, marks=pytest.mark.slow), (Rodas5P(), 5)]
)
def test_orders_of_the_step_and_the_dense_output(solver, order):
    # the end point converges at the method's order; the dense output between steps at least
    # at order - 1 (its local order), both with the non-autonomous term d_i h df/dt in play
    steps = (20, 40)
    ts = jnp.array([2.0 / 20 * 3.3, 2.0 / 20 * 3.5, 2.0])  # inside steps of both grids
    err = _errors(solver, steps, ts)
    assert np.log2(err[0, 2] / err[1, 2]) > order - 0.3
    assert np.log2(err[0, :2].max() / err[1, :2].max()) > order - 1 - 0.3


@pytest.mark.slow
def test_stiff_problem_takes_accuracy_sized_steps():
    # van der Pol at mu = 1e3: L-stable steps, the same answer as Kvaerno5 in far fewer steps
    def vdp(t, y, mu):
        return jnp.stack([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])

    kw = dict(
        t0=0.0, t1=1000.0, dt0=None, y0=jnp.array([2.0, 0.0]), args=1e3,
        saveat=diffrax.SaveAt(t1=True), max_steps=100_000,
        stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8),
    )  # fmt: skip
    ref = diffrax.diffeqsolve(diffrax.ODETerm(vdp), diffrax.Kvaerno5(), **kw)
    sol = diffrax.diffeqsolve(diffrax.ODETerm(vdp), Rodas5P(), **kw)
    np.testing.assert_allclose(sol.ys[-1, 0], ref.ys[-1, 0], rtol=1e-6)
    assert int(sol.stats["num_steps"]) < int(ref.stats["num_steps"]) / 2


def test_dense_shifted_solve_solves_the_shifted_system():
    A = jnp.array([[-2.0, 1.0], [0.5, -3.0]])
    solve = dense_shifted_solve(lambda t, y, args: (A @ y[0], -y[1]), 0.0, (jnp.ones(2), 1.0),
                                None, 4.0)  # fmt: skip
    b = (jnp.array([1.0, 2.0]), jnp.array(3.0))
    x = solve(b)
    np.testing.assert_allclose(4.0 * x[0] - A @ x[0], b[0], rtol=1e-12)
    np.testing.assert_allclose(5.0 * x[1], b[1], rtol=1e-12)


def test_vanishing_woodbury_solve_matches_the_dense_one():
    # random states: live and frozen components, neurons far below and near the jump, small
    # and large shifts and time scales (one compiled comparison for all of them)
    m, n = 7, 5

    def errors(key, tau, shift):
        k1, k2, k3, k4, k5 = jax.random.split(key, 5)
        ell = jax.random.uniform(k1, (m,), minval=-1.0, maxval=0.01)
        psi = jax.random.normal(k2, (m, n))
        signs = jnp.sign(jax.random.normal(k3, (m,)))
        y = jax.random.normal(k4, (n,))
        b = (jax.random.normal(k5, (m,)), jax.random.normal(k1, (m, n)))
        args = (signs, y, tau)
        ours = _shifted_solve(_vector_field, 0.0, (ell, psi), args, shift)(b)
        held = _step_args(0.0, (ell, psi), args)
        dense = dense_shifted_solve(_vector_field, 0.0, (ell, psi), held, shift)(b)
        return [
            jnp.max(jnp.abs(a - d)) / jnp.max(jnp.abs(d)) for a, d in zip(ours, dense, strict=True)
        ]

    check = jax.jit(errors)
    for i, (tau, shift) in enumerate([(30.0, 0.1), (30.0, 3.0), (30.0, 1e3), (3e3, 0.1),
                                      (3e3, 3.0), (3e3, 1e3)]):  # fmt: skip
        for err in check(jax.random.PRNGKey(i), jnp.asarray(tau), jnp.asarray(shift)):
            assert float(err) <= 1e-11, (tau, shift, float(err))


@pytest.mark.parametrize("bad", [3.0, "dense"])
def test_refuses_a_solve_that_is_not_callable(bad):
    with pytest.raises(ValueError, match="shifted_solve"):
        Rodas4(shifted_solve=bad)
    with pytest.raises(ValueError, match="step_args"):
        HoldArgs(Rodas5P(), bad)
    with pytest.raises(ValueError, match="solver"):
        HoldArgs(bad, _step_args)
    with pytest.raises(ValueError, match="overshoot"):
        HoldArgs(Rodas5P(), _step_args, bad)


@pytest.mark.slow
def test_backward_solves_integrate_the_same_equation():
    # diffrax hands a backward solve over as a term with a negated control
    def vf(t, y, args):
        return -y + jnp.sin(t)

    kw = dict(
        t0=1.0, t1=0.0, dt0=None, y0=jnp.array(1.0), saveat=diffrax.SaveAt(ts=jnp.array([0.0])),
        stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10),
    )  # fmt: skip
    # y = C e^-t + (sin t - cos t) / 2 through y(1) = 1
    c = (1.0 - 0.5 * (np.sin(1.0) - np.cos(1.0))) * np.e
    exact = np.array([c - 0.5])
    for solver in (Rodas5P(), HoldArgs(Rodas4(), lambda t, y, a: a)):
        np.testing.assert_allclose(diffrax.diffeqsolve(diffrax.ODETerm(vf), solver, **kw).ys, exact,
                                   rtol=1e-7)  # fmt: skip


def test_hold_args_sees_a_dip_past_the_kink_inside_a_step():
    # y' = -(1 - 2t) while live: y reaches 0 at t = 0.276 and must freeze there, though the
    # held field would carry it back above 0 within one long step
    def field(t, y, live):
        live = (y > 0) if live is None else live
        return jnp.where(live, -(1.0 - 2.0 * t), 0.0)

    hold = HoldArgs(diffrax.Dopri5(), lambda t, y, a: HoldArgs.live_set(y), lambda y0, y1, live:
                    HoldArgs.past_kink(live, y1))  # fmt: skip
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field), hold, 0.0, 1.0, None, jnp.array(0.2), args=None,
        stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-6),
    )  # fmt: skip
    assert float(sol.ys[-1]) <= 0.0


def test_hold_args_keeps_the_solvers_term_structure():
    control = diffrax.ControlTerm(lambda t, y, a: -y, diffrax.LinearInterpolation(
        ts=jnp.array([0.0, 1.0]), ys=jnp.array([0.0, 3.0])))  # fmt: skip
    with pytest.raises(Exception, match="[Tt]erm"):
        diffrax.diffeqsolve(control, HoldArgs(Rodas4(), lambda t, y, a: a), 0.0, 1.0, 0.1,
                            jnp.array(1.0))  # fmt: skip


@pytest.mark.slow
def test_vanishing_flow_in_float32():
    y, signs = jnp.array([1.0, -0.5], jnp.float32), jnp.array([1.0, -1.0], jnp.float32)
    dirs = jnp.array([[0.6, 0.8], [0.8, 0.6]], jnp.float32)
    sol = I.vanishing_flow(y, signs, dirs, jnp.linspace(0.0, 2.0, 5, dtype=jnp.float32),
                           time_scale=50.0)  # fmt: skip
    assert bool(sol.ok) and sol.loss.dtype == jnp.float32
    assert bool(jnp.all(jnp.isfinite(sol.loss)))
