"""What several test modules share: a small orthonormal instance, and the bad-input tables."""

import inspect

import jax
import pytest

from dynamics import balanced_init, orthogonal_data


def orthogonal_instance(key, n, m, alpha, d=None):
    """Orthonormal data (n, d) with Gaussian labels and a balanced init of width m."""
    kx, kw = jax.random.split(key)
    X, y = orthogonal_data(n, d, key=kx)
    return X, y, balanced_init(m, X.shape[1], alpha, key=kw)


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
