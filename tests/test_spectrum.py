"""Hessian spectra (`integrators._spectrum`): dense and Lanczos against NumPy and finite
differences, the Morse index, bad options, non-finite points and batches."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import P, quadratic_loss as _quadratic, tanh_mlp_problem as _problem
from jax.flatten_util import ravel_pytree

from integrators import (
    _spectrum,
    critical_point,
    hessian_spectrum,
)
from theory import RESULTS


def test_hessian_spectrum_against_finite_differences_and_lanczos():
    mlp, loss, data = _problem()
    params, static = eqx.partition(mlp, eqx.is_inexact_array)
    flat, unravel = ravel_pytree(params)
    grad = jax.jit(jax.grad(lambda x: loss(eqx.combine(unravel(x), static), data)))
    h, n = 1e-5, flat.shape[0]
    cols = [(grad(flat + h * e) - grad(flat - h * e)) / (2 * h) for e in jnp.eye(n)]
    H = np.asarray(jnp.stack(cols, axis=1))
    fd = np.linalg.eigvalsh(0.5 * (H + H.T))
    dense = hessian_spectrum(mlp, loss, args=data)
    assert dense.ok and dense.vectors is None and dense.residuals is None
    np.testing.assert_allclose(dense.eigenvalues, fd, atol=1e-8)
    assert int(dense.morse_index) == int(np.sum(fd < -1e-6 * np.abs(fd).max()))
    # k extreme pairs: dense path (small P) and Lanczos (steps given): the same pairs
    for spec in (
        hessian_spectrum(mlp, loss, args=data, k=2),
        hessian_spectrum(mlp, loss, args=data, k=2, steps=9, block=1),
    ):
        assert spec.ok
        np.testing.assert_allclose(spec.eigenvalues, np.r_[fd[:2], fd[-2:]], atol=1e-8)
        v = np.asarray(spec.vectors)
        np.testing.assert_allclose(v @ H @ v.T, np.diag(spec.eigenvalues), atol=1e-7)
        assert np.all(np.asarray(spec.residuals) < 1e-8)


@pytest.mark.slow
def test_lanczos_honours_steps_and_converges_on_a_cluster():
    # a 400-parameter spectrum with a cluster of 10 at its top (spacing 1e-6): at steps = P
    # the basis spans R^P (exact); at the default, restarts run until the residuals are tiny
    lam = np.r_[np.linspace(-1.0, 1.0, 390), 2.0 + 1e-6 * np.arange(10)]
    model, quad = _quadratic(lam)
    exact = np.r_[np.sort(lam)[:3], np.sort(lam)[-3:]]
    full = hessian_spectrum(model, quad, k=3, steps=400)
    assert full.ok and int(full.stats["num_restarts"]) == 0
    np.testing.assert_allclose(full.eigenvalues, exact, atol=1e-10)
    short = hessian_spectrum(model, quad, k=3, steps=40)
    assert short.ok and int(short.stats["num_restarts"]) > 0
    np.testing.assert_allclose(short.eigenvalues, exact, atol=1e-10)
    assert np.all(np.asarray(short.residuals) <= 1e-10 * 2.0 * (1 + 1e-9))
    # too few restarts: reported, not silent
    capped = hessian_spectrum(model, quad, k=3, steps=40, max_restarts=0)
    assert capped.result == RESULTS.unconverged_eigenvalues
    with pytest.raises(Exception, match="Lanczos did not converge"):
        hessian_spectrum(model, quad, k=3, steps=40, max_restarts=0, throw=True)


@pytest.mark.slow
def test_lanczos_block_resolves_multiplicity_and_invariant_subspaces():
    lam = np.r_[-1.0, -1.0, -1.0, np.linspace(-0.5, 3.0, 194), 5.0, 5.0, 5.0]
    model, quad = _quadratic(lam, seed=1)
    spec = hessian_spectrum(model, quad, k=4, steps=40, block=3)
    assert spec.ok
    np.testing.assert_allclose(spec.eigenvalues[:3], -1.0, atol=1e-10)
    np.testing.assert_allclose(spec.eigenvalues[-3:], 5.0, atol=1e-10)
    # all 4 negative: a lower bound of 4, the index not claimed
    assert int(spec.morse_lower) == 4 and int(spec.morse_index) == -1
    assert not bool(spec.morse_exact)
    # H = I: the Krylov space closes after one step; the basis goes on from random vectors
    eye = hessian_spectrum(P(jnp.zeros(100)), lambda m, a: 0.5 * jnp.sum(m.p**2), k=3, steps=20)
    assert eye.ok
    np.testing.assert_allclose(eye.eigenvalues, np.ones(6), atol=1e-12)


@pytest.mark.slow
def test_morse_index_settled_from_the_low_end():
    lam = np.r_[-2.0, -1.0, -0.5, np.linspace(0.5, 4.0, 297)]
    model, quad = _quadratic(lam, seed=2)
    spec = hessian_spectrum(model, quad, k=6, steps=60)
    # three Ritz values below the threshold: at least 3 (interlacing); the Ritz values above
    # it place no eigenvalue there, so Lanczos alone does not claim the index (it did: 3)
    assert spec.ok and int(spec.morse_lower) == 3 and int(spec.morse_index) == -1
    certified = hessian_spectrum(model, quad, k=6, steps=60, certify=True)
    assert int(certified.morse_index) == 3 and bool(certified.morse_exact)
    dense = hessian_spectrum(model, quad)
    assert int(dense.morse_index) == 3 and bool(dense.morse_exact)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(k=2, steps=0), "`steps`"),
        (dict(k=2, steps=-5), "`steps`"),
        (dict(k=2, steps=2.5), "`steps`"),
        (dict(k=2, steps="many"), "`steps`"),
        (dict(k=2, steps=61), "at most P"),
        (dict(k=2, steps=5), "at least 2k"),
        (dict(k=31), "`k`"),
        (dict(k=0), "`k`"),
        (dict(steps=10), "pass `k`"),
        (dict(k=2, block=0), "`block`"),
        (dict(k=2, tol=0.0), "`tol`"),
        (dict(k=2, tol=float("nan")), "`tol`"),
        (dict(k=2, max_restarts=-1), "`max_restarts`"),
        (dict(eig_tol=-1.0), "`eig_tol`"),
    ],
)
def test_hessian_spectrum_rejects_bad_options(kw, match):
    model, quad = _quadratic(np.linspace(-1, 1, 60))
    with pytest.raises(ValueError, match=match):
        hessian_spectrum(model, quad, **kw)


def test_a_dense_hessian_beyond_memory_is_refused_before_it_is_formed(monkeypatch):
    # at P = 51,000 (float64) `k=None` would have formed 62 GB; here the device is made small
    monkeypatch.setattr(_spectrum, "available_bytes", lambda: 10**4)
    model, quad = _quadratic(np.linspace(-1, 1, 60))
    with pytest.raises(MemoryError, match="pass `k`"):
        hessian_spectrum(model, quad)
    assert hessian_spectrum(model, quad, k=2, steps=20).ok  # Lanczos needs no P x P


@pytest.mark.slow
def test_nonfinite_loss_is_reported():
    def loss(m, a):
        return jnp.sum(m.p**2) * jnp.nan

    for kw in ({}, {"k": 2, "steps": 10}):
        spec = hessian_spectrum(P(jnp.ones(20)), loss, **kw)
        assert spec.result == RESULTS.nonfinite_point
    cp = critical_point(P(jnp.ones(20)), loss)
    assert cp.result == RESULTS.nonfinite_point


def test_dense_spectrum_under_filter_vmap_where_the_curvature_is_constant():
    # H does not depend on the batched point (a quadratic): only the point's finiteness is
    # batched, which the eager path read with bool() (TracerBoolConversionError)
    model, loss = _quadratic([-1.0, 2.0, 3.0])
    batch = P(jnp.stack([model.p, model.p + 1.0]))
    out = eqx.filter_vmap(lambda m: hessian_spectrum(m, loss))(batch)
    np.testing.assert_allclose(out.eigenvalues, [[-1.0, 2.0, 3.0]] * 2, atol=1e-12)
    assert out.morse_index.tolist() == [1, 1] and bool(jnp.all(out.ok))


@pytest.mark.slow
def test_lanczos_on_an_mlp_against_numpy():
    # a tanh MLP with 2,121 parameters on 400 samples: the 5 smallest and largest Hessian
    # eigenvalues against numpy's eigvalsh of the dense Hessian, to 1e-8 relative to ||H||
    X = jax.random.normal(jax.random.PRNGKey(0), (400, 10), jnp.float64)
    y = jnp.sin(X[:, 0]) * X[:, 1]
    mlp = eqx.nn.MLP(10, 1, 40, 2, activation=jnp.tanh, key=jax.random.PRNGKey(1))
    mlp = jax.tree_util.tree_map(
        lambda x: x.astype(jnp.float64) if eqx.is_inexact_array(x) else x, mlp
    )

    def loss(m, data):
        return 0.5 * jnp.mean((jax.vmap(m)(data[0])[:, 0] - data[1]) ** 2)

    params, static = eqx.partition(mlp, eqx.is_inexact_array)
    flat, unravel = ravel_pytree(params)
    H = jax.jit(jax.hessian(lambda x: loss(eqx.combine(unravel(x), static), (X, y))))(flat)
    ref = np.linalg.eigvalsh(np.asarray(H))
    spec = hessian_spectrum(mlp, loss, args=(X, y), k=5, steps=60)
    assert spec.ok and flat.size == 2121
    want = np.r_[ref[:5], ref[-5:]]
    np.testing.assert_allclose(spec.eigenvalues, want, atol=1e-8 * np.abs(ref).max())
    # at this random init 1,023 eigenvalues are negative: the 5 smallest give only a bound
    assert int(np.sum(ref < -1e-6 * np.abs(ref).max())) == 1023
    assert int(spec.morse_lower) == 5 and int(spec.morse_index) == -1
    assert not bool(spec.morse_exact)


def test_a_cluster_lanczos_cannot_count_is_not_claimed_and_is_certified(monkeypatch):
    # a 50-fold negative cluster: Lanczos sees a few copies of -0.47 and, past them, Ritz
    # values above the threshold, which place no eigenvalue (interlacing bounds from above
    # only): the index is -1 (not known) with a certified lower bound, and the dense count
    # of all P eigenvalues certifies 50 (it was reported as 8, or exact-looking bounds as 1)
    import integrators._critical as C
    import integrators._spectrum as S
    from integrators import certify_morse

    # (the dense default made to end at 200 parameters, so that 300 take Lanczos: at the
    # real 1,024 the test took 17 s of the default run)
    monkeypatch.setattr(S, "DENSE_MAX", 200)
    monkeypatch.setattr(C, "DENSE_MAX", 200)
    rng = np.random.default_rng(0)
    n = 300
    lam = np.concatenate([np.full(50, -0.47), rng.uniform(0.01, 1.0, n - 50)])
    model, loss = _quadratic(lam)
    spec = hessian_spectrum(model, loss, k=4)
    assert spec.ok and int(spec.morse_index) == -1 and not bool(spec.morse_exact)
    assert 1 <= int(spec.morse_lower) <= 50
    certified = certify_morse(spec, model, loss)
    assert int(certified.morse_index) == 50 and bool(certified.morse_exact)
    assert int(hessian_spectrum(model, loss, k=4, certify=True).morse_index) == 50
    cp = critical_point(model, loss, num_eigenpairs=4)
    assert cp.ok and int(cp.morse_index) == 50
    # beyond what the dense count takes: critical, but the index is not claimed
    monkeypatch.setattr(S, "CERTIFY_MAX", 250)
    cp = C.critical_point(model, loss, num_eigenpairs=4)
    assert cp.result == RESULTS.uncertified_index and int(cp.morse_index) == -1
    assert C.critical_point(model, loss, num_eigenpairs=4, certify=False).ok


@pytest.mark.slow
def test_a_wide_nets_origin_cluster_is_certified_where_lanczos_does_not_converge():
    # at the origin saddle of a width-m tanh net each neuron gives one negative eigenvalue,
    # -||E[y (x, 1)]||: an m-fold cluster. Lanczos ran out of restarts on it, and the
    # certification was skipped for a spectrum that failed (index -1 at a critical point
    # whose index the dense count gives); now counted, against jax.hessian + numpy
    width, d = 150, 6
    keys = jax.random.split(jax.random.PRNGKey(3), 3)
    X = jax.random.normal(keys[0], (64, d), jnp.float64)
    y = jnp.tanh(X[:, 0] - 0.5 * X[:, 1])
    mlp = eqx.nn.MLP(d, 1, width, 1, activation=jnp.tanh, key=keys[1])
    mlp = jax.tree_util.tree_map(lambda x: 1e-3 * x if eqx.is_array(x) else x, mlp)

    def loss(model, data):
        return 0.5 * jnp.mean((jax.vmap(model)(data[0])[:, 0] - data[1]) ** 2)

    params, static = eqx.partition(mlp, eqx.is_inexact_array)
    flat, unravel = ravel_pytree(params)
    H = jax.hessian(lambda x: loss(eqx.combine(unravel(x), static), (X, y)))(flat)
    values = np.linalg.eigvalsh(np.asarray(H))
    expected = int(np.sum(values < -1e-6 * np.max(np.abs(values))))
    assert expected == width and flat.size > 1024
    spec = hessian_spectrum(mlp, loss, args=(X, y), k=4, max_restarts=2, certify=True)
    assert spec.result == RESULTS.unconverged_eigenvalues
    assert int(spec.morse_index) == width and bool(spec.morse_exact)
    np.testing.assert_allclose(float(spec.scale), np.max(np.abs(values)), rtol=1e-12)
