"""The GPU run: the main job's flow and the GD sweep at 10,000 seeds in float64, timed.

One prepared script for a machine with an accelerator (it runs anywhere; on CPU use `--quick`).
It reports, for each part, wall time (compilation included and excluded), peak device memory
and seeds per second, and writes `results.json` to `--out`:

- the GD sweep of `benchmarks.sweep_throughput` (n = 64, m = 47, eta = 0.5, 2,000 epochs);
- the main job's rescaled flow (`benchmarks.jump_times`' per-seed run: n = d = 32, m = 45,
  alpha = 1e-30 / sqrt(m)), against Algorithm 1.

    python -m benchmarks.gpu_check [--seeds 10000] [--quick]
"""

import jax

from benchmarks import _gd_sweep, _saddle
from benchmarks._common import Timer, enable_float64, host_devices, log, parser
from benchmarks._driver import finish, header, run_sweep
from theory import coverage_width

N_FLOW, P_FLOW = 32, 30  # the main job's instance at alpha = 1e-30 / sqrt(m)


def _peak_bytes() -> int | None:
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def _main_job_flow(seeds: int, base_seed: int) -> dict:
    """The main job's flow (`benchmarks._saddle.run`) at one alpha over `seeds` seeds."""
    m = coverage_width(N_FLOW)
    result, record = run_sweep(
        _saddle.run,
        make=_saddle.make,
        seeds=seeds,
        grid=[dict(log10_inv_alpha=P_FLOW, n=N_FLOW, width=m, rtol=1e-7)],
        static=("n", "width", "rtol"),
        out=None,
        name="gpu_check",
        base_seed=base_seed,
        ok=("solve_ok",),
    )
    summary = _saddle.summarize(P_FLOW, result.outputs[0], result.wall_seconds)
    return {**summary, "batch_size": result.batch_size, "record": record}


def main(argv=None) -> dict:
    host_devices()
    p = parser("gpu_check", __doc__.splitlines()[0], default_seeds=10_000)
    args = p.parse_args(argv)
    if args.quick:
        args.seeds = 8
    enable_float64()
    log(f"gpu_check: backend {jax.default_backend()}, devices {jax.devices()}, {args.seeds} seeds")
    timer = Timer()
    gd = _gd_sweep.measure(args.seeds, args.seed, repeats=2)
    gd["peak_bytes"] = _peak_bytes()
    gd["seeds_per_s"] = args.seeds / gd["seconds"]
    log(f"GD sweep: {gd['seconds']:.2f} s warm, {gd['seed_epochs_per_s']:.3g} seed-epochs/s")
    flow_timer = Timer()
    s = _main_job_flow(args.seeds, args.seed)
    cold = flow_timer()
    warm_timer = Timer()
    _main_job_flow(args.seeds, args.seed)
    warm = warm_timer()
    flow = {
        "seeds": args.seeds,
        "seconds_with_compilation": cold,
        "seconds_warm": warm,
        "seeds_per_s": args.seeds / warm,
        "peak_bytes": _peak_bytes(),
        "median_rel_error": s["median_rel_error"],
        "max_rel_error": s["max_rel_error"],
        "median_solver_steps": s["median_solver_steps"],
        "failed_solves": s["failed_solves"],
        "batch_size": s["batch_size"],
        "failed_chunks": s["record"]["failed_chunks"],
    }
    log(f"main-job flow: {warm:.2f} s warm ({cold:.2f} s cold), {flow['seeds_per_s']:.3g} seeds/s")
    results = {
        **header("gpu_check", {"seeds": args.seeds, "dtype": "float64"}, args.seed),
        "gd_sweep": gd,
        "main_job_flow": flow,
        "wall_seconds": timer(),
    }
    finish(args.out, results, table(results), {})
    return results


def table(results: dict) -> str:
    lines = []
    for name, key in (("GD sweep", "gd_sweep"), ("main-job flow", "main_job_flow")):
        r = results[key]
        mem = r["peak_bytes"]
        mem_s = "n/a" if mem is None else f"{mem / 2**30:.2f} GiB"
        lines.append(f"{name:>14}: {r['seeds_per_s']:.4g} seeds/s, peak memory {mem_s}")
    flow = results["main_job_flow"]
    lines.append(
        f"median jump-time error {flow['median_rel_error']:.2e},"
        f" failed solves {flow['failed_solves']}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
