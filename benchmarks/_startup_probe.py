"""Run the main job (`benchmarks.jump_times`) in this process with its seconds broken down:
imports, tracing, lowering to MLIR, XLA compiles, persistent-cache reads, the arithmetic,
the figure and the file writes. `benchmarks.startup` runs it in fresh processes, cold and
warm.

    python -m benchmarks._startup_probe OUT.json [jump_times arguments]
"""

import json
import sys
import time
from collections import defaultdict

_START = time.perf_counter()

EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "xla_compile",
    "/jax/compilation_cache/cache_retrieval_time_sec": "cache_read",
}


def _program_sizes() -> dict:
    """The serialized size (StableHLO bytes) of each program the sweeps stored: the traced size
    of `make` and `run` per argument signature (`integrators._sweep_export`)."""
    import pickle  # noqa: PLC0415

    from integrators import _sweep_export  # noqa: PLC0415

    folder, sizes = _sweep_export.store_dir(), {}
    for path in sorted(folder.glob("*.pkl")) if folder is not None and folder.exists() else ():
        record = pickle.loads(path.read_bytes())
        for name in ("make", "run"):
            for i, entry in enumerate(record.get(name, {}).values()):
                sizes[f"{path.stem[:8]}:{name}:{i}"] = len(entry["blob"])
    return sizes


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    target, job_args = argv[0], argv[1:]
    import jax  # noqa: PLC0415

    seconds, counts, largest = defaultdict(float), defaultdict(int), defaultdict(float)

    def listen(event, duration, **kwargs):
        name = EVENTS.get(event)
        if name is not None:
            seconds[name] += duration
            counts[name] += 1
            fun = str(kwargs.get("fun_name", "?"))
            largest[f"{name}:{fun}"] += duration

    jax.monitoring.register_event_duration_secs_listener(listen)
    timer = time.perf_counter()
    from benchmarks import jump_times  # noqa: PLC0415

    imports = time.perf_counter() - timer + (timer - _START)
    phases = {}

    def timed(name, fn):
        def wrapped(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                phases[name] = phases.get(name, 0.0) + time.perf_counter() - t

        return wrapped

    jump_times.run_benchmark = timed("run", jump_times.run_benchmark)
    jump_times.plot_staircase = timed("figure", jump_times.plot_staircase)
    jump_times.finish = timed("finish", jump_times.finish)
    timer = time.perf_counter()
    jump_times.main(job_args)
    total = time.perf_counter() - timer + imports
    compile_side = sum(seconds[k] for k in ("trace", "lower", "xla_compile", "cache_read"))
    record = {
        "total_seconds": total,
        "imports": imports,
        **{k: seconds[k] for k in EVENTS.values()},
        "compiles": counts["xla_compile"],
        "cache_reads": counts["cache_read"],
        "traces": counts["trace"],
        "arithmetic": phases.get("run", 0.0) - compile_side,
        "figure": phases.get("figure", 0.0),
        "table_and_writes": phases.get("finish", 0.0) - phases.get("figure", 0.0),
        "other": total - imports - phases.get("run", 0.0) - phases.get("finish", 0.0),
        "largest": dict(sorted(largest.items(), key=lambda kv: -kv[1])[:8]),
    }
    record["program_bytes"] = _program_sizes()
    with open(target, "w") as f:
        json.dump(record, f, indent=1)
    return record


if __name__ == "__main__":
    main()
