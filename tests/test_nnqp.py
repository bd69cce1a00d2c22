import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

from theory.numerics import nnqp


def test_nnqp_against_scipy_and_its_kkt_conditions():
    key = jax.random.PRNGKey(0)
    for seed in range(4):
        A = jax.random.normal(jax.random.fold_in(key, seed), (12, 8))
        G, b = A.T @ A, jax.random.normal(jax.random.fold_in(key, 100 + seed), (8,))
        sol = nnqp(G, b, tol=1e-12, max_steps=100)
        lam, passive, it = sol.lam, sol.passive, sol.stats["num_steps"]
        assert bool(sol.ok)
        # scipy: min 1/2 lam^T G lam - b^T lam, lam >= 0, as a bounded least-squares problem
        R = np.linalg.cholesky(np.asarray(G)).T
        ref = scipy.optimize.lsq_linear(R, np.linalg.solve(R.T, np.asarray(b)), bounds=(0, np.inf))
        np.testing.assert_allclose(lam, ref.x, atol=1e-8)
        w = b - G @ lam  # KKT: lam >= 0, w <= 0 off the support, w = 0 on it
        assert float(jnp.min(lam)) >= 0.0
        assert float(jnp.max(jnp.where(passive, jnp.abs(w), w))) < 1e-10
        assert int(it) < 100


@pytest.mark.slow  # default-run budget: the capability keeps other default tests
def test_nnqp_hand_case_and_vmap():
    sol = nnqp(jnp.eye(2), jnp.array([1.0, -1.0]), tol=1e-12, max_steps=20)
    lam, passive = sol.lam, sol.passive
    np.testing.assert_allclose(lam, [1.0, 0.0])
    assert passive.tolist() == [True, False]
    batch = jax.vmap(lambda b: nnqp(jnp.eye(2), b, tol=1e-12, max_steps=20).lam)(
        jnp.array([[1.0, 2.0], [-1.0, 3.0]])
    )
    np.testing.assert_allclose(batch, [[1.0, 2.0], [0.0, 3.0]])


def test_lu_solve_against_numpy():
    from theory.numerics import lu_solve

    solve = jax.jit(lu_solve, static_argnames="unroll")
    rng = np.random.default_rng(0)
    # unrolled up to k = 16, else (and for unroll=False) a loop
    for k, unroll, p in ((5, True, 0), (5, False, 3), (17, True, 3)):
        M, b = rng.normal(size=(k, k)), rng.normal(size=(k, p) if p else k)
        x = solve(jnp.asarray(M), jnp.asarray(b), unroll=unroll)
        np.testing.assert_allclose(x, np.linalg.solve(M, b), rtol=1e-9, atol=1e-11)
    # singular: non-finite entries (as LAPACK's getrf/getrs), not a finite wrong answer
    assert not np.all(np.isfinite(solve(jnp.asarray(M).at[0].set(0.0), jnp.asarray(b))))


def test_spd_inverse_against_numpy():
    from theory.numerics import spd_inverse

    inverse = jax.jit(spd_inverse)
    rng = np.random.default_rng(0)
    # the base case (k <= 8), uneven splits, a batch, and a Gram block of condition ~1e4
    for shape, d in (((5, 5), 7), ((3, 19, 19), 22), ((2, 64, 64), 64)):
        X = rng.normal(size=shape[:-1] + (d,))
        M = X @ np.swapaxes(X, -1, -2)
        expected = np.linalg.inv(M)
        scale = np.max(np.abs(expected))
        np.testing.assert_allclose(inverse(jnp.asarray(M)), expected, atol=1e-9 * scale)
