"""The one rescaled two-layer field (`theory._rescaled`) against autodiff in plain coordinates."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theory import rescaled


def _plain_velocity(a, Z, y, G, tau):
    """d(a, Z)/dt = -tau (dL/da, G dL/dZ), L = 1/(2n) ||a @ relu(Z) - y||^2, by autodiff."""

    def loss(a, Z):
        r = a @ jax.nn.relu(Z) - y
        return 0.5 * jnp.mean(r * r)

    ga, gz = jax.grad(loss, (0, 1))(a, Z)
    return -tau * ga, -tau * gz @ G


@pytest.mark.parametrize("gauge", ["norm", "balanced"])
def test_field_is_the_plain_flow_in_log_polar_coordinates(gauge):
    k1, k2, k3, k4 = jax.random.split(jax.random.PRNGKey(0), 4)
    m, n, tau = 5, 7, 3.7
    psi = jax.random.normal(k1, (m, n))
    signs = jnp.where(jax.random.bernoulli(k2, 0.5, (m,)), 1.0, -1.0)
    lam = jax.random.normal(k3, (m,))
    y = jax.random.normal(k4, (n,))
    X = jnp.eye(n) + 0.2 * jax.random.normal(k1, (n, n))
    G = X @ X.T
    if gauge == "balanced":  # |a_j| = ||z_j|| needs unit directions
        psi = psi / jnp.linalg.norm(psi, axis=1, keepdims=True)
    amp = signs if gauge == "balanced" else signs * jax.random.uniform(k2, (m,), minval=0.5)
    act = jax.nn.relu(psi)
    slope = (psi > 0).astype(psi.dtype)
    moving = jnp.ones_like(psi, bool)
    dlam, damp, dpsi = rescaled.field(
        lam, amp, psi, y, tau, act=act, slope=slope, moving=moving, gram=G, gauge=gauge
    )
    size = jnp.exp(lam)
    a, Z = size * amp, size[:, None] * psi
    da, dZ = _plain_velocity(a, Z, y, G, tau)
    # theta = e^lam (p, psi): d theta = e^lam (dlam (p, psi) + (dp, dpsi))
    np.testing.assert_allclose(size * (dlam * amp + damp), da, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        size[:, None] * (dlam[:, None] * psi + dpsi), dZ, rtol=1e-10, atol=1e-12
    )
    if gauge == "norm":  # the gauge keeps ||(p, psi)|| fixed
        rate = amp * damp + jnp.sum(psi * dpsi, axis=1)
        np.testing.assert_allclose(rate, 0.0, atol=1e-12)
    else:
        np.testing.assert_array_equal(damp, 0.0)


def test_frozen_components_and_vanished_neurons():
    psi = jnp.array([[0.6, -0.8], [1.0, 0.0]])
    lam = jnp.array([0.3, -jnp.inf])  # the second neuron is exactly 0 (e^-inf)
    y = jnp.array([1.0, -1.0])
    r = rescaled.residual(lam, jnp.ones(2), jax.nn.relu(psi), y)
    np.testing.assert_allclose(r, [jnp.exp(0.6) * 0.6 - 1.0, 1.0])
    moving = psi > 0
    _, _, dpsi = rescaled.field(
        lam, jnp.ones(2), psi, y, 2.0, act=jax.nn.relu(psi), slope=moving, moving=moving
    )
    assert dpsi[0, 1] == 0.0 and np.all(np.isfinite(dpsi))


def test_cap_keeps_trial_stages_finite_and_gauge_is_checked():
    assert np.isfinite(rescaled.size2(jnp.asarray(1e4)))
    assert rescaled.size2(jnp.asarray(1e4)) == np.exp(rescaled.MAX_LOG_SIZE2)
    with pytest.raises(ValueError, match="gauge"):
        rescaled.field(
            jnp.zeros(1),
            jnp.ones(1),
            jnp.ones((1, 1)),
            jnp.ones(1),
            1.0,
            act=jnp.ones((1, 1)),
            slope=1.0,
            moving=True,
            gauge="polar",
        )


def test_log_polar_holds_tiny_rows_and_dead_neurons():
    theta = jnp.array([[3e-300, 4e-300], [0.0, 0.0]])
    lam, direction = rescaled.log_polar(theta, theta)
    np.testing.assert_allclose(direction[0], [0.6, 0.8], rtol=1e-12)
    assert lam[1] == 0.0 and np.all(direction[1] == 0.0)
