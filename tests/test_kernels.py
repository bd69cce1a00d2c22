import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theory import ACTIVATIONS, arccos_kernel, dual_kernel, kernel_truncation_error, second_moment


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_dual_kernel_against_monte_carlo(name):
    rho = 0.6
    z = jax.random.normal(jax.random.PRNGKey(0), (2, 1_000_000))
    u, v = z[0], rho * z[0] + np.sqrt(1 - rho**2) * z[1]  # unit directions at <u, v> = rho
    from theory import activation_function

    sigma = activation_function(name)
    prod = sigma(u) * sigma(v)
    se = float(jnp.std(prod)) / 1000
    assert abs(float(dual_kernel(name)(jnp.asarray(rho))) - float(jnp.mean(prod))) < 4 * se


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_kernel_at_one_is_the_second_moment(name):
    err = float(kernel_truncation_error(name))
    np.testing.assert_allclose(
        dual_kernel(name)(jnp.asarray(1.0)), second_moment(name), atol=err + 1e-14
    )
    assert 0 <= err < 1e-8


def test_arccos_kernel_hand_values_and_finite_slope():
    np.testing.assert_allclose(arccos_kernel(0.0), 2 / np.pi)
    np.testing.assert_allclose(arccos_kernel(1.0), 1.0)
    np.testing.assert_allclose(arccos_kernel(-1.0), 1.0)
    np.testing.assert_allclose(jax.grad(arccos_kernel)(1.0), 1.0)  # (2/pi) arcsin 1
    np.testing.assert_allclose(jax.grad(arccos_kernel)(0.3), 2 / np.pi * np.arcsin(0.3))
