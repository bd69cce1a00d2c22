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
