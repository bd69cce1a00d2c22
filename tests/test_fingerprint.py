"""Content fingerprints (`integrators._fingerprint`): what a sweep depends on enters its
fingerprint, and what cannot be told apart is refused."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_sweep import _Config, _Scaled, _scaled, _Sim

from integrators import SweepConfigError, sweep


def test_captured_values_enter_the_fingerprint(tmp_path):
    def make_run(scale, table):
        def run(key):
            return {"x": scale * jax.random.normal(key) + table[0]}

        return run

    big = np.zeros(2000)
    sweep(make_run(1.0, big), seeds=2, out=tmp_path / "a", progress=False)
    with pytest.raises(SweepConfigError):  # a closure value
        sweep(make_run(2.0, big), seeds=2, out=tmp_path / "a", progress=False)
    changed = big.copy()
    changed[1500] = 1.0  # beyond what str() of the array shows
    with pytest.raises(SweepConfigError):
        sweep(make_run(1.0, changed), seeds=2, out=tmp_path / "a", progress=False)
    sweep(_scaled, seeds=2, grid=[{"scale": 1.0}], config={"t": big}, out=tmp_path / "b")
    with pytest.raises(SweepConfigError, match="config"):
        sweep(_scaled, seeds=2, grid=[{"scale": 1.0}], config={"t": changed}, out=tmp_path / "b")


def test_what_a_run_depends_on_is_fingerprinted_not_resumed_stale(tmp_path):
    # a bound method's instance (Sim(2.0).run resumed Sim(1.0).run's folder)
    sweep(_Sim(1.0).run, seeds=2, out=tmp_path / "a", progress=False)
    with pytest.raises(SweepConfigError, match="code"):
        sweep(_Sim(2.0).run, seeds=2, out=tmp_path / "a", progress=False)
    # a config object's attributes, by value (its repr names only its address)
    config = _Config()
    config.scale = 1.0

    def run(key):
        return {"x": config.scale * jax.random.normal(key)}

    sweep(run, seeds=2, out=tmp_path / "b", progress=False)
    config.scale = 2.0
    with pytest.raises(SweepConfigError, match="code"):
        sweep(run, seeds=2, out=tmp_path / "b", progress=False)
    # a value captured by a jax.jit-wrapped run
    scale = [1.0]
    jitted = jax.jit(lambda key: {"x": scale[0] * jax.random.normal(key)})
    sweep(jitted, seeds=2, out=tmp_path / "c", progress=False)
    scale[0] = 2.0
    with pytest.raises(SweepConfigError, match="code"):
        sweep(jitted, seeds=2, out=tmp_path / "c", progress=False)
    # a callable eqx.Module as run ("unhashable type" before), by its fields
    one = sweep(_Scaled(jnp.asarray(1.0)), seeds=3, progress=False).outputs[0]["x"]
    two = sweep(_Scaled(jnp.asarray(2.0)), seeds=3, progress=False).outputs[0]["x"]
    np.testing.assert_allclose(two, 2 * one)
    # what cannot be told from another is refused, not trusted
    opaque = object.__new__(type("Opaque", (), {"__slots__": ()}))

    def run_opaque(key):
        return {"x": jax.random.normal(key) + (opaque is None)}

    with pytest.raises(ValueError, match="cannot fingerprint"):
        sweep(run_opaque, seeds=2, progress=False)


def test_two_equal_lambdas_resume_each_other(tmp_path):
    # a lambda's source is its whole statement: two equal lambdas in calls with other
    # arguments (seeds=5) were told apart, and the resume was refused
    sweep(lambda k: {"x": jax.random.normal(k)}, seeds=3, out=tmp_path, progress=False)
    more = sweep(lambda k: {"x": jax.random.normal(k)}, seeds=5, out=tmp_path, progress=False)
    assert more.loaded_chunks >= 1 and more.outputs[0]["x"].shape == (5,)
