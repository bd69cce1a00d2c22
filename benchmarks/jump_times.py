"""The main job: saddle-to-saddle jumps of small-init ReLU nets, flow against Algorithm 1.

For each seed: orthonormal data (n = d), a balanced initialization of width m (the paper's
width rule by default), and for each alpha = 10^-p / sqrt(m) the rescaled gradient flow
d theta/dt = -log(1/alpha) grad L, integrated with diffrax at float64. Seeds run through
`integrators.sweep`: vmapped, sharded over devices, and resumable (rerun the same command
after a kill and finished chunks are loaded from `--out`).

Algorithm 1 (`theory.saddle_jumps`) predicts the jump times; measured jump k is
the first time the simulated loss falls below the midpoint between predicted plateaus k-1
and k. Beside the alpha -> 0 limit, the finite-alpha prediction at the run's alpha
(`saddle_jumps(..., time_scale=tau)`). `--labels sign` uses +-1 labels, where tied neurons
jump simultaneously. Writes `results.json` and `staircase.png` to `--out`.

    python -m benchmarks.jump_times [--n 32] [--seeds 16] [--log10-inv-alpha 10 30 100]
                                    [--labels gaussian|sign]
"""

import numpy as np

from benchmarks import _saddle
from benchmarks._common import Timer, enable_float64, host_devices, log, parser, pyplot, save_figure
from benchmarks._driver import finish, header, run_sweep
from theory import coverage_width
from theory.checks import check_alpha

make, run = _saddle.make, _saddle.run  # the per-seed instance and simulation


def run_benchmark(
    n=32,
    width=None,
    seeds=16,
    seed=0,
    log10_inv_alpha=(10, 30, 100),
    rtol=1e-7,
    out=None,
    labels="gaussian",
):
    """Run the comparison through `integrators.sweep` (resumable when `out` is given);
    returns the results dict (also what `results.json` holds)."""
    enable_float64()
    timer = Timer()
    m = coverage_width(n) if width is None else width
    for p in log10_inv_alpha:
        check_alpha(10.0 ** (-p) / np.sqrt(m), np.float64)
    if labels not in ("gaussian", "sign"):
        raise ValueError(f"`labels` must be 'gaussian' or 'sign', got {labels!r}")
    log(
        f"jump_times: n = d = {n}, m = {m}, {seeds} seeds, p = {list(log10_inv_alpha)},"
        f" {labels} labels"
    )
    grid = [
        dict(log10_inv_alpha=p, n=n, width=m, rtol=rtol, labels=labels) for p in log10_inv_alpha
    ]
    result, record = run_sweep(
        run,
        make=make,
        seeds=seeds,
        grid=grid,
        static=("n", "width", "rtol", "labels"),
        out=out,
        name="jump_times",
        config={"horizon": _saddle.HORIZON, "grid_points": _saddle.GRID},
        base_seed=seed,
        ok=("solve_ok",),
    )
    summary, runs = [], []
    for p, o, failed, wall in zip(
        log10_inv_alpha, result.outputs, result.failed, result.point_seconds, strict=True
    ):
        entry = _saddle.summarize(p, o, wall)
        entry["failed_chunks"] = failed
        summary.append(entry)
        per_seed = (
            "predicted_cost",
            "predicted_cost_finite_alpha",
            "measured_cost",
            "min_norm_cost",
            "final_loss",
            "solver_steps",
            "rejected_steps",
            "solve_ok",
            "y",
            "signs",
            "directions",
        )
        for s in range(seeds):
            k = int(o["num_jumps"][s])
            runs.append(
                {
                    "seed": s,
                    "log10_inv_alpha": p,
                    "predicted_times": o["predicted_times"][s, :k],
                    "predicted_times_finite_alpha": o["predicted_times_finite_alpha"][s, :k],
                    "measured_times": o["measured_times"][s, :k],
                    "group_sizes": o["group_sizes"][s, :k],
                    "predicted_neurons": o["predicted_neurons"][s, :k],
                    **{key: o[key][s] for key in per_seed},
                }
            )
    config = {
        "n": n,
        "d": n,
        "width": m,
        "seeds": seeds,
        "log10_inv_alpha": list(log10_inv_alpha),
        "labels": labels,
        "alpha": "10^-p / sqrt(m)",
        "rtol": rtol,
        "atol": rtol,
        "horizon": f"{_saddle.HORIZON} x last predicted jump time",
        "grid_points": _saddle.GRID,
        "time": "rescaled, d theta/dt = -log(1/alpha) grad L, L = 1/(2n) sum (h - y)^2",
    }
    return {
        **header("jump_times", config, seed),
        "wall_seconds": timer(),
        **record,
        "summary": summary,
        "runs": runs,
        "_curves": dict(zip(log10_inv_alpha, result.outputs, strict=True)),
    }


def table(results: dict) -> str:
    head = (
        f"{'p':>6} {'median err':>11} {'max err':>9} {'cost err':>9} {'fin. med':>9}"
        f" {'fin. max':>9} {'fin. cost':>9} {'ties':>5} {'steps':>7} {'wall s':>7}"
    )
    lines = [head, "-" * len(head)]
    for e in results["summary"]:
        lines.append(
            f"{e['log10_inv_alpha']:>6} {e['median_rel_error']:>11.2e} {e['max_rel_error']:>9.2e}"
            f" {e['median_cost_rel_error']:>9.2e} {e['median_rel_error_finite_alpha']:>9.2e}"
            f" {e['max_rel_error_finite_alpha']:>9.2e}"
            f" {e['median_cost_rel_error_finite_alpha']:>9.2e} {e['simultaneous_jumps']:>5}"
            f" {e['median_solver_steps']:>7.0f} {e['wall_seconds']:>7.1f}"
        )
    lines.append(
        "errors against the alpha -> 0 limit (Algorithm 1) and against the finite-alpha"
        " prediction (fin.); ties: simultaneous jumps of several neurons"
    )
    lines.append(f"total wall time {results['wall_seconds']:.1f} s (compilation included)")
    sweep = results.get("sweep", {})
    if sweep.get("loaded_chunks"):
        total = sweep["loaded_chunks"] + sweep["computed_chunks"]
        lines.append(
            f"{sweep['loaded_chunks']} of {total} chunks loaded from an earlier run into this "
            "--out: their rows' wall s are that run's (--fresh recomputes)"
        )
    return "\n".join(lines)


def plot_staircase(results: dict, path, num_seeds: int = 3) -> None:
    plt = pyplot()

    curves = results["_curves"]
    ps = results["config"]["log10_inv_alpha"]
    grid = np.linspace(0.0, 1.0, _saddle.GRID)
    fig, axes = plt.subplots(1, len(ps), figsize=(4.2 * len(ps), 3.6), sharey=True, squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, p in zip(axes[0], ps, strict=True):
        o = curves[p]
        for s in range(min(num_seeds, o["loss"].shape[0])):
            c = colors[s % len(colors)]
            ax.semilogy(grid * o["t1"][s], o["loss"][s], color=c, lw=1.2, label=f"seed {s}")
            for t in o["predicted_times"][s]:
                if np.isfinite(t):
                    ax.axvline(t, color=c, ls=":", lw=0.8)
        ax.set_title(f"alpha = 1e-{p} / sqrt(m)")
        ax.set_xlabel("rescaled time t")
    axes[0][0].set_ylabel("training loss")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Gradient flow (lines) vs Algorithm 1 jump times (dotted)")
    save_figure(fig, path)


def main(argv=None) -> dict:
    host_devices()
    p = parser("jump_times", __doc__.splitlines()[0], default_seeds=16)
    p.add_argument("--n", type=int, default=32, help="samples n = input dimension d")
    p.add_argument("--width", type=int, default=None, help="neurons m (default: width rule)")
    p.add_argument("--log10-inv-alpha", type=int, nargs="+", default=[10, 30, 100])
    p.add_argument("--rtol", type=float, default=1e-7, help="solver rtol = atol")
    p.add_argument(
        "--labels", choices=("gaussian", "sign"), default="gaussian", help="label distribution"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.n, args.seeds, args.log10_inv_alpha = 8, 4, [10, 30]
    results = run_benchmark(
        args.n,
        args.width,
        args.seeds,
        args.seed,
        tuple(args.log10_inv_alpha),
        args.rtol,
        out=args.out,
        labels=args.labels,
    )
    finish(args.out, results, table(results), {"staircase.png": plot_staircase})
    return results


if __name__ == "__main__":
    main()
