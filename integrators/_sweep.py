"""Seed sweeps: sharded over devices, cache-aware, resumable after a kill.

A sweep runs one simulation for `seeds` seeds at every point of a parameter grid. Per point,
seeds go in *chunks*; each chunk is one call of two compiled programs, both sharded over a
`jax.sharding.Mesh` of all devices along a `"seed"` axis:

    make(key, **params) -> instance          (data and initialization of one seed)
    run(instance, **params) -> {name: array}  (the simulation; one seed in, arrays out)

They are separate programs on purpose, and `make` runs unsharded: on XLA:CPU with several
host devices, LAPACK (the QR of `orthogonal_data`) running on two devices at once, or in the
same program as a long loop, was seen to deadlock.

Inside a device, `lax.map(..., batch_size=b)` vmaps `b` seeds at a time. The rule for `b`:
the largest power of two whose compiled working set (XLA's memory analysis of one seed, times
`b`) fits in half of the L2 cache on CPU, or in an eighth of the device's memory on GPU. On a
2-core Xeon (2 MiB L2), GD on n = 64, m = 47 runs at ~2e5 seed-epochs/s for b <= 4 and drops
to ~9e4 for b >= 8, where the batch falls out of cache.

Seed i always uses `jax.random.fold_in(PRNGKey(base_seed), i)`, so results do not depend on
chunking, batching or sharding. Each finished chunk is written atomically (`npz`, no pickle)
under `out/chunks/`; running the same sweep again loads finished chunks and computes only the
rest. `out/sweep.json` holds the configuration's fingerprint: a different configuration in the
same folder is refused; the configuration includes the name and source hash of `run` and
`make` (not of the library code they call). A chunk whose solve raises is recorded and
reported (its seeds are NaN / -1 / False), the sweep goes on, and a rerun retries it.

Multi-host: call `jax.distributed.initialize()` in every process before the sweep; the mesh
then spans all processes' devices, every process computes its share, and process 0 writes.
"""

import hashlib
import inspect
import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["SweepConfigError", "SweepResult", "sweep", "pick_batch_size"]


class SweepConfigError(ValueError):
    """The output folder holds a sweep with a different configuration.

    >>> import tempfile
    >>> out = tempfile.mkdtemp()
    >>> run = lambda key, scale: {"x": scale * jax.random.normal(key)}
    >>> _ = sweep(run, seeds=2, grid=[{"scale": 1.0}], out=out, progress=False)
    >>> try:
    ...     sweep(run, seeds=3, grid=[{"scale": 1.0}], out=out, progress=False)
    ... except SweepConfigError as err:
    ...     print("refused:", "seeds" in str(err))
    refused: True
    """


class SweepResult(NamedTuple):
    """What `sweep` returns.

    - `points`: the grid points (dicts of parameters), in order.
    - `outputs`: per point, `{name: array}` with a leading seed axis of length `seeds`.
    - `failed`: per point, a list of `{"seeds": [lo, hi], "error": str}` for chunks that raised.
    - `computed_chunks`, `loaded_chunks`: chunks computed now / loaded from `out`.
    - `batch_size`, `chunk_size`, `devices`: what ran; `wall_seconds`: the sweep's time,
      `point_seconds`: per point (compilation included where it happened).

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


def _l2_bytes() -> int:
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if (index / "level").read_text().strip() == "2":
                size = (index / "size").read_text().strip().upper()
                mult = {"K": 1024, "M": 1024**2}.get(size[-1], 1)
                return int(size.rstrip("KM")) * mult
        except OSError:
            continue
    return 1024**2


def pick_batch_size(bytes_per_seed: int, device=None, limit: int = 4096) -> int:
    """The cache/memory rule: largest power of two b with b * bytes_per_seed <= budget, where
    budget = L2 / 2 on CPU and device memory / 8 on accelerators.

    >>> pick_batch_size(10**12), pick_batch_size(1, limit=64)
    (1, 64)
    """
    device = jax.devices()[0] if device is None else device
    if device.platform == "cpu":
        budget = _l2_bytes() // 2
    else:
        stats = device.memory_stats() or {}
        budget = stats.get("bytes_limit", 16 * 1024**3) // 8
    b = max(1, budget // max(1, bytes_per_seed))
    return int(min(limit, 2 ** int(math.log2(b))))


def _flat_names(tree) -> dict[str, Any]:
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {jax.tree_util.keystr(path).strip("[]'\"."): leaf for path, leaf in leaves}


def _code_id(fn) -> str:
    """Module, name and a hash of the source of a user function (its name alone if the source
    cannot be read): part of the fingerprint, so another or an edited `run` is refused."""
    name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return name
    return f"{name}:{hashlib.sha256(source.encode()).hexdigest()[:16]}"


def _fingerprint(spec: dict) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()


def _fill(shape, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f" or dtype.kind == "c":
        return np.full(shape, np.nan, dtype)
    if dtype.kind == "b":
        return np.zeros(shape, dtype)
    return np.full(shape, -1, dtype)


class _Progress:
    """A text progress bar on stderr. The ETA uses the chunks computed after the first one,
    whose time includes compilation."""

    def __init__(self, name: str, total: int, enabled: bool):
        self.name, self.total, self.enabled = name, total, enabled
        self.done = self.computed = 0
        self.start = time.perf_counter()
        self.first_computed = None

    def update(self, computed: bool):
        self.done += 1
        self.computed += computed
        now = time.perf_counter()
        if computed and self.first_computed is None:
            self.first_computed = now
        if not self.enabled:
            return
        left = self.total - self.done
        if self.computed >= 2:
            eta = f"{(now - self.first_computed) / (self.computed - 1) * left:.1f} s"
        else:
            eta = "0.0 s" if left == 0 else "?"
        width = 24
        bar = "#" * round(width * self.done / self.total)
        end = "\n" if left == 0 else ""
        sys.stderr.write(
            f"\r{self.name} [{bar:<{width}}] {self.done}/{self.total} chunks, "
            f"{now - self.start:.1f} s, ETA {eta}   {end}"
        )
        sys.stderr.flush()


class _Programs:
    """The compiled make/run programs of one static configuration."""

    def __init__(self, make, run, static: dict, mesh: Mesh, batch_size: int | None):
        self.mesh = mesh

        self.run_one = lambda inst, dyn: run(inst, **static, **dyn)
        self.make_one = lambda key, dyn: make(key, **static, **dyn)
        # `make` runs unsharded: XLA:CPU was seen to hang running LAPACK (the QR of
        # `orthogonal_data`) on several host devices at once. Instances are cheap; they are
        # then laid out over the mesh.
        self.make = jax.jit(jax.vmap(self.make_one, in_axes=(0, None)))
        self.batch_size = batch_size
        self.run = None

    def prepare(self, instance_one, dyn) -> int:
        """Fix the batch size (the cache rule, from one seed's compiled memory) and compile."""
        if self.batch_size is None:
            compiled = jax.jit(self.run_one).lower(instance_one, dyn).compile()
            mem = compiled.memory_analysis()
            per_seed = (
                mem.temp_size_in_bytes + mem.argument_size_in_bytes + mem.output_size_in_bytes
            )
            self.batch_size = pick_batch_size(per_seed)
        b = self.batch_size

        def run_local(instances, dyn):
            return jax.lax.map(lambda inst: self.run_one(inst, dyn), instances, batch_size=b)

        self.run = jax.jit(
            jax.shard_map(
                run_local,
                mesh=self.mesh,
                in_specs=(PartitionSpec("seed"), PartitionSpec()),
                out_specs=PartitionSpec("seed"),
                check_vma=False,
            )
        )
        return b


_PROGRAMS: dict[tuple, _Programs] = {}  # compiled programs, reused by later sweeps


def _key_itself(key, **params):
    """The default `make`: the instance is the seed's key."""
    return key


def _to_host(tree):
    if jax.process_count() > 1:
        tree = multihost_utils.process_allgather(tree, tiled=True)
    return jax.tree_util.tree_map(np.asarray, tree)


def _atomic_savez(path: Path, arrays: dict):
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _load_chunk(path: Path, fingerprint: str, lo: int, hi: int, expected: dict):
    """The chunk's arrays, or None when missing, partial, corrupt or from another sweep."""
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        if str(data.pop("__fingerprint__")) != fingerprint:
            return None
        if data.pop("__seeds__").tolist() != [lo, hi]:
            return None
        for name, (shape, dtype) in expected.items():
            if data[name].shape != (hi - lo, *shape) or data[name].dtype != dtype:
                return None
        return {name: data[name] for name in expected}
    except Exception:  # noqa: BLE001 - any unreadable file is recomputed, never merged
        return None


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
) -> SweepResult:
    """Run `run(make(key_i, **p), **p)` for seeds i < `seeds` at every grid point p.

    **Arguments:**

    - `run`: one seed's simulation; returns a dict of arrays (fixed shapes). Pure, jit-able.
    - `make`: one seed's instance from its key (default: the key itself).
    - `grid`: the grid points, each a dict of parameters passed to `make` and `run` as keywords.
      Parameters named in `static` are Python values (shapes: width, n) and compile once per
      distinct value; the others become arrays, so a sweep over alpha compiles once.
    - `out`: folder for chunk files and the manifest; `None` keeps everything in memory.
    - `config`: anything else that defines the sweep (it enters the fingerprint).
    - `chunk_size`: seeds per chunk (default: 64 rounded to devices x batch, or fewer when
      there are fewer seeds); a resumed sweep
      keeps the chunk size of its manifest. `batch_size`: seeds vmapped together per device
      (default: the cache rule, `pick_batch_size`).

    >>> res = sweep(lambda key, alpha: {"x": alpha * jax.random.normal(key)}, seeds=100,
    ...             grid=[{"alpha": 0.1}, {"alpha": 1.0}], progress=False)
    >>> res.outputs[1]["x"].shape
    (100,)
    """
    timer = time.perf_counter()
    if seeds < 1:
        raise ValueError(f"`seeds` must be >= 1, got {seeds}")
    points = [dict(p) for p in grid]
    static = tuple(static)
    make = _key_itself if make is None else make
    devices = jax.devices()
    n_dev = len(devices)
    mesh = Mesh(np.array(devices), ("seed",))
    dtype = jnp.zeros(()).dtype
    spec = {
        "name": name,
        "seeds": seeds,
        "base_seed": base_seed,
        "points": points,
        "static": list(static),
        "config": dict(config or {}),
        "dtype": str(dtype),
        "code": {"run": _code_id(run), "make": _code_id(make)},
    }
    fingerprint = _fingerprint(spec)
    writer = jax.process_index() == 0
    out = None if out is None else Path(out)
    if out is not None:
        manifest_path = out / "sweep.json"
        if manifest_path.exists():
            manifest = json.loads(manifest_path.read_text())
            if manifest.get("fingerprint") != fingerprint:
                old = manifest.get("spec", {})
                differs = sorted(k for k in set(old) | set(spec) if old.get(k) != spec.get(k))
                raise SweepConfigError(
                    f"{out} holds a sweep with a different configuration (differs in: "
                    f"{', '.join(differs) or 'fingerprint'}). Use another --out folder, or delete "
                    "this one to start over; results of two configurations are never merged."
                )
            chunk_size = manifest["chunk_size"]
        (out / "chunks").mkdir(parents=True, exist_ok=True)

    programs: dict[tuple, _Programs] = {}
    device_ids = tuple(d.id for d in devices)
    key0 = jax.random.PRNGKey(base_seed)
    outputs, failed, point_seconds = [], [], []
    computed = loaded = 0
    progress_bar = None
    for index, point in enumerate(points):
        stat = {k: point[k] for k in static}
        dyn = {k: jnp.asarray(v, dtype) for k, v in point.items() if k not in static}
        skey = (make, run, tuple(sorted(stat.items())), device_ids, batch_size)
        if skey not in _PROGRAMS:
            _PROGRAMS[skey] = _Programs(make, run, stat, mesh, batch_size)
        prog = programs[skey] = _PROGRAMS[skey]
        point_start = time.perf_counter()
        inst_one = jax.eval_shape(prog.make_one, key0, dyn)
        out_one = jax.eval_shape(prog.run_one, inst_one, dyn)
        expected = {k: (v.shape, np.dtype(v.dtype)) for k, v in _flat_names(out_one).items()}
        if prog.run is None:
            prog.prepare(inst_one, dyn)
        if chunk_size is None:
            unit = n_dev * prog.batch_size
            chunk_size = min(unit * max(1, 64 // unit), -(-seeds // n_dev) * n_dev)
        padded = -(-chunk_size // n_dev) * n_dev  # any chunk size runs on any device count
        if out is not None and writer and index == 0:
            manifest = {"fingerprint": fingerprint, "spec": spec, "chunk_size": chunk_size}
            tmp = out / "sweep.json.tmp"
            tmp.write_text(json.dumps(manifest, indent=1, default=str))
            os.replace(tmp, out / "sweep.json")
        n_chunks = -(-seeds // chunk_size)
        if progress_bar is None:
            progress_bar = _Progress(name, n_chunks * len(points), progress)
        result = {k: _fill((seeds, *s), d) for k, (s, d) in expected.items()}
        point_failed = []
        for c in range(n_chunks):
            lo, hi = c * chunk_size, min(seeds, (c + 1) * chunk_size)
            path = None if out is None else out / "chunks" / f"p{index:03d}_s{lo:07d}-{hi:07d}.npz"
            data = None if path is None else _load_chunk(path, fingerprint, lo, hi, expected)
            if data is None:
                try:
                    data = _compute_chunk(prog, key0, lo, padded, hi - lo, dyn)
                except Exception as err:  # noqa: BLE001 - recorded, reported, retried later
                    error = f"{type(err).__name__}: {err}"
                    point_failed.append({"seeds": [lo, hi], "error": error})
                    if path is not None and writer:
                        path.with_suffix(".failed.json").write_text(json.dumps(point_failed[-1]))
                    progress_bar.update(True)
                    continue
                if path is not None and writer:
                    stamp = {"__fingerprint__": np.array(fingerprint)}
                    _atomic_savez(path, {**data, **stamp, "__seeds__": np.array([lo, hi])})
                    path.with_suffix(".failed.json").unlink(missing_ok=True)
                computed += 1
                progress_bar.update(True)
            else:
                loaded += 1
                progress_bar.update(False)
            for k in expected:
                result[k][lo:hi] = data[k]
        if point_failed and progress:
            sys.stderr.write(
                f"{name}: point {point}: {len(point_failed)} chunk(s) failed: "
                f"{point_failed[0]['error'][:300]}\n"
            )
        outputs.append(result)
        failed.append(point_failed)
        point_seconds.append(time.perf_counter() - point_start)
    return SweepResult(
        points=points,
        outputs=outputs,
        failed=failed,
        computed_chunks=computed,
        loaded_chunks=loaded,
        batch_size=next(iter(programs.values())).batch_size,
        chunk_size=chunk_size,
        devices=n_dev,
        wall_seconds=time.perf_counter() - timer,
        point_seconds=point_seconds,
    )


def _compute_chunk(prog: _Programs, key0, lo: int, size: int, real: int, dyn) -> dict:
    """One chunk: seeds lo .. lo + size (padded past the real ones), sharded over devices."""
    idx = np.arange(lo, lo + size)
    keys = np.asarray(jax.vmap(lambda i: jax.random.fold_in(key0, i))(jnp.asarray(idx)))
    sharding = NamedSharding(prog.mesh, PartitionSpec("seed"))
    made = jax.tree_util.tree_map(np.asarray, prog.make(jnp.asarray(keys), dyn))
    instances = jax.tree_util.tree_map(
        lambda x: jax.make_array_from_callback(x.shape, sharding, lambda i: x[i]), made
    )
    outs = _to_host(prog.run(instances, dyn))
    return {k: v[:real] for k, v in _flat_names(outs).items()}
