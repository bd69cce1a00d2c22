import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from integrators import critical_point, gradient_flow, hessian_spectrum


def _problem():
    mlp = eqx.nn.MLP(2, 1, 3, 1, activation=jnp.tanh, key=jax.random.PRNGKey(0))
    X = jax.random.normal(jax.random.PRNGKey(1), (6, 2), jnp.float64)
    y = jnp.sin(X[:, 0])

    def loss(model, data):
        return 0.5 * jnp.mean((jax.vmap(model)(data[0])[:, 0] - data[1]) ** 2)

    return mlp, loss, (X, y)


def test_hessian_spectrum_against_finite_differences_and_lanczos():
    mlp, loss, data = _problem()
    params, static = eqx.partition(mlp, eqx.is_inexact_array)
    flat, unravel = ravel_pytree(params)
    grad = jax.jit(jax.grad(lambda x: loss(eqx.combine(unravel(x), static), data)))
    h, P = 1e-5, flat.shape[0]
    cols = [(grad(flat + h * e) - grad(flat - h * e)) / (2 * h) for e in jnp.eye(P)]
    H = np.asarray(jnp.stack(cols, axis=1))
    fd = np.linalg.eigvalsh(0.5 * (H + H.T))
    exact = np.asarray(hessian_spectrum(mlp, loss, data))
    np.testing.assert_allclose(exact, fd, atol=1e-8)
    lanczos = np.asarray(hessian_spectrum(mlp, loss, data, k=2))
    np.testing.assert_allclose(lanczos, np.r_[exact[:2], exact[-2:]], atol=1e-10)


def test_lanczos_survives_an_invariant_subspace():
    # H = I: the Krylov space closes after one step; the restart keeps every Ritz value 1
    class P(eqx.Module):
        p: jax.Array

    eig = hessian_spectrum(P(jnp.zeros(100)), lambda m, a: 0.5 * jnp.sum(m.p**2), k=3)
    np.testing.assert_allclose(eig, np.ones(6), atol=1e-12)
    # a random SPD quadratic: exact at steps = P, and the largest converge first
    A = jax.random.normal(jax.random.PRNGKey(0), (60, 60))
    H = A @ A.T / 60 + jnp.diag(jnp.linspace(0.0, 5.0, 60))

    def quad(m, a):
        return 0.5 * m.p @ H @ m.p

    exact = np.linalg.eigvalsh(np.asarray(H))
    full = hessian_spectrum(P(jnp.zeros(60)), quad, k=2, steps=60)
    np.testing.assert_allclose(full, np.r_[exact[:2], exact[-2:]], rtol=1e-8)
    part = hessian_spectrum(P(jnp.zeros(60)), quad, k=2)
    np.testing.assert_allclose(part[-1], exact[-1], rtol=1e-8)


@pytest.mark.slow
def test_critical_point_polishes_a_flow_to_a_minimum():
    # 13 parameters, 6 data: the minima form a manifold (a singular Hessian); the Newton step
    # is the least-squares one
    mlp, loss, data = _problem()
    near = gradient_flow(mlp, loss, jnp.array([0.0, 300.0]), args=data).model
    cp = critical_point(near, loss, data)
    assert cp.ok and float(cp.grad_norm) < 1e-10 and int(cp.morse_index) == 0
    assert float(cp.loss) <= float(loss(near, data)) + 1e-12
    assert int(cp.stats["num_steps"]) > 0


@pytest.mark.slow
def test_plateau_hessian_unstable_rates_are_algorithm_1s():
    # Near the first saddle (theta ~ 0) neuron j's block of the loss Hessian in (a_j, v_j) is
    # [[0, -s_j y_A^T / n], [-s_j y_A / n, 0]] on its active components A = {v_ji > 0}: its
    # eigenvalues are +-||y_A|| / n, and the other blocks are O(|theta|^2). Once the
    # sign-mismatched components have reached the kink, A is the support S and the unstable
    # eigenvalue is -||D_j^(0)||, Algorithm 1's rate. A mismatched component still alive adds
    # an unstable direction the flow cannot follow (it runs into the kink).
    from dynamics import (
        TwoLayerReLU,
        balanced_init,
        orthogonal_data,
        signs_and_directions,
        square_loss,
    )
    from integrators import orthogonal_flow
    from theory import saddle_jumps

    X, y = orthogonal_data(5, key=jax.random.PRNGKey(0), dtype=jnp.float64)
    model = balanced_init(6, 5, 1e-12, key=jax.random.PRNGKey(1), dtype=jnp.float64)
    signs, D = signs_and_directions(model, X)
    pred = saddle_jumps(y, signs, D)
    t = 0.6 * float(pred.times[0])
    sol = orthogonal_flow(X, y, model, jnp.array([0.0, t]), time_scale=np.log(1e12))
    # in the data basis (v = W X^T, an orthogonal change of variables for d = n: the same
    # spectrum), with the components at the kink set to exactly 0: through W = V X they come
    # back as +-1e-17 of their neuron's size, and relu' of a rounding error is 0 or 1 at random
    V = np.asarray(sol.model.W @ X.T)
    V = np.where(np.abs(V) < 1e-12 * np.linalg.norm(V, axis=1)[:, None], 0.0, V)
    basis = TwoLayerReLU(sol.model.a, jnp.asarray(V))
    eig = np.asarray(hessian_spectrum(basis, lambda m, d: square_loss(m, *d), (jnp.eye(5), y)))
    active = V > 0
    blocks = np.linalg.norm(np.where(active, np.asarray(y)[None, :], 0.0), axis=1) / 5
    np.testing.assert_allclose(np.sort(-eig[eig < -1e-9]), np.sort(blocks[blocks > 0]), rtol=1e-6)
    support = (np.asarray(D) > 0) & (np.asarray(signs)[:, None] * np.asarray(y)[None, :] > 0)
    settled = np.all(active == support, axis=1) & support.any(axis=1)
    assert settled.sum() >= 4
    np.testing.assert_allclose(blocks[settled], np.asarray(pred.rates[0])[settled], rtol=1e-12)
