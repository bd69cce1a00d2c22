import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics import (
    LeakyReLUNet,
    fixed_second_layer,
    leaky_relu,
    log_margin_loss,
    margin_loss,
    small_leaky_init,
)


def test_leaky_relu_and_the_net():
    np.testing.assert_allclose(leaky_relu(jnp.array([-2.0, 0.0, 3.0]), 0.25), [-0.5, 0.0, 3.0])
    net = LeakyReLUNet(jnp.array([[1.0, 0.0], [0.0, 1.0]]), jnp.array([1.0, -1.0]), 0.1)
    X = jnp.array([[2.0, -1.0], [-1.0, 1.0]])
    np.testing.assert_allclose(net.predict(X), [2.0 + 0.1, -0.1 - 1.0])
    np.testing.assert_allclose(jax.vmap(net)(X), net.predict(X))


def test_fixed_second_layer_and_init():
    a = fixed_second_layer(5)
    np.testing.assert_allclose(a * np.sqrt(5), [1, 1, 1, -1, -1])
    net = small_leaky_init(6, 40, 0.2, scale=1e-6, key=jax.random.PRNGKey(0))
    assert net.W.shape == (6, 40) and net.gamma == 0.2
    assert float(jnp.linalg.norm(net.W)) < 1e-5
    with pytest.raises(ValueError, match="`m`"):
        fixed_second_layer(1)
    with pytest.raises(ValueError, match="gamma"):
        LeakyReLUNet(jnp.zeros((4, 10)), fixed_second_layer(4), 0.0)


def test_losses_are_overflow_safe():
    u = jnp.array([-800.0, 0.0, 900.0])
    assert jnp.isfinite(log_margin_loss(u)) and jnp.isfinite(log_margin_loss(u, "logistic"))
    np.testing.assert_allclose(log_margin_loss(u), 800.0 - np.log(3.0))
    big = jnp.array([800.0, 900.0])
    assert float(margin_loss(big)) == 0.0 and np.isclose(
        float(log_margin_loss(big)), -800 - np.log(2) + np.log1p(np.exp(-100.0))
    )
    # log(1 + e^-u) = e^-u to 1e-300 relative here, so the two log-losses agree
    np.testing.assert_allclose(log_margin_loss(big, "logistic"), log_margin_loss(big), rtol=1e-12)


def test_losses_against_the_plain_formulas():
    u = jnp.array([-1.0, 0.5, 2.0])
    np.testing.assert_allclose(margin_loss(u), np.mean(np.exp(-np.asarray(u))), rtol=1e-14)
    np.testing.assert_allclose(
        margin_loss(u, "logistic"), np.mean(np.log1p(np.exp(-np.asarray(u)))), rtol=1e-14
    )
    np.testing.assert_allclose(log_margin_loss(u, "logistic"), np.log(margin_loss(u, "logistic")))
    with pytest.raises(ValueError, match="loss"):
        margin_loss(u, "hinge")
