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
`make` with everything they capture (`integrators._fingerprint`: closure values, the module
globals they read, `functools.partial` arguments, array contents; not the library code they
call, and not the name of their module). Each chunk file is stamped with the fingerprint,
its grid point (index and parameters) and its seed range; a file that does not match is
recomputed, never merged. A damaged `sweep.json` is rewritten like a damaged chunk. A sweep
whose chunks are all on disk loads them without compiling anything, and `load_sweep(out)`
reads a finished or partial sweep back without the functions. A chunk whose solve raises is
recorded and reported (its seeds are NaN / -1 / False), the sweep goes on, and a rerun
retries it.

Two processes may run the same sweep into one folder at once: every file is written to a
private temporary name and renamed atomically, so none is ever corrupted, but both may
compute the same chunks (the work is duplicated, not coordinated).

Multi-host: call `jax.distributed.initialize()` in every process before the sweep; the mesh
then spans all processes' devices, every process computes its share, and process 0 writes.
"""

import json
import math
import os
import re
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

from theory.checks import check_positive_int, collect_checks

from ._fingerprint import code_digest, digest

__all__ = ["SweepConfigError", "SweepSolution", "load_sweep", "sweep", "pick_batch_size"]


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


class SweepSolution(NamedTuple):
    """What `sweep` and `load_sweep` return (a host-side record of many solves).

    - `points`: the grid points (dicts of parameters), in order.
    - `outputs`: per point, `{name: array}` with a leading seed axis of length `seeds`.
    - `failed`: per point, a list of `{"seeds": [lo, hi], "error": str}` for chunks that raised.
    - `computed_chunks`, `loaded_chunks`: chunks computed now / loaded from `out`.
    - `batch_size`, `chunk_size`, `devices`: what ran (`batch_size` is 0 when nothing had to
      be computed and the manifest does not say); `wall_seconds`: the sweep's time,
      `point_seconds`: per point (compilation included where it happened).
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
        so a plain bool rather than a `RESULTS` item)."""
        return not any(self.failed) and not any(self.missing)


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
    bytes_per_seed = check_positive_int("bytes_per_seed", bytes_per_seed)
    limit = check_positive_int("limit", limit)
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


def _point_stamp(index: int, point: dict) -> str:
    """What a chunk file is stamped with besides the fingerprint: its grid point."""
    return f"{index}:{digest({k: point[k] for k in sorted(point)})}"


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
        # the argument checks inside make and run are collected, not host callbacks: the
        # programs stay cacheable, and a seed whose check failed fails its chunk by name
        self.run_checked, self.run_messages = _collecting(self.run_one)
        self.make_checked, self.make_messages = _collecting(self.make_one)
        # `make` runs unsharded: XLA:CPU was seen to hang running LAPACK (the QR of
        # `orthogonal_data`) on several host devices at once. Instances are cheap; they are
        # then laid out over the mesh.
        self.make = jax.jit(jax.vmap(self.make_checked, in_axes=(0, None)))
        self.batch_size = batch_size
        self.run = None

    def prepare(self, instance_one, dyn) -> int:
        """Fix the batch size (the cache rule, from one seed's compiled memory) and compile."""
        shapes = jax.eval_shape(self.run_checked, instance_one, dyn)[0]
        if not jax.tree_util.tree_leaves(shapes):
            raise ValueError(
                "the run function must return a pytree of arrays (one row per seed), got "
                f"{shapes!r} with no arrays"
            )
        if self.batch_size is None:
            compiled = jax.jit(self.run_checked).lower(instance_one, dyn).compile()
            mem = compiled.memory_analysis()
            per_seed = (
                mem.temp_size_in_bytes + mem.argument_size_in_bytes + mem.output_size_in_bytes
            )
            self.batch_size = pick_batch_size(max(1, per_seed))
        b = self.batch_size

        def run_local(instances, dyn):
            return jax.lax.map(lambda inst: self.run_checked(inst, dyn), instances, batch_size=b)

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


def _collecting(fn):
    """`fn` returning (its output, the outcomes of the argument checks traced inside it), and
    the checks' messages (filled when it is traced; `theory.checks.collect_checks`)."""
    messages: list[str] = []

    def wrapped(*args):
        with collect_checks(*args) as found:
            out = fn(*args)
        found = found or [(jnp.asarray(True), "")]  # one entry: lax.map needs a nonempty axis
        messages[:] = [message for _, message in found]
        oks = jnp.stack([ok for ok, _ in found])
        return out, oks

    return wrapped, messages


def _raise_failed_checks(oks, messages, lo: int, what: str) -> None:
    """A ValueError naming the first failed check of the first seed (of `lo + i`) that failed."""
    oks = np.asarray(oks).reshape(len(oks), -1)
    bad = np.flatnonzero(~np.all(oks, axis=1))
    if bad.size:
        seed, check = int(bad[0]), int(np.flatnonzero(~oks[bad[0]])[0])
        raise ValueError(
            f"{messages[check]} (an argument check in `{what}` under jit, seed {lo + seed}; "
            f"{bad.size} seed(s) of this chunk failed a check)"
        )


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


def _load_chunk(path: Path, stamps: dict, expected: dict):
    """The chunk's arrays, or None when missing, partial, corrupt, or stamped for another
    sweep, grid point or seed range."""
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        for key, value in stamps.items():
            if np.asarray(data.pop(key)).tolist() != value:
                return None
        lo, hi = stamps["__seeds__"]
        for name, (shape, dtype) in expected.items():
            if data[name].shape != (hi - lo, *shape) or data[name].dtype != dtype:
                return None
        return {name: data[name] for name in expected}
    except Exception:  # noqa: BLE001 - any unreadable file is recomputed, never merged
        return None


def _read_manifest(path: Path) -> dict | None:
    """`sweep.json`, or None when it is missing or damaged (then it is rewritten)."""
    try:
        manifest = json.loads(path.read_text())
        ok = (
            isinstance(manifest, dict)
            and isinstance(manifest.get("fingerprint"), str)
            and isinstance(manifest.get("spec"), dict)
            and isinstance(manifest.get("chunk_size"), int)
            and manifest["chunk_size"] >= 1
        )
        return manifest if ok else None
    except (OSError, ValueError):
        return None


def _write_json(path: Path, value: dict) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(value, indent=1, default=str))
    os.replace(tmp, path)


def _chunks(fingerprint: str, index: int, point: dict, seeds: int, chunk_size: int):
    """The chunks of one grid point: `(lo, hi, stamps)`, the stamps a valid file must carry."""
    stamp = _point_stamp(index, point)
    for lo in range(0, seeds, chunk_size):
        hi = min(seeds, lo + chunk_size)
        yield lo, hi, {"__fingerprint__": fingerprint, "__point__": stamp, "__seeds__": [lo, hi]}


def _chunk_path(out: Path, index: int, lo: int, hi: int) -> Path:
    return out / "chunks" / f"p{index:03d}_s{lo:07d}-{hi:07d}.npz"


def _check_arguments(seeds, points, static, chunk_size, batch_size) -> int:
    seeds = check_positive_int("seeds", seeds)
    for name, value in (("chunk_size", chunk_size), ("batch_size", batch_size)):
        if value is not None:
            check_positive_int(name, value)
    for i, point in enumerate(points):
        missing = [k for k in static if k not in point]
        if missing:
            raise ValueError(f"`static` names {missing}, missing from grid point {i}: {point}")
    if not points:
        raise ValueError("`grid` must hold at least one point, got none")
    return seeds


def _error_message(err: BaseException) -> str:
    """`Type: message` of a failed chunk, the user's own message first: an error raised
    inside a jitted function (`eqx.error_if`, a host callback) arrives wrapped as
    "CpuCallback error ... Traceback ..." with the message on an inner `...Error: ` line."""
    text = str(err)
    if "Traceback" in text or "CpuCallback" in text:
        inner = re.findall(r"^\s*[A-Za-z_][\w.]*(?:Error|Exception): (.+)$", text, re.MULTILINE)
        if inner:
            return f"{type(err).__name__}: {inner[-1].strip()} (in full: {text[:2000]})"
    return f"{type(err).__name__}: {text}"


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
    - `make`: one seed's instance from its key (default: the key itself).
    - `grid`: the grid points, each a dict of parameters passed to `make` and `run` as keywords.
      Parameters named in `static` are Python values (shapes: width, n) and compile once per
      distinct value; the others become arrays, so a sweep over alpha compiles once.
    - `out`: folder for chunk files and the manifest; `None` keeps everything in memory.
    - `config`: anything else that defines the sweep (it enters the fingerprint, by content).
    - `chunk_size`: seeds per chunk (default: 64 rounded to devices x batch, or fewer when
      there are fewer seeds; at most `seeds`); a resumed sweep keeps the chunk size of its
      manifest. A chunk is padded to a multiple of the device count, never further.
      `batch_size`: seeds vmapped together per device (default: the cache rule,
      `pick_batch_size`). Both must be positive integers (`ValueError`).

    >>> res = sweep(lambda key, alpha: {"x": alpha * jax.random.normal(key)}, seeds=100,
    ...             grid=[{"alpha": 0.1}, {"alpha": 1.0}], progress=False)
    >>> res.outputs[1]["x"].shape
    (100,)
    """
    timer = time.perf_counter()
    points = [dict(p) for p in grid]
    static = tuple(static)
    seeds = _check_arguments(seeds, points, static, chunk_size, batch_size)
    base_seed = check_positive_int("base_seed", base_seed, minimum=0)  # 2.7 and '5' refused
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
    }
    identity = {
        **spec,
        "points": digest(points),
        "config": digest(dict(config or {})),
        "code": {"run": code_digest(run), "make": code_digest(make)},
    }
    fingerprint = digest(identity)
    writer = jax.process_index() == 0
    out = None if out is None else Path(out)
    manifest = None
    if out is not None:
        manifest = _read_manifest(out / "sweep.json")
        if manifest is not None and manifest["fingerprint"] != fingerprint:
            old = manifest.get("identity", {})
            differs = sorted(k for k in set(old) | set(identity) if old.get(k) != identity.get(k))
            raise SweepConfigError(
                f"{out} holds a sweep with a different configuration (differs in: "
                f"{', '.join(differs) or 'fingerprint'}). Use another --out folder, or delete "
                "this one to start over; results of two configurations are never merged."
            )
        if manifest is not None:
            chunk_size = manifest["chunk_size"]
        (out / "chunks").mkdir(parents=True, exist_ok=True)

    device_ids = tuple(d.id for d in devices)
    key0 = jax.random.PRNGKey(base_seed)
    # what every point returns, by tracing alone (nothing is compiled here)
    layouts = []
    for point in points:
        stat = {k: point[k] for k in static}
        dyn = {k: jnp.asarray(v, dtype) for k, v in point.items() if k not in static}
        skey = (make, run, tuple(sorted(stat.items())), device_ids, batch_size)
        if skey not in _PROGRAMS:
            _PROGRAMS[skey] = _Programs(make, run, stat, mesh, batch_size)
        prog = _PROGRAMS[skey]
        # traced as the programs will be (the traces of jitted helpers are cached)
        inst_one = jax.eval_shape(prog.make_checked, key0, dyn)[0]
        out_one = jax.eval_shape(prog.run_checked, inst_one, dyn)[0]
        expected = {k: (v.shape, np.dtype(v.dtype)) for k, v in _flat_names(out_one).items()}
        layouts.append((prog, dyn, inst_one, expected))
    if chunk_size is None:
        prog, dyn, inst_one, _ = layouts[0]
        if prog.run is None:
            prog.prepare(inst_one, dyn)
        unit = n_dev * prog.batch_size
        chunk_size = unit * max(1, 64 // unit)
    chunk_size = min(int(chunk_size), seeds)
    if out is not None and writer and manifest is None:
        outputs = [{k: [list(s), d.str] for k, (s, d) in lay[3].items()} for lay in layouts]
        manifest = {
            "fingerprint": fingerprint,
            "spec": spec,
            "identity": identity,
            "chunk_size": chunk_size,
            "devices": n_dev,
            "outputs": outputs,
        }
        _write_json(out / "sweep.json", manifest)

    outputs, failed, point_seconds = [], [], []
    computed = loaded = 0
    n_chunks = -(-seeds // chunk_size)
    progress_bar = _Progress(name, n_chunks * len(points), progress)
    for index, (point, (prog, dyn, inst_one, expected)) in enumerate(
        zip(points, layouts, strict=True)
    ):
        point_start = time.perf_counter()
        result = {k: _fill((seeds, *s), d) for k, (s, d) in expected.items()}
        point_failed = []
        for lo, hi, stamps in _chunks(fingerprint, index, point, seeds, chunk_size):
            path = None if out is None else _chunk_path(out, index, lo, hi)
            data = None if path is None else _load_chunk(path, stamps, expected)
            data = _agree_on_loading(data, path)
            if data is None:
                try:
                    if prog.run is None:
                        prog.prepare(inst_one, dyn)
                    padded = -(-(hi - lo) // n_dev) * n_dev
                    data = _compute_chunk(prog, key0, lo, padded, hi - lo, dyn)
                except Exception as err:  # noqa: BLE001 - recorded, reported, retried later
                    error = _error_message(err)
                    point_failed.append({"seeds": [lo, hi], "error": error})
                    if path is not None and writer:
                        _write_json(path.with_suffix(".failed.json"), point_failed[-1])
                    progress_bar.update(True)
                    continue
                if path is not None and writer:
                    _atomic_savez(path, {**data, **{k: np.array(v) for k, v in stamps.items()}})
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
    ran = [lay[0].batch_size for lay in layouts if lay[0].run is not None]
    if out is not None and writer and ran and manifest.get("batch_size") != ran[0]:
        _write_json(out / "sweep.json", {**manifest, "batch_size": ran[0]})
    return SweepSolution(
        points=points,
        outputs=outputs,
        failed=failed,
        computed_chunks=computed,
        loaded_chunks=loaded,
        batch_size=ran[0] if ran else int((manifest or {}).get("batch_size", 0)),
        chunk_size=chunk_size,
        devices=n_dev,
        wall_seconds=time.perf_counter() - timer,
        point_seconds=point_seconds,
        missing=[[] for _ in points],
    )


def _agree_on_loading(data, path):
    """With several processes, all follow process 0's decision to load or compute a chunk
    (they take part in every computation together)."""
    if jax.process_count() == 1:
        return data
    load = bool(multihost_utils.broadcast_one_to_all(np.array(data is not None)))
    if load and data is None:
        raise RuntimeError(
            f"process 0 loaded {path} but process {jax.process_index()} cannot read it: "
            "`out` must be a folder that every process can read"
        )
    return data if load else None


def load_sweep(out: str | Path) -> SweepSolution:
    """Read a finished (or partial) sweep back from its folder, without `run` or `make`.

    Every chunk is checked against the manifest's fingerprint, grid point and seed range, as
    when the sweep resumes; ranges without a valid chunk are listed in `missing` (their seeds
    are NaN / -1 / False). `ValueError` when `out` holds no readable `sweep.json`.

    >>> import tempfile
    >>> out = tempfile.mkdtemp()
    >>> _ = sweep(lambda key: {"x": jax.random.normal(key)}, seeds=4, out=out, progress=False)
    >>> res = load_sweep(out)
    >>> res.outputs[0]["x"].shape, res.loaded_chunks, res.missing
    ((4,), 1, [[]])
    """
    timer = time.perf_counter()
    out = Path(out)
    manifest = _read_manifest(out / "sweep.json")
    if manifest is None or not {"outputs", "spec", "chunk_size", "fingerprint"} <= set(manifest):
        raise ValueError(f"`out` must be a sweep folder with a readable sweep.json, got {out}")
    spec, chunk_size = manifest["spec"], manifest["chunk_size"]
    seeds, points = int(spec["seeds"]), spec["points"]
    outputs, missing, point_seconds, loaded = [], [], [], 0
    for index, (point, layout) in enumerate(zip(points, manifest["outputs"], strict=True)):
        start = time.perf_counter()
        expected = {k: (tuple(s), np.dtype(d)) for k, (s, d) in layout.items()}
        result = {k: _fill((seeds, *s), d) for k, (s, d) in expected.items()}
        absent = []
        for lo, hi, stamps in _chunks(manifest["fingerprint"], index, point, seeds, chunk_size):
            data = _load_chunk(_chunk_path(out, index, lo, hi), stamps, expected)
            if data is None:
                absent.append([lo, hi])
                continue
            loaded += 1
            for k in expected:
                result[k][lo:hi] = data[k]
        outputs.append(result)
        missing.append(absent)
        point_seconds.append(time.perf_counter() - start)
    failed = [
        [
            json.loads(p.read_text())
            for p in sorted((out / "chunks").glob(f"p{i:03d}_*.failed.json"))
        ]
        for i in range(len(points))
    ]
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


def _compute_chunk(prog: _Programs, key0, lo: int, size: int, real: int, dyn) -> dict:
    """One chunk: seeds lo .. lo + size (padded past the real ones), sharded over devices."""
    idx = np.arange(lo, lo + size)
    keys = np.asarray(jax.vmap(lambda i: jax.random.fold_in(key0, i))(jnp.asarray(idx)))
    sharding = NamedSharding(prog.mesh, PartitionSpec("seed"))
    made, make_oks = prog.make(jnp.asarray(keys), dyn)
    _raise_failed_checks(np.asarray(make_oks)[:real], prog.make_messages, lo, "make")
    made = jax.tree_util.tree_map(np.asarray, made)
    instances = jax.tree_util.tree_map(
        lambda x: jax.make_array_from_callback(x.shape, sharding, lambda i: x[i]), made
    )
    outs, run_oks = _to_host(prog.run(instances, dyn))
    _raise_failed_checks(run_oks[:real], prog.run_messages, lo, "run")
    return {k: v[:real] for k, v in _flat_names(outs).items()}
