import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics import (
    TwoLayerReLU,
    balanced_init,
    half_squared_norm,
    he_uniform_init,
    orthogonal_data,
    signs_and_directions,
    square_loss,
    tangent_kernel,
    tangent_kernel_max,
)


def test_balanced_init():
    model = balanced_init(7, 4, 1e-30, key=jax.random.PRNGKey(0))
    np.testing.assert_allclose(jnp.abs(model.a), 1e-30)
    np.testing.assert_allclose(jnp.linalg.norm(model.W, axis=1), 1e-30, rtol=1e-12)
    assert set(np.sign(np.asarray(model.a)).tolist()) <= {-1.0, 1.0}


@pytest.mark.parametrize("alpha", [0.0, 1.0, -1e-3, 2.0])
def test_alpha_outside_unit_interval(alpha):
    with pytest.raises(ValueError, match="alpha"):
        balanced_init(3, 3, alpha, key=jax.random.PRNGKey(0))


def test_alpha_that_underflows_float32_is_refused():
    with pytest.raises(ValueError, match="float32"):
        balanced_init(3, 3, 1e-30, key=jax.random.PRNGKey(0), dtype=jnp.float32)
    balanced_init(3, 3, 1e-10, key=jax.random.PRNGKey(0), dtype=jnp.float32)  # fine


def test_he_uniform_bounds():
    model = he_uniform_init(50, 16, key=jax.random.PRNGKey(0))
    assert jnp.abs(model.W).max() <= 1 / 4 and jnp.abs(model.a).max() <= 1 / jnp.sqrt(50)
    assert jnp.abs(model.W).max() > 0.2


def test_model_and_loss():
    model = TwoLayerReLU(jnp.array([2.0, -1.0]), jnp.array([[1.0, 0.0], [0.0, 1.0]]))
    X = jnp.array([[1.0, 0.0], [0.0, -1.0], [3.0, 2.0]])
    np.testing.assert_allclose(model.predict(X), [2.0, 0.0, 4.0])
    np.testing.assert_allclose(jax.vmap(model)(X), model.predict(X))
    np.testing.assert_allclose(square_loss(model, (X, jnp.array([1.0, 0.0, 4.0]))), 1 / 6)
    # relu'(0) = 0
    g = jax.grad(lambda m: m(jnp.array([0.0, 1.0])))(model)
    np.testing.assert_allclose(g.W[0], 0.0)
    with pytest.raises(ValueError, match="W"):
        TwoLayerReLU(jnp.ones(2), jnp.ones((3, 2)))
    with pytest.raises(ValueError, match="`y`"):
        square_loss(model, (X, jnp.ones((3, 1))))  # labels never broadcast


def test_signs_and_directions():
    X, _ = orthogonal_data(4, 6, key=jax.random.PRNGKey(0))
    model = balanced_init(5, 6, 1e-100, key=jax.random.PRNGKey(1))
    signs, directions = signs_and_directions(model, X)
    np.testing.assert_array_equal(signs, jnp.sign(model.a))
    u = model.W / jnp.linalg.norm(model.W * 1e100, axis=1, keepdims=True) * 1e100
    np.testing.assert_allclose(directions, u @ X.T, atol=1e-12)
    with pytest.raises(ValueError, match="orthonormal"):
        signs_and_directions(model, X * 1.1)


def test_tangent_kernel_is_the_jacobian_gram_matrix():
    X = jax.random.normal(jax.random.PRNGKey(0), (5, 7))  # any inputs, not only orthonormal
    model = he_uniform_init(9, 7, key=jax.random.PRNGKey(1))
    J = jax.jacobian(lambda m: m.predict(X))(model)
    flat = jnp.concatenate([J.a.reshape(5, -1), J.W.reshape(5, -1)], axis=1)
    np.testing.assert_allclose(tangent_kernel(model, X), flat @ flat.T / 5, rtol=1e-12)
    # invariant: positive semidefinite, and lambda_max is its top eigenvalue
    eigs = np.linalg.eigvalsh(np.asarray(flat @ flat.T / 5))
    assert eigs[0] > -1e-12
    np.testing.assert_allclose(tangent_kernel_max(model, X), eigs[-1], rtol=1e-10)


def test_half_squared_norm():
    model = TwoLayerReLU(jnp.array([3.0, -1.0]), jnp.array([[1.0, 2.0], [0.0, 1.0]]))
    assert float(half_squared_norm(model)) == pytest.approx(0.5 * (10 + 6))
    # any Equinox model: its inexact arrays, and nothing static
    from dynamics import LeakyReLUNet

    net = LeakyReLUNet(jnp.ones((2, 3)), jnp.array([1.0, -1.0]), 0.1)
    assert float(half_squared_norm(net)) == pytest.approx(0.5 * (6 + 2))
