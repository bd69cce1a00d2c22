"""Doctests of the library run in float64, with jax, jnp and np at hand (as in the tests)."""

import os

# test workers run side by side: on a GPU, none may take most of its memory up front
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# the default run is bound by XLA compilation, not by running the compiled code, so the tests
# ask XLA to compile cheaply: LLVM's optimization passes off, fusions by XLA's classic
# elemental emitters instead of its MLIR fusion emitters, one LLVM module per program. On a
# 2-core machine the default run took 131 s so, against 210 s with -O0 alone; the quick main
# job's figures agree with an -O0 run to 2e-7 (different code, the same solver tolerances).
# A user's runs keep XLA's defaults (there these flags make nothing faster); set XLA_FLAGS to
# override. Subprocesses that set their own flags append to these (TESTS_XLA_FLAGS).
TESTS_XLA_FLAGS = (
    "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"
    " --xla_cpu_parallel_codegen_split_count=1"
)
os.environ.setdefault("XLA_FLAGS", TESTS_XLA_FLAGS)
os.environ["TESTS_XLA_FLAGS"] = TESTS_XLA_FLAGS

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)


@pytest.fixture(autouse=True)
def _doctest_namespace(doctest_namespace):
    doctest_namespace.update(jax=jax, jnp=jnp, np=np)
