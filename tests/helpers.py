"""What several test modules share: a small orthonormal instance, a small ReLU MLP regression,
and the bad-input tables."""

import inspect

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics import balanced_init, orthogonal_data


def orthogonal_instance(key, n, m, alpha, d=None):
    """Orthonormal data (n, d) with Gaussian labels and a balanced init of width m."""
    kx, kw = jax.random.split(key)
    X, y = orthogonal_data(n, d, key=kx)
    return X, y, balanced_init(m, X.shape[1], alpha, key=kw)


def relu_mlp_problem(n, width, bias):
    """A float64 ReLU `eqx.nn.MLP` (3 -> width -> width -> 1, with or without biases), n
    Gaussian inputs with targets |x_0| - x_1, and its mean squared loss(model, (X, y))."""
    mlp = eqx.nn.MLP(3, 1, width, 2, activation=jax.nn.relu, use_bias=bias,
                     use_final_bias=bias, key=jax.random.PRNGKey(2))  # fmt: skip
    mlp = jax.tree_util.tree_map(lambda x: x.astype(jnp.float64) if eqx.is_array(x) else x, mlp)
    X = jax.random.normal(jax.random.PRNGKey(3), (n, 3), jnp.float64)

    def loss(model, data):
        X, y = data
        return 0.5 * jnp.mean((jax.vmap(model)(X)[:, 0] - y) ** 2)

    return mlp, loss, (X, jnp.abs(X[:, 0]) - X[:, 1])


def table_rows(cases: dict) -> list:
    """`{name: [(call, error, fragment), ...]}` as parametrize rows labelled `name[i]`."""
    return [
        (f"{name}[{i}]", *case) for name, cases in cases.items() for i, case in enumerate(cases)
    ]


def bad_input_test(rows):
    """The parametrized test of a bad-input table: each call raises `error` matching `fragment`."""

    @pytest.mark.parametrize("label, call, error, fragment", rows, ids=[r[0] for r in rows])
    def test_bad_input_is_refused_with_a_message_naming_it(label, call, error, fragment):
        with pytest.raises(error, match=fragment):
            call()

    return test_bad_input_is_refused_with_a_message_naming_it


def public_functions(module) -> set:
    """The functions a package exports."""
    return {
        n for n in dir(module) if not n.startswith("_") and inspect.isfunction(getattr(module, n))
    }


class P(eqx.Module):
    """A model that is one parameter vector."""

    p: jax.Array


def quadratic_loss(lam, seed=0):
    """A quadratic loss 1/2 p^T H p with spectrum `lam` in a random orthonormal basis."""
    lam = np.asarray(lam, np.float64)
    Q = np.linalg.qr(np.random.default_rng(seed).standard_normal((lam.size, lam.size)))[0]
    H = jnp.asarray((Q * lam) @ Q.T)
    return P(jnp.zeros(lam.size)), lambda m, a: 0.5 * m.p @ H @ m.p


def tanh_mlp_problem():
    """A 1-hidden-layer tanh MLP (2-3-1) with its loss on 6 samples (x, sin x_0)."""
    mlp = eqx.nn.MLP(2, 1, 3, 1, activation=jnp.tanh, key=jax.random.PRNGKey(0))
    X = jax.random.normal(jax.random.PRNGKey(1), (6, 2), jnp.float64)
    y = jnp.sin(X[:, 0])

    def loss(model, data):
        return 0.5 * jnp.mean((jax.vmap(model)(data[0])[:, 0] - data[1]) ** 2)

    return mlp, loss, (X, y)
