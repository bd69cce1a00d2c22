"""The compiled programs of a sweep: the batch-size rule, the make/run programs with their
argument checks collected, a chunk's computation, and the progress bar.

`make` and `run` are separate programs, and `make` runs unsharded: on XLA:CPU with several
host devices, jaxlib's (0.10) LAPACK kernels deadlock once a call's batch is large (about
5e5 flops: two 65 x 65 solves, or 200 of 16 x 16): the kernel splits the batch over the
thread pool and blocks until it is done, and with as many devices running as pool threads no
thread is left to do it. A batch of one system never splits. So `make` (the QR of
`orthogonal_data`) runs unsharded, and `two_layer_flow`'s per-neuron sliding solves (and
`gradient_flow`'s sliding solve) use `theory.numerics.lu_solve` (plain XLA operations).
Still LAPACK, one system per seed: `vanishing_flow`'s inverse, the Rosenbrock solvers' and
`diagonal_flow`'s LU; safe at a batch of one seed per device (what the batch rule gives
their sweeps on CPU), not beyond. A `run` of your own that calls batched LAPACK
(`jnp.linalg.solve`/`eigh`/`svd` on stacks of matrices, or on one matrix under a batch
`b` > 1) can hang the same way on CPU.
"""

import math
import re
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from theory.checks import check_positive_int, collect_checks

from . import _sweep_export
from ._sweep_store import _flat_names


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

    **Arguments:** `bytes_per_seed`: one seed's working set; `device`: a `jax.Device`
    (default the first); `limit`: the largest batch returned.

    **Returns:** the batch size, a power of two in [1, `limit`].

    **Raises:** `ValueError` on non-positive `bytes_per_seed` or `limit`, or a `device` that
    is not a `jax.Device`.

    >>> pick_batch_size(10**12), pick_batch_size(1, limit=64)
    (1, 64)
    """
    bytes_per_seed = check_positive_int("bytes_per_seed", bytes_per_seed)
    limit = check_positive_int("limit", limit)
    device = jax.devices()[0] if device is None else device
    if not isinstance(device, jax.Device):
        raise ValueError(f"`device` must be a jax.Device (e.g. jax.devices()[0]), got {device!r}")
    if device.platform == "cpu":
        budget = _l2_bytes() // 2
    else:
        stats = device.memory_stats() or {}
        budget = stats.get("bytes_limit", 16 * 1024**3) // 8
    b = max(1, budget // max(1, bytes_per_seed))
    return int(min(limit, 2 ** int(math.log2(b))))


def _bytes(aval) -> int:
    """An array's bytes; 0 for what has no plain dtype (a typed PRNG key, a token): counting
    less only means the memory-analysis compile runs."""
    shape, dtype = getattr(aval, "shape", None), getattr(aval, "dtype", None)
    if shape is None or dtype is None or jax.dtypes.issubdtype(dtype, jax.dtypes.extended):
        return 0
    try:
        return math.prod(shape) * np.dtype(dtype).itemsize
    except TypeError:
        return 0


def _live(jaxpr):
    """`jaxpr` after JAX's dead-code elimination (outputs nobody reads, loop states and
    arguments that nothing live uses are dropped, as XLA drops them), and which arguments
    are used; None where JAX's eliminator is not there (its module is internal)."""
    try:
        from jax._src.interpreters import partial_eval  # noqa: PLC0415

        return partial_eval.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars))
    except Exception:  # an internal API that moved: fall back to compiling
        return None


def _sub_jaxprs(eqn):
    for value in eqn.params.values():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            inner = getattr(item, "jaxpr", item)  # a ClosedJaxpr's jaxpr, or a Jaxpr
            if hasattr(inner, "eqns"):
                yield inner


def loop_state_bytes(jaxpr) -> int:
    """The bytes of the largest loop state in `jaxpr` (a `jax.extend.core.Jaxpr`) and the
    jaxprs inside it: the outputs of a `while` or `scan` that are read after it. XLA keeps a
    loop's state in memory for the whole loop, so one seed's working set is at least this
    where the jaxpr has been through dead-code elimination (`_live`: an output read only by
    dead code is dropped by XLA, and by the eliminator).

    >>> jaxpr = jax.make_jaxpr(lambda x: jax.lax.fori_loop(0, 3, lambda i, v: 2 * v, x))
    >>> loop_state_bytes(jaxpr(jnp.zeros(1000)).jaxpr)
    8000
    """
    read = {v for eqn in jaxpr.eqns for v in eqn.invars if not hasattr(v, "val")}
    read |= {v for v in jaxpr.outvars if not hasattr(v, "val")}
    best = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in ("while", "scan"):
            best = max(best, sum(_bytes(v.aval) for v in eqn.outvars if v in read))
        for inner in _sub_jaxprs(eqn):
            best = max(best, loop_state_bytes(inner))
    return best


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
        run_checked, self.run_messages = _collecting(self.run_one)
        # one jitted function for the shape probe, the batch-size compile and the sharded
        # program, traced once (`_traced`, in `prepare`): the sharded program evaluates that
        # jaxpr (`_one_seed`), so `run` is traced once per configuration instead of twice
        self.run_checked = jax.jit(run_checked)
        self._traced = None
        self.make_checked, self.make_messages = _collecting(self.make_one)
        # `make` runs unsharded: XLA:CPU was seen to hang running LAPACK (the QR of
        # `orthogonal_data`) on several host devices at once. Instances are cheap; they are
        # then laid out over the mesh.
        self.make = self._make_jit = jax.jit(jax.vmap(self.make_checked, in_axes=(0, None)))
        self.batch_size = batch_size
        self.run = None
        self.record_key = None  # where the exported programs persist (`_sweep_export`)
        self.record: dict = {}

    def persist(self, key: str, record: dict | None) -> None:
        """Call `make` and `run` through exported programs kept under `key`; `record` (loaded,
        or None) holds those of earlier processes and what their traces found."""
        self.record_key = key
        self.record = record or {"make": {}, "run": {}}
        if record is not None:
            self.make_messages[:] = record["make_messages"]
            self.run_messages[:] = record["run_messages"]
            self.batch_size = self.batch_size or record.get("batch_size")
        self.make = self._persistent("make", self._make_jit)
        self.run = None  # prepared again, through the record

    def _persistent(self, name, jitted):
        def stored(sig, entry):
            self.record[name][sig] = entry
            self.record["make_messages"] = list(self.make_messages)
            self.record["run_messages"] = list(self.run_messages)
            self.record["batch_size"] = self.batch_size
            _sweep_export.save(self.record_key, self.record)

        program = _sweep_export.Persistent(jitted, stored)
        program.entries.update(self.record.get(name, {}))
        return program

    def _batch_without_compiling(self, instance_one, dyn) -> int | None:
        """1 where one seed's traced program alone shows more memory than the cache rule
        allows two seeds (its largest loop state, or its used arguments and its outputs,
        after JAX's dead-code elimination), so that the rule would give 1 whatever else
        XLA's buffers come to: no compile is needed to know it. None where the rule needs
        the compiled memory analysis. (The main job's seed holds a 1.57 MB loop state
        against this CPU's 1 MB budget; its compiled working set is 5.39 MB. The
        memory-analysis compile had cost 5 s of its 34 s cold run.)"""
        traced = self._trace(instance_one, dyn).jaxpr.jaxpr
        live = _live(traced)
        if live is None:
            return None
        jaxpr, used = live
        args = [v for v, u in zip(traced.invars, used, strict=True) if u]
        ends = sum(_bytes(v.aval) for v in (*args, *jaxpr.outvars))
        floor = max(loop_state_bytes(jaxpr), ends)
        return 1 if pick_batch_size(max(1, floor)) == 1 else None

    def _trace(self, instance_one, dyn):
        """`run_checked` traced at one seed (`jax.stages.Traced`; JAX's own trace cache keeps
        it, and `jax.clear_caches()` clears it), kept for the sharded program's next trace."""
        self._traced = self.run_checked.trace(instance_one, dyn)
        # (a trace found in JAX's cache leaves the latest messages, maybe another point's)
        self.run_messages[:] = self.run_messages.of(instance_one, dyn)
        return self._traced

    def _one_seed(self, inst, dyn):
        """`run_checked` on one seed inside the sharded program: the jaxpr traced in
        `prepare` evaluated on these arguments where their structure, shapes and dtypes are
        the ones it was traced at, else `run_checked` itself. (Inside `shard_map` the jit's
        cache missed, and the main job's `run` was traced a second time: 2 s of its cold
        run.) The jaxpr serves the sharded program's first trace only: a later one (other
        chunk shapes, or after `jax.clear_caches()`) traces `run_checked` as before."""
        traced = self._traced
        leaves, tree = jax.tree_util.tree_flatten(((inst, dyn), {}))
        avals = [(tuple(x.shape), jnp.result_type(x)) for x in leaves]
        if (
            traced is None
            or tree != traced.in_tree
            or avals
            != [(tuple(a.shape), a.dtype) for a in jax.tree_util.tree_leaves(traced.in_avals)]
        ):
            return self.run_checked(inst, dyn)
        outs = jax.extend.core.jaxpr_as_fun(traced.jaxpr)(*leaves)
        return jax.tree_util.tree_unflatten(traced.out_tree, outs)

    def prepare(self, instance_one, dyn) -> int:
        """Fix the batch size (the cache rule, from one seed's compiled memory) and compile."""
        if self.batch_size is None or not self.record.get("run"):
            shapes = self._trace(instance_one, dyn).out_info[0]
            if not jax.tree_util.tree_leaves(shapes):
                raise ValueError(
                    "the run function must return a pytree of arrays (one row per seed), got "
                    f"{shapes!r} with no arrays"
                )
        if self.batch_size is None:
            self.batch_size = self._batch_without_compiling(instance_one, dyn)
        if self.batch_size is None:
            # compiled for its memory analysis only: at XLA's optimization level 0 the temp
            # size came out the same (5.39 MB for the main job's seed) in 6.8 s against 11.5 s
            lowered = self.run_checked.lower(instance_one, dyn)
            try:
                compiled = lowered.compile({"xla_backend_optimization_level": 0})
            except Exception:  # a backend without the option
                compiled = lowered.compile()
            mem = compiled.memory_analysis()
            per_seed = (
                mem.temp_size_in_bytes + mem.argument_size_in_bytes + mem.output_size_in_bytes
            )
            self.batch_size = pick_batch_size(max(1, per_seed))
        b = self.batch_size

        def run_local(instances, dyn):
            # b = 1 without `batch_size`: lax.map would vmap each seed as a batch of one
            # (batching the whole trace, and every lax.cond inside turned into a select)
            one = lambda inst: self._one_seed(inst, dyn)  # noqa: E731
            out = jax.lax.map(one, instances, batch_size=b if b > 1 else None)
            self._traced = None  # (`_one_seed`)
            return out

        self.run = jax.jit(
            jax.shard_map(
                run_local,
                mesh=self.mesh,
                in_specs=(PartitionSpec("seed"), PartitionSpec()),
                out_specs=PartitionSpec("seed"),
                check_vma=False,
            )
        )
        if self.record_key is not None:
            self.run = self._persistent("run", self.run)
        return b


_PROGRAMS: dict[tuple, _Programs] = {}  # compiled programs, reused by later sweeps


class _Messages(list):
    """The messages of the checks traced inside a function, those of its latest trace (the
    list itself) and per argument signature (`of`): a trace found in JAX's cache runs no
    Python, so the latest ones can be another signature's."""

    def __init__(self):
        super().__init__()
        self.by_signature: dict[str, list[str]] = {}

    def of(self, *args) -> list[str]:
        """The messages of the trace at these arguments' signature (else the latest)."""
        return self.by_signature.get(_sweep_export.signature(*args), self)


def _collecting(fn):
    """`fn` returning (its output, the outcomes of the argument checks traced inside it), and
    the checks' messages (filled when it is traced; `theory.checks.collect_checks`)."""
    messages = _Messages()

    def wrapped(*args):
        with collect_checks(*args) as found:
            out = fn(*args)
        found = found or [(jnp.asarray(True), "")]  # one entry: lax.map needs a nonempty axis
        messages[:] = [message for _, message in found]
        messages.by_signature[_sweep_export.signature(*args)] = list(messages)
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
    one = jax.tree_util.tree_map(lambda x: x[0], made)
    _raise_failed_checks(run_oks[:real], prog.run_messages.of(one, dyn), lo, "run")
    return {k: v[:real] for k, v in _flat_names(outs).items()}


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
