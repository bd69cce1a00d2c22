"""The main job: saddle-to-saddle jumps of small-init ReLU nets, flow against Algorithm 1.

For each seed: orthonormal data (n = d), a balanced initialization of width m (the paper's
width rule by default), and for each alpha = 10^-p / sqrt(m) the rescaled gradient flow
d theta/dt = -log(1/alpha) grad L, integrated with diffrax at float64 for all seeds as one
vmapped call. Algorithm 1 (`theory.saddle_jumps`) predicts the jump times; measured jump k is
the first time the simulated loss falls below the midpoint between predicted plateaus k-1
and k. Writes `results.json` and `staircase.png` to `--out`.

    python -m benchmarks.jump_times [--n 32] [--seeds 16] [--log10-inv-alpha 10 30 100]
"""

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._common import Timer, enable_float64, log, parser, write_results
from dynamics import balanced_init, orthogonal_data, signs_and_directions
from integrators import gradient_flow
from theory import coverage_width, crossing_times, min_norm_cost, saddle_jumps

HORIZON = 1.15  # integrate to 1.15 x the last predicted jump time
GRID = 4000  # save times per run


def make_instances(n: int, m: int, seeds: int, base_seed: int, alphas):
    """Per seed: data (X, y), and one balanced init per alpha, all with the same signs s_j and
    directions u_j (the same key), so that the alphas differ only in scale."""
    keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.PRNGKey(base_seed), s))(
        jnp.arange(seeds)
    )
    kx, kw = jax.vmap(jax.random.split, out_axes=1)(keys)
    X, y = jax.vmap(lambda k: orthogonal_data(n, key=k, dtype=jnp.float64))(kx)
    models = [
        jax.vmap(lambda k, a=a: balanced_init(m, n, a, key=k, dtype=jnp.float64))(kw)
        for a in alphas
    ]
    return X, y, models


def _solve(models, X, y, ts, tau, rtol):
    def one(model, X, y, ts):
        sol = gradient_flow(model, X, y, ts, time_scale=tau, rtol=rtol, atol=rtol)
        m = sol.model
        cost = 0.5 * (jnp.sum(m.a**2) + jnp.sum(m.W**2))
        return sol.loss, cost, sol.num_steps, sol.num_rejected_steps, sol.ok

    return jax.vmap(one)(models, X, y, ts)


solve = jax.jit(_solve, static_argnames="rtol")


def run(n=32, width=None, seeds=16, seed=0, log10_inv_alpha=(10, 30, 100), rtol=1e-7):
    """Run the comparison; returns the results dict (also what `results.json` holds)."""
    enable_float64()
    timer = Timer()
    m = coverage_width(n) if width is None else width
    alphas = [10.0 ** (-p) / np.sqrt(m) for p in log10_inv_alpha]
    X, y, all_models = make_instances(n, m, seeds, seed, alphas)
    signs, directions = jax.vmap(signs_and_directions)(all_models[0], X)
    pred = jax.vmap(saddle_jumps)(y, signs, directions)
    last = jnp.max(jnp.where(jnp.isfinite(pred.times), pred.times, 0.0), axis=1)
    t1 = HORIZON * jnp.where(last > 0, last, 1.0)
    ts = jax.vmap(lambda t: jnp.linspace(0.0, t, GRID))(t1)
    log(f"jump_times: n = d = {n}, m = {m}, {seeds} seeds, p = {list(log10_inv_alpha)}")

    summary, runs, curves = [], [], {}
    for i, (p, models) in enumerate(zip(log10_inv_alpha, all_models, strict=True)):
        t0 = Timer()
        tau = p * np.log(10.0) + 0.5 * np.log(m)  # log(1/alpha)
        loss, cost, steps, rejected, ok = solve(models, X, y, ts, jnp.asarray(tau), rtol)
        loss.block_until_ready()
        measured = jax.vmap(crossing_times)(ts, loss, pred)
        rel = np.abs(np.asarray(measured) / np.asarray(pred.times) - 1.0)
        real = np.isfinite(np.asarray(pred.times))
        errs = rel[real]
        missed = int(np.sum(np.isnan(errs)))
        entry = {
            "log10_inv_alpha": p,
            "log_inv_alpha": tau,
            "median_rel_error": float(np.nanmedian(errs)),
            "max_rel_error": float(np.nanmax(errs)),
            "jumps": int(errs.size),
            "jumps_not_crossed": missed,
            "median_solver_steps": float(np.median(steps)),
            "max_solver_steps": int(np.max(steps)),
            "median_rejected_steps": float(np.median(rejected)),
            "failed_solves": int(np.sum(~np.asarray(ok))),
            "median_cost_rel_error": float(np.median(np.abs(cost / pred.cost - 1.0))),
            "wall_seconds": t0(),
        }
        summary.append(entry)
        curves[p] = np.asarray(loss)
        for s in range(seeds):
            k = int(pred.num_jumps[s])
            runs.append(
                {
                    "seed": s,
                    "log10_inv_alpha": p,
                    "predicted_times": pred.times[s, :k],
                    "measured_times": measured[s, :k],
                    "predicted_neurons": pred.neurons[s, :k],
                    "predicted_cost": pred.cost[s],
                    "measured_cost": cost[s],
                    "min_norm_cost": min_norm_cost(y[s]),
                    "final_loss": loss[s, -1],
                    "solver_steps": steps[s],
                    "rejected_steps": rejected[s],
                    "solve_ok": ok[s],
                    "y": y[s],
                    "signs": signs[s],
                    "directions": directions[s],
                }
            )
        log(
            f"[{i + 1}/{len(log10_inv_alpha)}] p = {p:>5}: median rel err "
            f"{entry['median_rel_error']:.2e}, max {entry['max_rel_error']:.2e}, "
            f"median steps {entry['median_solver_steps']:.0f}, {entry['wall_seconds']:.1f} s"
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
        "summary": summary,
        "runs": runs,
        "_curves": {"ts": np.asarray(ts), "loss": curves, "pred": pred},
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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = results["_curves"]
    ps = results["config"]["log10_inv_alpha"]
    fig, axes = plt.subplots(1, len(ps), figsize=(4.2 * len(ps), 3.6), sharey=True, squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, p in zip(axes[0], ps, strict=True):
        for s in range(min(num_seeds, curves["ts"].shape[0])):
            c = colors[s % len(colors)]
            ax.semilogy(curves["ts"][s], curves["loss"][p][s], color=c, lw=1.2, label=f"seed {s}")
            for t in np.asarray(curves["pred"].times[s]):
                if np.isfinite(t):
                    ax.axvline(t, color=c, ls=":", lw=0.8)
        ax.set_title(f"alpha = 1e-{p} / sqrt(m)")
        ax.set_xlabel("rescaled time t")
    axes[0][0].set_ylabel("training loss")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Gradient flow (lines) vs Algorithm 1 jump times (dotted)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> dict:
    p = parser("jump_times", __doc__.splitlines()[0], default_seeds=16)
    p.add_argument("--n", type=int, default=32, help="samples n = input dimension d")
    p.add_argument("--width", type=int, default=None, help="neurons m (default: width rule)")
    p.add_argument("--log10-inv-alpha", type=int, nargs="+", default=[10, 30, 100])
    p.add_argument("--rtol", type=float, default=1e-7, help="solver rtol = atol")
    args = p.parse_args(argv)
    if args.quick:
        args.n, args.seeds, args.log10_inv_alpha = 8, 4, [10, 30]
    results = run(args.n, args.width, args.seeds, args.seed, tuple(args.log10_inv_alpha), args.rtol)
    print(table(results))
    path = write_results(args.out, {k: v for k, v in results.items() if k != "_curves"})
    plot_staircase(results, args.out / "staircase.png")
    log(f"wrote {path} and {args.out / 'staircase.png'}")
    return results


if __name__ == "__main__":
    main()
