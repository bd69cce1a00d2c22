"""The main job: saddle-to-saddle jumps of small-init ReLU nets, flow against Algorithm 1.

For each seed: orthonormal data (n = d), a balanced initialization of width m (the paper's
width rule by default), and for each alpha = 10^-p / sqrt(m) the rescaled gradient flow
d theta/dt = -log(1/alpha) grad L, integrated with diffrax at float64. Seeds run through
`integrators.sweep`: vmapped, sharded over devices, and resumable (rerun the same command
after a kill and finished chunks are loaded from `--out`).

Algorithm 1 (`theory.saddle_jumps`) predicts the jump times; measured jump k is
the first time the simulated loss falls below the midpoint between predicted plateaus k-1
and k. Writes `results.json` and `staircase.png` to `--out`.

    python -m benchmarks.jump_times [--n 32] [--seeds 16] [--log10-inv-alpha 10 30 100]
"""

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._common import (
    Timer,
    enable_float64,
    log,
    parser,
    pyplot,
    save_figure,
    write_results,
)
from dynamics import balanced_init, orthogonal_data, signs_and_directions
from dynamics._checks import check_alpha
from integrators import gradient_flow, sweep
from theory import coverage_width, crossing_times, min_norm_cost, saddle_jumps

HORIZON = 1.15  # integrate to 1.15 x the last predicted jump time
GRID = 4000  # save times per run


def log_inv_alpha(p, width):
    """log(1/alpha) for alpha = 10^-p / sqrt(width), exact where alpha itself would underflow."""
    return p * jnp.log(10.0) + 0.5 * jnp.log(width)


def make_instance(key, log10_inv_alpha, n, width, rtol):
    """One seed: orthonormal data and a balanced init at alpha = 10^-p / sqrt(m). The same key
    gives the same data, signs and directions for every p: the alphas differ only in scale."""
    kx, kw = jax.random.split(key)
    X, y = orthogonal_data(n, key=kx, dtype=jnp.float64)
    alpha = jnp.exp(-log_inv_alpha(log10_inv_alpha, width))
    return X, y, balanced_init(width, n, alpha, key=kw, dtype=jnp.float64)


def jump_measurements(pred, ts, loss) -> dict:
    """Algorithm 1's jumps beside the ones measured on a loss curve saved at `ts`."""
    return {
        "predicted_times": pred.times,
        "measured_times": crossing_times(ts, loss, pred),
        "predicted_neurons": pred.neurons,
        "num_jumps": pred.num_jumps,
        "predicted_cost": pred.cost,
    }


def run_instance(instance, log10_inv_alpha, n, width, rtol):
    """Predict with Algorithm 1, integrate the rescaled flow, measure the jumps."""
    X, y, model = instance
    signs, directions = signs_and_directions(model, X)
    pred = saddle_jumps(y, signs, directions)
    t1 = pred.horizon(HORIZON)
    ts = jnp.linspace(0.0, t1, GRID)
    tau = log_inv_alpha(log10_inv_alpha, width)
    sol = gradient_flow(model, X, y, ts, time_scale=tau, rtol=rtol, atol=rtol)
    final = sol.model
    return {
        **jump_measurements(pred, ts, sol.loss),
        "measured_cost": 0.5 * (jnp.sum(final.a**2) + jnp.sum(final.W**2)),
        "min_norm_cost": min_norm_cost(y),
        "final_loss": sol.loss[-1],
        "solver_steps": sol.num_steps,
        "rejected_steps": sol.num_rejected_steps,
        "solve_ok": sol.ok,
        "t1": t1,
        "loss": sol.loss,
        "y": y,
        "signs": signs,
        "directions": directions,
    }


def summarize(p, o, wall):
    """Per-alpha summary of one sweep point's outputs (jump-time and cost errors, steps)."""
    real = np.isfinite(o["predicted_times"])
    errs = np.abs(o["measured_times"] / o["predicted_times"] - 1.0)[real]
    return {
        "log10_inv_alpha": p,
        "log_inv_alpha": float(log_inv_alpha(p, o["signs"].shape[1])),
        "median_rel_error": float(np.nanmedian(errs)),
        "max_rel_error": float(np.nanmax(errs)),
        "jumps": int(errs.size),
        "jumps_not_crossed": int(np.sum(np.isnan(errs))),
        "median_solver_steps": float(np.median(o["solver_steps"])),
        "max_solver_steps": int(np.max(o["solver_steps"])),
        "median_rejected_steps": float(np.median(o["rejected_steps"])),
        "failed_solves": int(np.sum(~o["solve_ok"])),
        "median_cost_rel_error": float(
            np.median(np.abs(o["measured_cost"] / o["predicted_cost"] - 1.0))
        ),
        "wall_seconds": wall,
    }


def run(n=32, width=None, seeds=16, seed=0, log10_inv_alpha=(10, 30, 100), rtol=1e-7, out=None):
    """Run the comparison through `integrators.sweep` (resumable when `out` is given);
    returns the results dict (also what `results.json` holds)."""
    enable_float64()
    timer = Timer()
    m = coverage_width(n) if width is None else width
    for p in log10_inv_alpha:
        check_alpha(10.0 ** (-p) / np.sqrt(m), jnp.float64)
    log(f"jump_times: n = d = {n}, m = {m}, {seeds} seeds, p = {list(log10_inv_alpha)}")
    grid = [dict(log10_inv_alpha=p, n=n, width=m, rtol=rtol) for p in log10_inv_alpha]
    result = sweep(
        run_instance,
        make=make_instance,
        seeds=seeds,
        grid=grid,
        static=("n", "width", "rtol"),
        out=out,
        name="jump_times",
        config={"horizon": HORIZON, "grid_points": GRID},
        base_seed=seed,
    )
    summary, runs = [], []
    for p, o, failed, wall in zip(
        log10_inv_alpha, result.outputs, result.failed, result.point_seconds, strict=True
    ):
        entry = summarize(p, o, wall)
        entry["failed_chunks"] = failed
        summary.append(entry)
        for s in range(seeds):
            k = int(o["num_jumps"][s])
            runs.append(
                {
                    "seed": s,
                    "log10_inv_alpha": p,
                    "predicted_times": o["predicted_times"][s, :k],
                    "measured_times": o["measured_times"][s, :k],
                    "predicted_neurons": o["predicted_neurons"][s, :k],
                    **{
                        key: o[key][s]
                        for key in (
                            "predicted_cost",
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
                    },
                }
            )
    return {
        "benchmark": "jump_times",
        "config": {
            "n": n,
            "d": n,
            "width": m,
            "seeds": seeds,
            "base_seed": seed,
            "log10_inv_alpha": list(log10_inv_alpha),
            "alpha": "10^-p / sqrt(m)",
            "rtol": rtol,
            "atol": rtol,
            "horizon": f"{HORIZON} x last predicted jump time",
            "grid_points": GRID,
            "time": "rescaled, d theta/dt = -log(1/alpha) grad L, L = 1/(2n) sum (h - y)^2",
        },
        "wall_seconds": timer(),
        "sweep": {
            "devices": result.devices,
            "batch_size": result.batch_size,
            "chunk_size": result.chunk_size,
            "computed_chunks": result.computed_chunks,
            "loaded_chunks": result.loaded_chunks,
            "wall_seconds": result.wall_seconds,
        },
        "summary": summary,
        "runs": runs,
        "_curves": {p: o for p, o in zip(log10_inv_alpha, result.outputs, strict=True)},
    }


def table(results: dict) -> str:
    head = f"{'p':>6} {'median err':>11} {'max err':>9} {'cost err':>9} {'steps':>7} {'wall s':>7}"
    lines = [head, "-" * len(head)]
    for e in results["summary"]:
        lines.append(
            f"{e['log10_inv_alpha']:>6} {e['median_rel_error']:>11.2e} {e['max_rel_error']:>9.2e}"
            f" {e['median_cost_rel_error']:>9.2e} {e['median_solver_steps']:>7.0f}"
            f" {e['wall_seconds']:>7.1f}"
        )
    lines.append(f"total wall time {results['wall_seconds']:.1f} s (compilation included)")
    return "\n".join(lines)


def plot_staircase(results: dict, path, num_seeds: int = 3) -> None:
    plt = pyplot()

    curves = results["_curves"]
    ps = results["config"]["log10_inv_alpha"]
    grid = np.linspace(0.0, 1.0, GRID)
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
    p = parser("jump_times", __doc__.splitlines()[0], default_seeds=16)
    p.add_argument("--n", type=int, default=32, help="samples n = input dimension d")
    p.add_argument("--width", type=int, default=None, help="neurons m (default: width rule)")
    p.add_argument("--log10-inv-alpha", type=int, nargs="+", default=[10, 30, 100])
    p.add_argument("--rtol", type=float, default=1e-7, help="solver rtol = atol")
    args = p.parse_args(argv)
    if args.quick:
        args.n, args.seeds, args.log10_inv_alpha = 8, 4, [10, 30]
    results = run(
        args.n,
        args.width,
        args.seeds,
        args.seed,
        tuple(args.log10_inv_alpha),
        args.rtol,
        out=args.out,
    )
    print(table(results))
    path = write_results(args.out, {k: v for k, v in results.items() if k != "_curves"})
    plot_staircase(results, args.out / "staircase.png")
    log(f"wrote {path} and {args.out / 'staircase.png'}")
    return results


if __name__ == "__main__":
    main()
