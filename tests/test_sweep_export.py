"""`integrators._sweep_export`: a sweep's programs kept across processes, never stale."""

import jax
import numpy as np
import pytest

from integrators import _sweep_export, sweep
from integrators._sweep_programs import _PROGRAMS


def _run(key, alpha):
    return {"x": alpha * jax.random.normal(key, (3,)), "y": jax.numpy.sin(alpha)}


@pytest.fixture
def store(tmp_path, monkeypatch):
    """The records in tmp_path, and a fresh process's program table. JAX's own persistent
    cache is left off: once on, a process keeps writing every compile to it."""
    folder = tmp_path / "sweep_exports"
    monkeypatch.setattr(_sweep_export, "store_dir", lambda: folder)
    _PROGRAMS.clear()
    yield folder
    _PROGRAMS.clear()


def _sweep():
    return sweep(_run, seeds=6, grid=[{"alpha": 0.5}], progress=False).outputs[0]


def _count_exports(monkeypatch):
    calls = []
    export = _sweep_export.Persistent._export

    def counted(self, args):
        calls.append(1)
        return export(self, args)

    monkeypatch.setattr(_sweep_export.Persistent, "_export", counted)
    return calls


def test_a_later_process_runs_the_stored_programs_untraced(store, monkeypatch):
    first = _sweep()
    assert len(list(store.glob("*.pkl"))) == 1
    _PROGRAMS.clear()  # as in a new process
    calls = _count_exports(monkeypatch)
    second = _sweep()
    assert calls == []  # loaded, not traced
    for k in first:
        np.testing.assert_array_equal(first[k], second[k])


def test_a_record_from_other_engine_source_is_never_used(store, monkeypatch):
    _sweep()
    _PROGRAMS.clear()
    # an edit of the engine, of the caller's own modules, a library upgrade or a JAX setting
    monkeypatch.setattr(_sweep_export, "engine_version", lambda: "another version")
    calls = _count_exports(monkeypatch)
    _sweep()
    assert len(calls) == 2  # make and run traced again, under a new key
    assert len(list(store.glob("*.pkl"))) == 2


def test_a_record_stored_under_another_key_or_truncated_is_ignored(store, monkeypatch):
    _sweep()
    (path,) = store.glob("*.pkl")
    key = path.stem
    other = "0" * len(key)
    (store / f"{other}.pkl").write_bytes(path.read_bytes())
    assert _sweep_export.load(other) is None  # the key inside is checked
    path.write_bytes(path.read_bytes()[:100])  # truncated
    assert _sweep_export.load(key) is None
    _PROGRAMS.clear()
    calls = _count_exports(monkeypatch)
    out = _sweep()
    assert len(calls) == 2 and out["x"].shape == (6, 3)


def test_without_a_persistent_cache_nothing_is_written():
    if jax.config.jax_compilation_cache_dir:
        pytest.skip("this process has a persistent cache")
    assert _sweep_export.store_dir() is None
    _sweep_export.save("k", {"a": 1})  # a no-op


def test_the_key_covers_the_callers_modules_libraries_and_settings(tmp_path, monkeypatch):
    import sys
    import types

    before = _sweep_export.engine_version()
    helper = tmp_path / "user_helper_module.py"
    helper.write_text("def physics(x):\n    return x\n")
    module = types.ModuleType("user_helper_module")
    module.__file__ = str(helper)
    monkeypatch.setitem(sys.modules, "user_helper_module", module)
    with_helper = _sweep_export.engine_version()
    helper.write_text("def physics(x):\n    return -x\n")  # edited: a new key
    assert len({before, with_helper, _sweep_export.engine_version()}) == 3
    before = _sweep_export.engine_version()
    jax.config.update("jax_default_matmul_precision", "highest")
    try:
        assert _sweep_export.engine_version() != before
    finally:
        jax.config.update("jax_default_matmul_precision", None)
