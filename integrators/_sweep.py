"""Seed sweeps: sharded over devices, cache-aware, resumable after a kill.

A sweep runs one simulation for `seeds` seeds at every point of a parameter grid. Per point,
seeds go in *chunks*; each chunk is one call of two compiled programs, `run` sharded over a
`jax.sharding.Mesh` of all devices along a `"seed"` axis:

    make(key, **params) -> instance          (data and initialization of one seed)
    run(instance, **params) -> {name: array}  (the simulation; one seed in, arrays out)

They are separate programs on purpose: `make` runs unsharded, because batched LAPACK kernels can
deadlock on XLA:CPU with several host devices (`integrators._sweep_programs` says when and
which solvers are safe); a `run` of your own that calls batched LAPACK (`jnp.linalg.solve`,
`eigh`, `svd` on stacks of matrices) can hang the same way on CPU.

Inside a device, `lax.map(..., batch_size=b)` vmaps `b` seeds at a time. The rule for `b`:
the largest power of two whose compiled working set (XLA's memory analysis of one seed, times
`b`) fits in half of the L2 cache on CPU, or in an eighth of the device's memory on GPU. On a
2-core Xeon (2 MiB L2), GD on n = 64, m = 47 runs at ~2e5 seed-epochs/s for b <= 4 and drops
to ~9e4 for b >= 8, where the batch falls out of cache. Where one seed's traced program
already holds a loop state (or used arguments and outputs, after dead-code elimination)
larger than half that budget, b is 1 without compiling for the memory analysis
(`_sweep_programs.loop_state_bytes`).

Seed i always uses `jax.random.fold_in(PRNGKey(base_seed), i)`, so results do not depend on
chunking, batching or sharding. Each finished chunk is written atomically (`npz`, no pickle)
under `out/chunks/`; running the same sweep again loads finished chunks and computes only the
rest, and running it with more seeds computes only the new ones (the seed count is not part of
the configuration; fewer seeds read the folder's first ones). `out/sweep.json` holds the
configuration's fingerprint: a different configuration in the same folder is refused; the
configuration includes the name and source hash of `run` and `make` with everything they
capture (`integrators._fingerprint`: closure values, the module globals they read,
`functools.partial` arguments, a bound method's instance, a `jax.jit`-wrapped function's own
function, objects by their attributes' values (not their repr), a callable `eqx.Module`'s
fields and `__call__`, array contents; not the library code they call, and not the name of
their module). A value it cannot tell from another (an object with no attributes and only
the default repr) is refused (`ValueError`), not trusted. The compiled programs kept in the
process for later sweeps are keyed by the same fingerprints. Each chunk file is stamped with
the fingerprint, its grid point (index and parameters) and its seed range; a file that does
not match is recomputed, never merged. A damaged `sweep.json` is rewritten like a damaged
chunk. A sweep whose chunks are all on disk
loads them without compiling anything, and `load_sweep(out)` reads a finished or partial sweep
back without the functions. A chunk whose solve raises is recorded and reported (its seeds are
NaN / -1 / False), the sweep goes on, and a rerun retries it.

Two processes may run the same sweep into one folder at once: every file is written to a
private temporary name and renamed atomically, so none is ever corrupted, but both may
compute the same chunks (the work is duplicated, not coordinated).

Multi-host: call `jax.distributed.initialize()` in every process before the sweep; the mesh
then spans all processes' devices, every process computes its share, and process 0 writes.
"""

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from theory import RESULTS
from theory.checks import check_flag, check_positive_int

from . import _sweep_export
from ._fingerprint import code_digest, digest
from ._sweep_programs import (
    _PROGRAMS,
    _compute_chunk,
    _error_message,
    _key_itself,
    _Programs,
    _Progress,
    pick_batch_size,
)
from ._sweep_store import (
    _SECONDS,
    _agree_on_loading,
    _atomic_savez,
    _chunk_path,
    _chunk_ranges,
    _chunks,
    _counts,
    _drop_failure_records,
    _fill,
    _flat_names,
    _load_chunk,
    _read_failure_records,
    _read_manifest,
    _record_batch_size,
    _refusal,
    _with_counts,
    _write_json,
)

__all__ = ["SweepConfigError", "SweepSolution", "load_sweep", "sweep", "pick_batch_size"]


class SweepConfigError(ValueError):
    """The output folder holds a sweep with a different configuration.

    >>> import tempfile
    >>> out = tempfile.mkdtemp()
    >>> run = lambda key, scale: {"x": scale * jax.random.normal(key)}
    >>> _ = sweep(run, seeds=2, grid=[{"scale": 1.0}], out=out, progress=False)
    >>> try:
    ...     sweep(run, seeds=2, grid=[{"scale": 2.0}], out=out, progress=False)
    ... except SweepConfigError as err:
    ...     print("refused:", "points" in str(err))
    refused: True
    """


class SweepSolution(NamedTuple):
    """What `sweep` and `load_sweep` return (a host-side record of many solves).

    - `points`: the grid points (dicts of parameters), in order.
    - `outputs`: per point, `{name: array}` with a leading seed axis of length `seeds`.
    - `failed`: per point, a list of `{"seeds": [lo, hi], "error": str}` for chunks that raised.
    - `computed_chunks`, `loaded_chunks`: chunks computed now / loaded from `out`.
    - `batch_size`, `chunk_size`, `devices`: what ran (`batch_size` is 0 when nothing had to
      be computed and the manifest does not say); `wall_seconds`: this call's time;
      `point_seconds`: per point, what computing its chunks took (compilation included
      where it happened), each loaded chunk's as recorded when it was computed, so a
      resumed sweep reports what its points cost; NaN where a loaded chunk has no record
      (written before chunk files recorded it).
    - `missing`: per point, the `[lo, hi]` seed ranges with no chunk on disk (only from
      `load_sweep` of a partial sweep; their seeds are NaN / -1 / False).

    >>> res = sweep(lambda key: {"x": jax.random.normal(key)}, seeds=4, progress=False)
    >>> res.outputs[0]["x"].shape, res.computed_chunks, res.failed
    ((4,), 1, [[]])
    """

    points: list[dict]
    outputs: list[dict[str, np.ndarray]]
    failed: list[list[dict]]
    computed_chunks: int
    loaded_chunks: int
    batch_size: int
    chunk_size: int
    devices: int
    wall_seconds: float
    point_seconds: list[float]
    missing: list[list[list[int]]] = []

    @property
    def ok(self) -> bool:
        """True when every chunk of every point ran and none is missing (a host-side record,
        so a plain bool)."""
        return not any(self.failed) and not any(self.missing)

    @property
    def result(self) -> RESULTS:
        """`RESULTS.successful`, or `RESULTS.chunks_failed` where a chunk raised or is missing
        (`failed`, `missing` say which), as every solution carries its `result`."""
        return RESULTS.successful if self.ok else RESULTS.chunks_failed

    @property
    def stats(self) -> dict:
        """`computed_chunks`, `loaded_chunks`, `failed_chunks`, `missing_ranges`,
        `batch_size`, `chunk_size`, `devices` and `wall_seconds`."""
        return {
            "computed_chunks": self.computed_chunks,
            "loaded_chunks": self.loaded_chunks,
            "failed_chunks": sum(len(f) for f in self.failed),
            "missing_ranges": sum(len(m) for m in self.missing),
            "batch_size": self.batch_size,
            "chunk_size": self.chunk_size,
            "devices": self.devices,
            "wall_seconds": self.wall_seconds,
        }


def _check_arguments(run, make, grid, static, out, config, seeds, chunk_size, batch_size):
    """The arguments of `sweep`, each refused by name: (points, static, seeds, chunk_size,
    batch_size) normalized (a 0-d integer array is an int)."""
    if not callable(run):
        raise ValueError(f"`run` must be callable as run(instance, **point), got {run!r}")
    if make is not None and not callable(make):
        raise ValueError(f"`make` must be callable as make(key, **point), got {make!r}")
    if isinstance(grid, str | bytes | Mapping) or not isinstance(grid, Sequence | tuple):
        raise ValueError(f"`grid` must be a list of dicts of parameters, got {grid!r}")
    for i, point in enumerate(grid):
        if not isinstance(point, Mapping):
            raise ValueError(f"`grid` must be a list of dicts, got {point!r} at point {i}")
    points = [dict(p) for p in grid]
    if isinstance(static, str) or not all(isinstance(k, str) for k in static):
        raise ValueError(f"`static` must be a list of parameter names, got {static!r}")
    static = tuple(static)
    if out is not None:
        if not isinstance(out, str | os.PathLike):
            raise ValueError(f"`out` must be a folder path (str or Path) or None, got {out!r}")
        if Path(out).exists() and not Path(out).is_dir():
            raise ValueError(f"`out` must be a folder, got the file {out}")
    if config is not None and not isinstance(config, Mapping):
        raise ValueError(f"`config` must be a dict (or None), got {type(config).__name__}")
    seeds = check_positive_int("seeds", seeds)
    sizes = []
    for name, value in (("chunk_size", chunk_size), ("batch_size", batch_size)):
        sizes.append(None if value is None else int(check_positive_int(name, value)))
    chunk_size, batch_size = sizes
    for i, point in enumerate(points):
        missing = [k for k in static if k not in point]
        if missing:
            raise ValueError(f"`static` names {missing}, missing from grid point {i}: {point}")
    if not points:
        raise ValueError("`grid` must hold at least one point, got none")
    return points, static, seeds, chunk_size, batch_size


def sweep(
    run: Callable[..., Mapping[str, jax.Array]],
    *,
    seeds: int,
    make: Callable[..., Any] | None = None,
    grid: Sequence[Mapping[str, Any]] = ({},),
    static: Sequence[str] = (),
    out: str | Path | None = None,
    name: str = "sweep",
    config: Mapping[str, Any] | None = None,
    base_seed: int = 0,
    chunk_size: int | None = None,
    batch_size: int | None = None,
    progress: bool = True,
) -> SweepSolution:
    """Run `run(make(key_i, **p), **p)` for seeds i < `seeds` at every grid point p.

    **Arguments:**

    - `run`: one seed's simulation; returns a dict of arrays (fixed shapes). Pure, jit-able.
    - `seeds` >= 1: how many seeds at every grid point (seed i's key is
      `fold_in(PRNGKey(base_seed), i)`; `base_seed` >= 0).
    - `make`: one seed's instance from its key (default: the key itself).
    - `grid`: the grid points, each a dict of parameters passed to `make` and `run` as keywords.
      Parameters named in `static` are Python values (shapes: width, n) and compile once per
      distinct value; the others become arrays, so a sweep over alpha compiles once.
    - `out`: folder for chunk files and the manifest; `None` keeps everything in memory. A
      folder that holds this sweep's chunks (the same fingerprint) is resumed: only missing
      chunks are computed. `name`: the sweep's name in the manifest and in progress lines.
    - `config`: anything else that defines the sweep (it enters the fingerprint, by content).
    - `chunk_size`: seeds per chunk (default: 64 rounded to devices x batch, or fewer when
      there are fewer seeds; at most `seeds`); a resumed sweep keeps the chunk size of its
      manifest. A chunk is padded to a multiple of the device count, never further.
      `batch_size`: seeds vmapped together per device (default: the cache rule,
      `pick_batch_size`). Both must be positive integers (`ValueError`).
    - `progress`: print a line per chunk to stderr.

    **Returns:** a `SweepSolution`: per point, the outputs with a leading seed axis, the
    chunks that failed (with their errors; a failed chunk does not stop the sweep), what was
    computed or loaded, and the seconds.

    **Raises:** `ValueError` where `run` or `make` is not callable, `grid` is not a
    non-empty list of dicts, `static` names a parameter missing from a point, `out` is a
    file, `config` is not a dict, or a count (`seeds`, `base_seed`, `chunk_size`,
    `batch_size`) is not a positive int (`base_seed` non-negative). `SweepConfigError` where
    `out` holds another sweep (another fingerprint: it names what differs).

    >>> res = sweep(lambda key, alpha: {"x": alpha * jax.random.normal(key)}, seeds=100,
    ...             grid=[{"alpha": 0.1}, {"alpha": 1.0}], progress=False)
    >>> res.outputs[1]["x"].shape
    (100,)
    """
    timer = time.perf_counter()
    points, static, seeds, chunk_size, batch_size = _check_arguments(
        run, make, grid, static, out, config, seeds, chunk_size, batch_size
    )
    base_seed = check_positive_int("base_seed", base_seed, minimum=0)  # 2.7 and '5' refused
    progress = check_flag("progress", progress)  # ('yes' was taken as True)
    make = _key_itself if make is None else make
    devices = jax.devices()
    mesh = Mesh(np.array(devices), ("seed",))
    dtype = jnp.zeros(()).dtype
    spec, identity, code = _identity(name, seeds, base_seed, points, static, config, dtype,
                                     run, make)  # fmt: skip
    fingerprint = digest(identity)
    writer = jax.process_index() == 0
    out = None if out is None else Path(out)
    manifest, chunk_size = _open_folder(out, fingerprint, identity, seeds, chunk_size, writer)
    key0 = jax.random.PRNGKey(base_seed)
    layouts = _layouts(points, static, dtype, code, (make, run), mesh, batch_size, key0)
    if chunk_size is None:
        chunk_size = _default_chunk_size(layouts[0], len(devices))
    chunk_size = int(chunk_size)  # kept as asked: a later run with more seeds uses it too
    if out is not None and writer and manifest is None:
        manifest = {
            "fingerprint": fingerprint, "spec": spec, "identity": identity,
            "chunk_size": chunk_size, "counts": [seeds], "devices": len(devices),
            "outputs": _output_shapes(layouts),
        }  # fmt: skip
        _write_json(out / "sweep.json", manifest)

    # fewer seeds than the folder holds: its chunks are read and cut to `seeds`
    counts = [seeds] if manifest is None else _counts(manifest)
    counts = counts if seeds <= counts[-1] else [*counts, seeds]
    n_chunks = sum(lo < seeds for lo, _ in _chunk_ranges(counts, chunk_size))
    runner = _PointRunner(
        out, writer, key0, len(devices), fingerprint, counts, seeds, chunk_size,
        _Progress(name, n_chunks * len(points), progress),
    )  # fmt: skip
    outputs, failed, point_seconds = [], [], []
    for index, (point, layout) in enumerate(zip(points, layouts, strict=True)):
        result, point_failed, cost = runner(index, point, layout)
        if point_failed and progress:
            sys.stderr.write(
                f"{name}: point {point}: {len(point_failed)} chunk(s) failed: "
                f"{point_failed[0]['error'][:300]}\n"
            )
        outputs.append(result)
        failed.append(point_failed)
        point_seconds.append(cost)
    ran = [lay[0].batch_size for lay in layouts if lay[0].run is not None]
    if out is not None and writer and ran and manifest.get("batch_size") != ran[0]:
        _record_batch_size(out, manifest, ran[0])
    return SweepSolution(
        points=points,
        outputs=outputs,
        failed=failed,
        computed_chunks=runner.computed,
        loaded_chunks=runner.loaded,
        batch_size=ran[0] if ran else int((manifest or {}).get("batch_size", 0)),
        chunk_size=min(chunk_size, seeds),
        devices=len(devices),
        wall_seconds=time.perf_counter() - timer,
        point_seconds=point_seconds,
        missing=[[] for _ in points],
    )


def _default_chunk_size(layout, devices: int) -> int:
    """64 seeds rounded to a multiple of devices x batch (the first point's program fixes its
    batch size: compiled here where it has not been)."""
    prog, dyn, inst_one, _ = layout
    if prog.run is None:
        prog.prepare(inst_one, dyn)
    unit = devices * prog.batch_size
    return unit * max(1, 64 // unit)


def _output_shapes(layouts) -> list[dict]:
    """Per point, each output's one-seed shape and dtype, as the manifest records them."""
    return [{k: [list(s), d.str] for k, (s, d) in lay[3].items()} for lay in layouts]


def _identity(name, seeds, base_seed, points, static, config, dtype, run, make):
    """The sweep's spec (what `sweep.json` shows), its identity (what its fingerprint is a
    digest of) and the code digests of `run` and `make`. The seed count is not part of the
    identity: seed i's result does not depend on it, so a sweep run again with more seeds
    computes only the new ones."""
    spec = {
        "name": name, "seeds": seeds, "base_seed": base_seed, "points": points,
        "static": list(static), "config": dict(config or {}), "dtype": str(dtype),
    }  # fmt: skip
    code = {"run": code_digest(run), "make": code_digest(make)}
    identity = {
        **{k: v for k, v in spec.items() if k != "seeds"},
        "points": digest(points),
        "config": digest(dict(config or {})),
        "code": code,
    }
    return spec, identity, code


def _open_folder(out, fingerprint, identity, seeds, chunk_size, writer):
    """The folder's manifest (None where it has none: a new sweep), refused where it is
    another configuration's, with the chunk size it fixes and the seed count grown."""
    if out is None:
        return None, chunk_size
    manifest = _read_manifest(out / "sweep.json")
    if manifest is not None and manifest["fingerprint"] != fingerprint:
        raise SweepConfigError(_refusal(out, manifest, identity))
    if manifest is not None:
        chunk_size = manifest["chunk_size"]
        if writer and seeds > _counts(manifest)[-1]:
            manifest = _with_counts(manifest, [seeds])
            _write_json(out / "sweep.json", manifest)
    (out / "chunks").mkdir(parents=True, exist_ok=True)
    return manifest, chunk_size


def _layouts(points, static, dtype, code, functions, mesh, batch_size, key0):
    """Per point: its programs (`_Programs`, kept in the process for later sweeps), its
    dynamic parameters, one seed's instance shapes and the outputs' names, shapes and dtypes,
    by tracing alone (nothing is compiled here)."""
    make, run = functions
    device_ids = tuple(d.id for d in mesh.devices.flat)
    layouts = []
    for point in points:
        stat = {k: point[k] for k in static}
        dyn = {}
        for k, v in point.items():
            if k in static:
                continue
            try:
                dyn[k] = jnp.asarray(v, dtype)
            except (TypeError, ValueError):
                raise ValueError(
                    f"`grid` parameter {k!r} must be a number or an array (or be named in "
                    f"`static`), got {v!r}"
                ) from None
        # keyed by content, as the results are: the function objects alone reused a program
        # traced before a global or a captured object changed (and were unhashable for a
        # callable eqx.Module)
        skey = (code["make"], code["run"], digest(stat), device_ids, batch_size)
        if skey not in _PROGRAMS:
            _PROGRAMS[skey] = _Programs(make, run, stat, mesh, batch_size)
        prog = _PROGRAMS[skey]
        record = None
        if _sweep_export.store_dir() is not None:
            dyn_avals = {k: (v.shape, str(v.dtype)) for k, v in dyn.items()}
            rkey = _sweep_export.record_key(
                code, digest(stat), str(dtype), dyn_avals, len(device_ids),
                jax.default_backend(), batch_size,
            )  # fmt: skip
            if prog.record_key != rkey:
                record = _sweep_export.load(rkey)
                prog.persist(rkey, record)
            record = prog.record if prog.record.get("shapes") else None
        if record is not None:  # what an earlier process's trace found: no trace here
            inst_one, out_one = record["shapes"]
        else:  # traced as the programs will be (the traces of jitted helpers are cached)
            inst_one = jax.eval_shape(prog.make_checked, key0, dyn)[0]
            out_one = jax.eval_shape(prog.run_checked, inst_one, dyn)[0]
            if prog.record_key is not None:
                prog.record["shapes"] = (inst_one, out_one)
        names = _flat_names(out_one)
        if not isinstance(out_one, Mapping) or not names:
            raise ValueError(
                "`run` must return a dict of arrays (one row per seed), got "
                f"{type(out_one).__name__}" + ("" if names else " with no arrays")
            )
        expected = {k: (v.shape, np.dtype(v.dtype)) for k, v in names.items()}
        layouts.append((prog, dyn, inst_one, expected))
    return layouts


class _PointRunner:
    """Runs one grid point chunk by chunk: each chunk loaded from the folder where a valid
    file holds it, else computed (and written); a chunk that raises is recorded and the
    point goes on. Counts the chunks computed and loaded over all points."""

    def __init__(self, out, writer, key0, n_dev, fingerprint, counts, seeds, chunk_size, bar):
        self.out, self.writer, self.key0, self.n_dev = out, writer, key0, n_dev
        self.fingerprint, self.counts, self.seeds = fingerprint, counts, seeds
        self.chunk_size, self.bar = chunk_size, bar
        self.computed = self.loaded = 0

    def __call__(self, index, point, layout):
        """(outputs cut to `seeds`, failed chunks, seconds) of grid point `index`."""
        prog, dyn, inst_one, expected = layout
        result = {k: _fill((self.counts[-1], *s), d) for k, (s, d) in expected.items()}
        failed, cost = [], 0.0
        for lo, hi, stamps in _chunks(self.fingerprint, index, point, self.counts,
                                      self.chunk_size):  # fmt: skip
            if lo >= self.seeds:
                break
            path = None if self.out is None else _chunk_path(self.out, index, lo, hi)
            data = None if path is None else _load_chunk(path, stamps, expected)
            data = _agree_on_loading(data, path)
            if data is None:
                data, seconds, failure = self._compute(
                    prog, inst_one, dyn, lo, hi, path, stamps, index
                )
                if failure is not None:
                    cost += seconds
                    failed.append(failure)
                    continue
                self.computed += 1
                self.bar.update(True)
            else:
                self.loaded += 1
                self.bar.update(False)
            cost += data[_SECONDS]
            for k in expected:
                result[k][lo:hi] = data[k]
        return {k: v[: self.seeds] for k, v in result.items()}, failed, cost

    def _compute(self, prog, inst_one, dyn, lo, hi, path, stamps, index):
        """One chunk computed (and written where there is a folder): (data, seconds, None),
        or (None, seconds, its failure record) where it raised."""
        start = time.perf_counter()
        try:
            if prog.run is None:
                prog.prepare(inst_one, dyn)
            padded = -(-(hi - lo) // self.n_dev) * self.n_dev
            data = _compute_chunk(prog, self.key0, lo, padded, hi - lo, dyn)
        except Exception as err:  # noqa: BLE001 - recorded, reported, retried later
            failure = {"seeds": [lo, hi], "error": _error_message(err)}
            if path is not None and self.writer:
                _write_json(path.with_suffix(".failed.json"), failure)
            self.bar.update(True)
            return None, time.perf_counter() - start, failure
        data[_SECONDS] = time.perf_counter() - start
        if path is not None and self.writer:
            record = {**stamps, _SECONDS: data[_SECONDS]}
            _atomic_savez(path, {**data, **{k: np.array(v) for k, v in record.items()}})
            _drop_failure_records(self.out, index, lo, hi)
        return data, data[_SECONDS], None


def load_sweep(out: str | Path) -> SweepSolution:
    """Read a finished (or partial) sweep back from its folder, without `run` or `make`.

    Every chunk is checked against the manifest's fingerprint, grid point and seed range, as
    when the sweep resumes; ranges without a valid chunk are listed in `missing` (their seeds
    are NaN / -1 / False). `ValueError` when `out` holds no readable `sweep.json`.

    **Arguments:** `out`: the sweep's folder (its `sweep.json` and chunks).

    **Returns:** a `SweepSolution` (`points`, `outputs`, `failed`, `loaded_chunks`,
    `missing`, the sizes and seconds of the run that wrote it).

    **Raises:** `ValueError` where `out` holds no readable `sweep.json`.

    >>> import tempfile
    >>> out = tempfile.mkdtemp()
    >>> _ = sweep(lambda key: {"x": jax.random.normal(key)}, seeds=4, out=out, progress=False)
    >>> res = load_sweep(out)
    >>> res.outputs[0]["x"].shape, res.loaded_chunks, res.missing
    ((4,), 1, [[]])
    """
    timer = time.perf_counter()
    if not isinstance(out, str | os.PathLike):
        raise ValueError(f"`out` must be a sweep folder (str or Path), got {out!r}")
    out = Path(out)
    manifest = _read_manifest(out / "sweep.json")
    if manifest is None or not {"outputs", "spec", "chunk_size", "fingerprint"} <= set(manifest):
        raise ValueError(f"`out` must be a sweep folder with a readable sweep.json, got {out}")
    spec, chunk_size = manifest["spec"], manifest["chunk_size"]
    counts, points = _counts(manifest), spec["points"]
    seeds = counts[-1]
    outputs, missing, point_seconds, loaded = [], [], [], 0
    for index, (point, layout) in enumerate(zip(points, manifest["outputs"], strict=True)):
        cost = 0.0
        expected = {k: (tuple(s), np.dtype(d)) for k, (s, d) in layout.items()}
        result = {k: _fill((seeds, *s), d) for k, (s, d) in expected.items()}
        absent = []
        for lo, hi, stamps in _chunks(manifest["fingerprint"], index, point, counts, chunk_size):
            data = _load_chunk(_chunk_path(out, index, lo, hi), stamps, expected)
            if data is None:
                absent.append([lo, hi])
                continue
            loaded += 1
            cost += data[_SECONDS]
            for k in expected:
                result[k][lo:hi] = data[k]
        outputs.append(result)
        missing.append(absent)
        point_seconds.append(cost)
    failed = _read_failure_records(out, len(points))
    return SweepSolution(
        points=points,
        outputs=outputs,
        failed=failed,
        computed_chunks=0,
        loaded_chunks=loaded,
        batch_size=int(manifest.get("batch_size", 0)),
        chunk_size=chunk_size,
        devices=int(manifest.get("devices", 0)),
        wall_seconds=time.perf_counter() - timer,
        point_seconds=point_seconds,
        missing=missing,
    )
