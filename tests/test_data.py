import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics import orthogonal_data


def test_orthogonal_data_is_a_random_rotation():
    X, y = orthogonal_data(5, 8, key=jax.random.PRNGKey(0))
    assert X.shape == (5, 8) and y.shape == (5,)
    np.testing.assert_allclose(X @ X.T, np.eye(5), atol=1e-12)
    assert np.abs(X).max() < 0.99  # not the standard basis
    X2, _ = orthogonal_data(5, 8, key=jax.random.PRNGKey(1))
    assert not np.allclose(X, X2)


def test_haar_rotation_has_no_preferred_direction():
    # invariant: under the Haar measure E <x_1, e_k>^2 = 1/d for every coordinate k
    keys = jax.random.split(jax.random.PRNGKey(2), 400)
    X = jax.vmap(lambda k: orthogonal_data(1, 4, key=k)[0][0])(keys)
    np.testing.assert_allclose(np.mean(np.asarray(X) ** 2, axis=0), 0.25, atol=0.04)


@pytest.mark.parametrize(
    "n, d, match", [(5, 4, "`d`"), (0, None, "`n`"), (2.5, None, "`n`"), (3, 3.0, "`d`")]
)
def test_bad_sizes_name_the_argument(n, d, match):
    with pytest.raises(ValueError, match=match):
        orthogonal_data(n, d, key=jax.random.PRNGKey(0))


def test_sign_labels_are_the_signs_of_the_gaussian_ones():
    key = jax.random.PRNGKey(3)
    X, y = orthogonal_data(6, key=key)
    Xs, ys = orthogonal_data(6, key=key, labels="sign")
    np.testing.assert_array_equal(X, Xs)
    np.testing.assert_array_equal(ys, np.where(np.asarray(y) >= 0, 1.0, -1.0))


def test_correlated_data_and_loewdin():
    from dynamics import correlated_data, loewdin

    X = correlated_data(6, 0.4, key=jax.random.PRNGKey(1), dtype=jnp.float64)
    G = X @ X.T
    np.testing.assert_allclose(G, 0.6 * np.eye(6) + 0.4, atol=1e-13)
    Q = loewdin(X)
    np.testing.assert_allclose(Q @ Q.T, np.eye(6), atol=1e-12)
    # the nearest orthonormal rows: Q = (X X^T)^(-1/2) X, so Q X^T is symmetric positive
    S = np.asarray(Q @ X.T)
    np.testing.assert_allclose(S, S.T, atol=1e-12)
    assert np.min(np.linalg.eigvalsh(S)) > 0
