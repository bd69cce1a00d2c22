"""What several test modules share: a small orthonormal instance, a small ReLU MLP regression,
and the bad-input tables."""

import inspect

import equinox as eqx
import jax
import jax.numpy as jnp
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
