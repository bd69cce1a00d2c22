"""Traces kept across processes: a sweep's programs serialized with `jax.export`.

JAX's persistent compilation cache stores compiled programs, but every process traces them
again first; for the main job's sweep that was most of a warm run (4.9 s of batching `run`
into `lax.map`, 2 s of shape probes, against 0.9 s of cache reads). Where the persistent cache
is on (`jax.config.jax_compilation_cache_dir` set), each program a sweep runs is exported once
(its StableHLO, `jax.export`) and written next to the cache, with what its trace found (the
argument checks' messages, the batch size, the shapes of one seed's instance and outputs); a
later process loads it and calls it without tracing `make` or `run`.

A record is keyed by everything its program depends on: the engine's own source (every `.py`
file of `theory`, `dynamics` and `integrators`, by content), the source of the caller's own
loaded modules, the versions of JAX, jaxlib, diffrax, equinox, lineax, optimistix, optax and
numpy, JAX's settings (x64, matmul precision), the code digests of `run` and `make`
(`theory.numerics`' fingerprint: code, defaults, closures, globals), the static parameters, the
dynamic parameters' shapes and dtypes, the devices and the batch size. The key is stored inside
the record as well and checked on load: a record whose key differs, or that fails to load, is
ignored (and rewritten), never used.
"""

import hashlib
import os
import pickle
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

from ._fingerprint import digest

_FORMAT = 1  # the record layout; a change makes old records stale


_LIBRARIES = ("jax", "jaxlib", "diffrax", "equinox", "lineax", "optimistix", "optax", "numpy")
# process-wide JAX settings that change a traced program
_SETTINGS = ("jax_enable_x64", "jax_default_matmul_precision", "jax_numpy_rank_promotion")


def engine_version() -> str:
    """A digest of everything a sweep's program depends on besides its arguments: the engine's
    source (theory, dynamics, integrators), the source of every other module loaded from
    outside the installed libraries and the standard library (the caller's own modules and
    their helpers, which `code_digest` knows by name only), the versions of the libraries
    the engine traces through, and JAX's settings. Computed afresh at each sweep, so an edit
    in a running notebook makes a new key."""
    import importlib.metadata  # noqa: PLC0415
    import sys  # noqa: PLC0415
    import sysconfig  # noqa: PLC0415

    h = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent
    files = {f for package in ("theory", "dynamics", "integrators")
             for f in (root / package).rglob("*.py")}  # fmt: skip
    installed = tuple(
        str(Path(sysconfig.get_paths()[k]).resolve()) for k in ("stdlib", "purelib", "platlib")
    )
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if name and name.endswith(".py"):
            path = Path(name).resolve()
            if not str(path).startswith(installed):
                files.add(path)
    for f in sorted(files):
        try:
            h.update(str(f).encode())
            h.update(f.read_bytes())
        except OSError:
            h.update(b"unreadable")
    for lib in _LIBRARIES:
        try:
            h.update(f"{lib} {importlib.metadata.version(lib)}".encode())
        except importlib.metadata.PackageNotFoundError:
            h.update(f"{lib} absent".encode())
    for setting in _SETTINGS:
        h.update(f"{setting} {getattr(jax.config, setting, None)}".encode())
    h.update(f"{_FORMAT}".encode())
    return h.hexdigest()


def store_dir() -> Path | None:
    """Where records go: `sweep_exports` in JAX's persistent cache folder, or None (no
    persistence) where that cache is off."""
    folder = jax.config.jax_compilation_cache_dir
    return None if not folder else Path(folder) / "sweep_exports"


def record_key(*parts) -> str:
    return digest((engine_version(), *parts))


def load(key: str) -> dict | None:
    """The record stored under `key`, or None (absent, unreadable, or stored for another key)."""
    folder = store_dir()
    if folder is None:
        return None
    try:
        record = pickle.loads((folder / f"{key}.pkl").read_bytes())
    except Exception:  # absent, truncated, or from an incompatible version
        return None
    return record if isinstance(record, dict) and record.get("key") == key else None


def save(key: str, record: dict) -> None:
    """Write `record` under `key`, atomically (a reader never sees half a file)."""
    folder = store_dir()
    if folder is None:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump({**record, "key": key}, f)
        os.replace(tmp, folder / f"{key}.pkl")
    except Exception:  # a read-only or full disk: the sweep runs on, traced as before
        return


def signature(*trees) -> str:
    """The structure, shapes and dtypes of the arguments, traced or concrete (Python scalars
    as JAX takes them): one exported program per signature, and the checks' messages of
    each trace (`_sweep_programs._Messages`)."""
    leaves, tree = jax.tree_util.tree_flatten(trees)
    return repr([(tuple(np.shape(x)), str(jnp.result_type(x))) for x in leaves]) + repr(tree)


class Persistent:
    """A jitted function called through its exported program: loaded from the record when
    one was stored for the arguments' signature, else exported once (one trace) and stored.
    The program takes and returns flat lists of arrays (an export serializes only JAX's own
    pytree nodes); the output's structure is stored beside it as a skeleton (the pytree with
    0 for every leaf). Falls back to the jitted function where export fails (a host
    callback, say)."""

    def __init__(self, jitted, on_export):
        self.jitted = jitted
        self.on_export = on_export  # called with (signature, entry) after a trace
        self.entries: dict[str, dict] = {}
        self.calls: dict = {}

    def _export(self, args) -> dict:
        leaves, in_tree = jax.tree_util.tree_flatten(args)
        out_tree = []

        def flat(*leaves):
            out = self.jitted(*jax.tree_util.tree_unflatten(in_tree, leaves))
            out_leaves, tree = jax.tree_util.tree_flatten(out)
            out_tree.append(tree)
            return out_leaves

        blob = bytes(export.export(jax.jit(flat))(*leaves).serialize())
        skeleton = jax.tree_util.tree_unflatten(out_tree[0], [0] * out_tree[0].num_leaves)
        return {"blob": blob, "skeleton": skeleton}

    def __call__(self, *args):
        sig = signature(*args)
        call = self.calls.get(sig)
        if call is not None:
            return call(*args)
        try:
            entry = self.entries.get(sig)
            if entry is None:
                entry = self._export(args)
                self.entries[sig] = entry
                self.on_export(sig, entry)
            program = jax.jit(export.deserialize(bytearray(entry["blob"])).call)
            out_tree = jax.tree_util.tree_structure(entry["skeleton"])

            def call(*args, program=program, out_tree=out_tree):
                leaves = program(*jax.tree_util.tree_leaves(args))
                return jax.tree_util.tree_unflatten(out_tree, leaves)

            out = call(*args)  # the first call compiles: inside the fallback too
        except Exception:  # not exportable, or a stored program that does not run here
            self.entries.pop(sig, None)
            call, out = self.jitted, self.jitted(*args)
        self.calls[sig] = call
        return out
