import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics import LeakyReLUNet, gaussian_mixture, margin_loss, small_leaky_init
from integrators import margin_gradient_descent
from theory import RESULTS, all_activated, max_margin, one_minus_cos


@pytest.mark.slow  # default-run budget: the capability keeps other default tests
def test_one_step_is_plain_gradient_descent_on_W():
    X, y, _, _ = gaussian_mixture(6, 9, signal=1.0, key=jax.random.PRNGKey(0))
    net = small_leaky_init(4, 9, 0.2, scale=0.5, key=jax.random.PRNGKey(1))
    eta = 0.3
    sol = margin_gradient_descent(X, y, net, learning_rate=eta, max_steps=1, num_checkpoints=1)

    def loss(W):
        return margin_loss(y * LeakyReLUNet(W, net.a, 0.2).predict(X))

    np.testing.assert_allclose(sol.model.W, net.W - eta * jax.grad(loss)(net.W), rtol=1e-12)
    np.testing.assert_allclose(sol.trajectory.W[-1], sol.model.W)


def test_strong_signal_activates_every_neuron_after_one_step():
    X, y, _, _ = gaussian_mixture(20, 400, signal=15.0, key=jax.random.PRNGKey(0))
    yx = y[:, None] * X
    assert bool(jnp.all(yx @ yx.T >= 0))  # positively correlated
    net = small_leaky_init(10, 400, 0.1, scale=1e-10, key=jax.random.PRNGKey(1))
    assert not bool(all_activated(net.W, net.a, X, y))
    eta = 1.0 / jnp.max(jnp.sum(X * X, axis=1))
    sol = margin_gradient_descent(X, y, net, learning_rate=eta, max_steps=1, num_checkpoints=1)
    assert bool(sol.activated[0]) and bool(all_activated(sol.model.W, net.a, X, y))


@pytest.mark.slow
def test_long_normalized_gd_stays_finite_and_converges_in_direction():
    X, y, _, _ = gaussian_mixture(20, 400, signal=15.0, key=jax.random.PRNGKey(0))
    net = small_leaky_init(10, 400, 0.1, scale=1e-10, key=jax.random.PRNGKey(1))
    eta = 1.0 / jnp.max(jnp.sum(X * X, axis=1))
    sol = margin_gradient_descent(
        X, y, net, learning_rate=eta, max_steps=100_000, num_checkpoints=51, normalized=True
    )
    assert bool(sol.ok)
    assert bool(jnp.all(jnp.isfinite(sol.log_loss))) and bool(
        jnp.all(jnp.isfinite(sol.trajectory.W))
    )
    assert float(sol.log_loss[-1]) < -1000  # L itself underflows to 0; log L does not
    mm = max_margin(X, y, net.a, 0.1)
    assert float(one_minus_cos(sol.trajectory.W[-1], mm.W)) < 1e-7
    assert bool(jnp.all(sol.activated))


def test_divergence_is_reported():
    X, y, _, _ = gaussian_mixture(6, 10, signal=2.0, key=jax.random.PRNGKey(0))
    net = small_leaky_init(4, 10, 0.1, scale=1e-8, key=jax.random.PRNGKey(1))
    huge = 1e200 * X  # finite inputs whose Gram matrix overflows
    bad = margin_gradient_descent(huge, y, net, learning_rate=0.1, max_steps=10)
    assert bad.result == RESULTS.diverged
    with pytest.raises(Exception, match="diverged"):
        margin_gradient_descent(huge, y, net, learning_rate=0.1, max_steps=10, throw=True)
    with pytest.raises(ValueError, match="learning_rate"):  # refused before any step
        margin_gradient_descent(X, y, net, learning_rate=float("nan"), max_steps=10)


def test_bad_inputs_name_the_argument():
    X, y, _, _ = gaussian_mixture(6, 10, signal=2.0, key=jax.random.PRNGKey(0))
    net = small_leaky_init(4, 10, 0.1, scale=1e-8, key=jax.random.PRNGKey(1))
    with pytest.raises(ValueError, match="`y` must take values"):
        margin_gradient_descent(X, 0.5 * y, net, learning_rate=0.1, max_steps=10)
    with pytest.raises(ValueError, match="`y`"):
        margin_gradient_descent(X, y[:, None], net, learning_rate=0.1, max_steps=10)
    with pytest.raises(ValueError, match="loss"):
        margin_gradient_descent(X, y, net, learning_rate=0.1, max_steps=10, loss="hinge")
