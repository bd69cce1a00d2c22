"""The GPU run: the main job's flow and the GD sweep at 10,000 seeds in float64, timed.

One prepared script for a machine with an accelerator (it runs anywhere; on CPU use `--quick`).
It reports, for each part, wall time (compilation included and excluded), peak device memory
and seeds per second, and writes `results.json` to `--out`:

- the GD sweep of `benchmarks.sweep_throughput` (n = 64, m = 47, eta = 0.5, 2,000 epochs);
- the main job's rescaled flow (`benchmarks.jump_times`: n = d = 32, m = 45,
  alpha = 1e-30 / sqrt(m)), against Algorithm 1.

    python -m benchmarks.gpu_check [--seeds 10000] [--quick]
"""

import jax

from benchmarks import jump_times, sweep_throughput
from benchmarks._common import Timer, enable_float64, environment, log, parser, write_results


def _peak_bytes() -> int | None:
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def main(argv=None) -> dict:
    p = parser("gpu_check", __doc__.splitlines()[0], default_seeds=10_000)
    args = p.parse_args(argv)
    if args.quick:
        args.seeds = 8
    enable_float64()
    log(f"gpu_check: backend {jax.default_backend()}, devices {jax.devices()}, {args.seeds} seeds")
    timer = Timer()
    gd = sweep_throughput.measure(args.seeds, args.seed, repeats=2)
    gd["peak_bytes"] = _peak_bytes()
    gd["seeds_per_s"] = args.seeds / gd["seconds"]
    log(f"GD sweep: {gd['seconds']:.2f} s warm, {gd['seed_epochs_per_s']:.3g} seed-epochs/s")
    flow_timer = Timer()
    jt = jump_times.run(seeds=args.seeds, seed=args.seed, log10_inv_alpha=(30,))
    cold = flow_timer()
    warm_timer = Timer()
    jump_times.run(seeds=args.seeds, seed=args.seed, log10_inv_alpha=(30,))
    warm = warm_timer()
    s = jt["summary"][0]
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
        "batch_size": jt["sweep"]["batch_size"],
    }
    log(f"main-job flow: {warm:.2f} s warm ({cold:.2f} s cold), {flow['seeds_per_s']:.3g} seeds/s")
    results = {
        "benchmark": "gpu_check",
        "config": {"seeds": args.seeds, "base_seed": args.seed, "dtype": "float64"},
        "environment": environment(),
        "gd_sweep": gd,
        "main_job_flow": flow,
        "wall_seconds": timer(),
    }
    for name, r in (("GD sweep", gd), ("main-job flow", flow)):
        mem = r["peak_bytes"]
        mem_s = "n/a" if mem is None else f"{mem / 2**30:.2f} GiB"
        print(f"{name:>14}: {r['seeds_per_s']:.4g} seeds/s, peak memory {mem_s}")
    print(
        f"median jump-time error {flow['median_rel_error']:.2e},"
        f" failed solves {flow['failed_solves']}"
    )
    write_results(args.out, results)
    return results


if __name__ == "__main__":
    main()
