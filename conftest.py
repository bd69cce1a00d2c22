"""Doctests of the library run in float64, with jax, jnp and np at hand (as in the tests)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.fixture(autouse=True)
def _doctest_namespace(doctest_namespace):
    doctest_namespace.update(jax=jax, jnp=jnp, np=np)
