"""Doctests of the library run in float64, with jax, jnp and np at hand (as in the tests)."""

import os

# test workers run side by side: on a GPU, none may take most of its memory up front
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# the default run is bound by XLA compilation, not by running the compiled code: LLVM's
# optimization passes off for the tests (about a fifth less wall time; the numbers are the
# same IEEE operations). A user's runs keep XLA's defaults; set XLA_FLAGS to override.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")

import jax  # noqa: E402
import jax.numpy as jnp
import numpy as np  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)


@pytest.fixture(autouse=True)
def _doctest_namespace(doctest_namespace):
    doctest_namespace.update(jax=jax, jnp=jnp, np=np)
