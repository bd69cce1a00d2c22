"""Spectral densities (`integrators._density`): stochastic Lanczos quadrature with deflated
outliers against the dense spectrum of a real network Hessian, in Wasserstein-1."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from integrators import spectral_density, wasserstein1


def _mlp_problem(width):
    k = jax.random.split(jax.random.PRNGKey(0), 3)
    X = jax.random.normal(k[0], (256, 16))
    teacher = eqx.nn.MLP(16, 1, 4, 1, activation=jnp.tanh, key=k[1])
    y = jax.vmap(teacher)(X)[:, 0]
    mlp = eqx.nn.MLP(16, 1, width, 1, activation=jnp.tanh, key=k[2])

    def loss(m, data):
        return 0.5 * jnp.mean((jax.vmap(m)(data[0])[:, 0] - data[1]) ** 2)

    params, static = eqx.partition(mlp, eqx.is_inexact_array)
    flat, unravel = ravel_pytree(params)
    H = jax.hessian(lambda x: loss(eqx.combine(unravel(x), static), (X, y)))(flat)
    return mlp, loss, (X, y), np.linalg.eigvalsh(np.asarray(H))


def test_wasserstein1_against_hand_cases():
    assert wasserstein1([0.0], [1.0], [1.0]) == pytest.approx(1.0)
    assert wasserstein1([0.0, 2.0], [0.5, 0.5], [1.0, 1.0]) == pytest.approx(1.0)
    assert wasserstein1([1.0, 3.0], [0.5, 0.5], [3.0, 1.0]) == pytest.approx(0.0)


def test_density_of_a_tanh_mlp_hessian_within_1e_3_of_its_norm():
    # P = 541: deflating 16 eigenpairs at each end brings W1 below 1e-3 ||H|| (measured
    # 3.8e-4 with orthogonal probes, 7.8e-4 with independent ones; plain SLQ with 16
    # probes, 80 steps: 1.6e-3)
    mlp, loss, data, ev = _mlp_problem(30)
    norm = np.abs(ev).max()
    dens = spectral_density(mlp, loss, args=data, probes=32, steps=120, deflate=16)
    assert dens.ok and abs(float(jnp.sum(dens.weights)) - 1.0) < 1e-12
    assert wasserstein1(dens.nodes, dens.weights, ev) < 1e-3 * norm
    # counts in intervals, with error bars: the truth within 4 standard errors
    edges = np.array([-np.inf, -1e-3, 1e-3, 0.1, np.inf])
    counts, errors = dens.counts(edges)
    truth = np.histogram(ev, bins=edges)[0]
    assert counts.sum() == pytest.approx(ev.size)
    assert np.all(np.abs(counts - truth) <= 4 * errors + 1.0), (counts, truth, errors)


def test_density_arguments_are_checked():
    mlp, loss, data, _ = _mlp_problem(2)
    with pytest.raises(ValueError, match="`steps`"):
        spectral_density(mlp, loss, args=data, steps=10_000)
    with pytest.raises(ValueError, match="`probes`"):
        spectral_density(mlp, loss, args=data, probes=0)


@pytest.mark.slow
def test_a_small_hessians_density_is_exact_by_default():
    # a complement of at most 64 dimensions is probed whole: one orthonormal frame, each
    # probe's Lanczos run through the whole space, the density exact to rounding (32
    # independent probes left W1 / ||H|| = 1.1e-3 to 3.5e-3 at P = 51)
    mlp, loss, data, ev = _mlp_problem(2)
    dens = spectral_density(mlp, loss, args=data)
    assert dens.ok and dens.stats["probes"] == ev.size - 2 * (ev.size // 8)
    assert wasserstein1(dens.nodes, dens.weights, ev) < 1e-12 * np.abs(ev).max()


def test_probe_frames_are_orthonormal_even_where_rademacher_rows_repeat():
    # at P = 8 with 2 deflated, Rademacher rows repeated in 19 of 200 keys and the QR's
    # extra columns left the complement; such blocks are drawn Gaussian
    from integrators._density import _probes

    V = jnp.linalg.qr(jax.random.normal(jax.random.PRNGKey(9), (8, 2)))[0].T
    for i in range(60):
        Pr = _probes(jax.random.PRNGKey(i), V, 6, 8, jnp.float64)
        np.testing.assert_allclose(Pr @ Pr.T, np.eye(6), atol=1e-10)
        np.testing.assert_allclose(Pr @ V.T, 0.0, atol=1e-10)
