import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theory.checks import (
    check_activation,
    check_alpha,
    check_gamma,
    check_orthonormal_rows,
    check_plus_minus_one,
    check_representable,
    check_shape,
    check_solver_options,
    check_time_scale,
    check_value,
)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: check_shape("y", jnp.zeros((3, 1)), (3,)), r"`y` must have shape \(3,\)"),
        (lambda: check_shape("W", jnp.zeros((2, 3)), (None, 4)), r"`W`.*\(\*, 4\)"),
        (lambda: check_alpha(0.0, jnp.float64), "`alpha` must lie in"),
        (lambda: check_alpha(np.float64(2.0), jnp.float64), "`alpha` must lie in"),
        (lambda: check_alpha(1e-30, jnp.float32), "underflows float32"),
        (lambda: check_time_scale(0.0), "`time_scale`"),
        (lambda: check_time_scale(float("nan")), "`time_scale`"),
        (lambda: check_orthonormal_rows("X", 2.0 * jnp.eye(2)), "rows of `X`"),
        (lambda: check_plus_minus_one("signs", jnp.array([1.0, 0.0])), "`signs`"),
        (lambda: check_gamma(1.0), "`gamma`"),
        (lambda: check_gamma(np.float32(1.5)), "`gamma`"),
        (lambda: check_activation("tanh"), "`activation`"),
        (
            lambda: check_representable(
                jnp.full(2, 1e-30, jnp.float32), jnp.full((2, 2), 1e-30, jnp.float32)
            ),
            "underflow float32",
        ),
    ],
)
def test_bad_values_raise_value_errors_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_good_values_pass_and_are_returned():
    x = jnp.arange(3.0)
    assert check_value(x, x >= 0, "never") is x
    check_shape("x", x, (3,))
    check_alpha(1e-30, jnp.float64)
    np.testing.assert_allclose(check_time_scale(2.0), 2.0)
    check_gamma(0.5)
    check_activation("swish")


def test_value_checks_run_under_jit():
    f = jax.jit(lambda t: check_time_scale(t) + 1.0)
    assert float(f(1.0)) == 2.0
    with pytest.raises(Exception, match="time_scale"):
        f(-1.0)
    g = jax.jit(lambda s: check_plus_minus_one("signs", s))
    with pytest.raises(Exception, match="signs"):
        g(jnp.array([1.0, 2.0]))
    # the solver's tolerances: the checked values are returned, so a traced one is checked
    h = jax.jit(lambda r: check_solver_options(r, 1e-9, 10)[0])
    assert float(h(1e-6)) == 1e-6
    with pytest.raises(Exception, match="rtol"):
        h(-1.0)
