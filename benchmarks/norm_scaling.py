"""Table 1 of the orthogonal-data paper: the interpolator's norm against n, GD against theory.

For n in {16, 32, 64, 128, 256} (d = n, m = ceil(ln(1e4 n) / ln(4/3)), alpha = 1e-30 / sqrt(m)):
gradient descent with eta = 0.5 until L <= 1e-10, started from a balanced init. Per seed it
records the epochs, the final 1/2 ||theta||^2 of GD (theta_pred), the minimum-norm interpolator's
1/2 ||theta_opt||^2 = ||y_+|| + ||y_-|| (`theory.min_norm_cost`), Algorithm 1's cost, and the final
cost of the rescaled gradient flow (`integrators.vanishing_flow`) at the same alpha and in the
limit (alpha = 10^-10000 / sqrt(m) by default). A sample in no neuron's support can never be
fitted; GD then stops at that floor + 1e-10 and the seed is reported, never run forever.
Writes `results.json` and `norms.png` to `--out`.

    python -m benchmarks.norm_scaling [--ns 16 32 64 128 256] [--seeds 10]
"""

import jax.numpy as jnp
import numpy as np

from benchmarks import _saddle
from benchmarks._common import (
    Timer,
    enable_float64,
    fit_slope,
    host_devices,
    log,
    parser,
    pyplot,
    save_figure,
)
from benchmarks._driver import finish, header, run_sweep
from benchmarks._paper import PAPER_TABLE1
from dynamics import half_squared_norm, signs_and_directions
from integrators import gradient_descent, vanishing_flow
from theory import RESULTS, coverage_width, min_norm_cost, saddle_jumps

P_GD = 30  # alpha = 10^-P_GD / sqrt(m), the paper's 1e-30 / sqrt(m)
FLOW_HORIZON = 1.3  # flows run to 1.3 x the last predicted jump
FLOW_POINTS = 200


def make(key, n, width, limit_p, eta, tol, max_steps, rtol):
    return _saddle.instance(key, P_GD, n, width)


def run(instance, n, width, limit_p, eta, tol, max_steps, rtol):
    X, y, model = instance
    signs, directions = signs_and_directions(model, X)
    pred = saddle_jumps(y, signs, directions)
    # GD until L <= floor + tol, the floor being the loss of samples no neuron can fit
    sol = gradient_descent(
        X,
        y,
        model,
        learning_rate=eta,
        tol=pred.final_loss + tol,
        max_steps=max_steps,
        num_checkpoints=60,
    )
    out = {
        "epochs": sol.stats["num_steps"],
        "converged": sol.ok,
        "diverged": sol.result == RESULTS.diverged,
        "gd_finite": sol.result != RESULTS.diverged,
        "final_loss": sol.final_loss,
        "norm": half_squared_norm(sol.model),
        "min_norm_cost": min_norm_cost(y),
    }
    ts = jnp.linspace(0.0, pred.horizon(FLOW_HORIZON), FLOW_POINTS)
    for name, p in (("flow", P_GD), ("limit", limit_p)):
        tau = _saddle.time_scale(p, width)
        flow = vanishing_flow(y, signs, directions, ts, time_scale=tau, rtol=rtol, atol=rtol)
        out[f"{name}_cost"] = flow.cost[-1]
        out[f"{name}_ok"] = flow.ok
        out[f"{name}_steps"] = flow.stats["num_steps"]
    out["alg1_cost"] = pred.cost
    out["alg1_jumps"] = pred.num_jumps
    tau_gd = _saddle.time_scale(P_GD, width)
    out["alg1_epochs"] = pred.gd_epochs(time_scale=tau_gd, learning_rate=eta)
    out["uncovered"] = jnp.sum(pred.uncovered)
    return out


def row(n, m, o) -> dict:
    ratio = o["norm"] / o["min_norm_cost"]
    return {
        "n": n,
        "m": m,
        "seeds": int(o["norm"].shape[0]),
        "converged": int(np.sum(o["converged"])),
        "epochs_mean": float(np.mean(o["epochs"])),
        "epochs_max": int(np.max(o["epochs"])),
        "alg1_epochs_mean": float(np.mean(o["alg1_epochs"])),
        "pred_norm_mean": float(np.mean(o["norm"])),
        "pred_norm_std": float(np.std(o["norm"])),
        "opt_norm_mean": float(np.mean(o["min_norm_cost"])),
        "opt_norm_std": float(np.std(o["min_norm_cost"])),
        "ratio_mean": float(np.mean(ratio)),
        "ratio_std": float(np.std(ratio)),
        "alg1_cost_mean": float(np.mean(o["alg1_cost"])),
        "alg1_ratio_mean": float(np.mean(o["alg1_cost"] / o["min_norm_cost"])),
        "flow_cost_mean": float(np.mean(o["flow_cost"])),
        "limit_cost_mean": float(np.mean(o["limit_cost"])),
        "limit_vs_alg1_max_rel": float(np.max(np.abs(o["limit_cost"] / o["alg1_cost"] - 1))),
        "uncovered_seeds": [int(s) for s in np.flatnonzero(o["uncovered"] > 0)],
        "failed_flows": int(np.sum(~o["flow_ok"]) + np.sum(~o["limit_ok"])),
    }


def run_benchmark(
    ns=(16, 32, 64, 128, 256),
    seeds=10,
    seed=0,
    eta=0.5,
    tol=1e-10,
    max_steps=2_000_000,
    limit_p=10000,
    rtol=1e-9,
    out=None,
):
    enable_float64()
    timer = Timer()
    widths = [coverage_width(n) for n in ns]
    log(f"norm_scaling: n = {list(ns)}, m = {widths}, {seeds} seeds, eta = {eta}")
    params = dict(limit_p=limit_p, eta=eta, tol=tol, max_steps=max_steps, rtol=rtol)
    result, record = run_sweep(
        run,
        make=make,
        seeds=seeds,
        grid=[dict(n=n, width=m, **params) for n, m in zip(ns, widths, strict=True)],
        static=("n", "width", "max_steps", "rtol"),
        out=out,
        name="norm_scaling",
        config={"p_gd": P_GD, "flow_horizon": FLOW_HORIZON},
        base_seed=seed,
        ok=("gd_finite", "flow_ok", "limit_ok"),
    )
    rows = [row(n, m, o) for n, m, o in zip(ns, widths, result.outputs, strict=True)]
    for r, wall in zip(rows, result.point_seconds, strict=True):
        r["wall_seconds"] = wall
    slopes = {
        key: fit_slope(ns, [r[key] for r in rows])
        for key in ("pred_norm_mean", "opt_norm_mean", "alg1_cost_mean", "limit_cost_mean")
    }
    config = {
        "ns": list(ns),
        "d": "n",
        "widths": widths,
        "width_rule": "m = ceil(ln(1e4 n) / ln(4/3))",
        "alpha": f"1e-{P_GD} / sqrt(m)",
        "eta": eta,
        "tol": tol,
        "max_steps": max_steps,
        "seeds": seeds,
        "limit_alpha": f"1e-{limit_p:g} / sqrt(m)",
        "rtol": rtol,
        "loss": "L = 1/(2n) sum (h - y)^2",
    }
    return {
        **header("norm_scaling", config, seed),
        "wall_seconds": timer(),
        **record,
        "rows": rows,
        "slopes": slopes,
    }


def table(results: dict) -> str:
    head = (
        f"{'n':>4} {'m':>3} {'epochs':>8} {'GD norm':>14} {'opt norm':>9} {'ratio':>12}"
        f" {'Alg1':>7} {'flow':>7} {'limit':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in results["rows"]:
        lines.append(
            f"{r['n']:>4} {r['m']:>3} {r['epochs_mean']:>8.0f}"
            f" {r['pred_norm_mean']:>7.2f} +- {r['pred_norm_std']:<4.2f} {r['opt_norm_mean']:>9.2f}"
            f" {r['ratio_mean']:>5.3f} +- {r['ratio_std']:<5.3f} {r['alg1_cost_mean']:>7.2f}"
            f" {r['flow_cost_mean']:>7.2f} {r['limit_cost_mean']:>7.2f}"
        )
        if r["uncovered_seeds"] or r["converged"] < r["seeds"]:
            lines.append(
                f"     n = {r['n']}: seeds with uncovered samples {r['uncovered_seeds']},"
                f" converged {r['converged']}/{r['seeds']}"
            )
    s = results["slopes"]
    lines.append(
        "log-log slopes against n: "
        + ", ".join(f"{k.removesuffix('_mean')} {v:.3f}" for k, v in s.items())
    )
    lines.append(f"total wall time {results['wall_seconds']:.1f} s (compilation included)")
    return "\n".join(lines)


def plot(results: dict, path) -> None:
    import matplotlib.ticker

    plt = pyplot()

    rows = results["rows"]
    ns = np.array([r["n"] for r in rows], float)
    fig, ax = plt.subplots(figsize=(6, 4.2))
    series = {
        "pred_norm_mean": "GD, eta = 0.5, alpha = 1e-30/sqrt(m)",
        "alg1_cost_mean": "Algorithm 1",
        "limit_cost_mean": "flow, alpha = 1e-10000/sqrt(m)",
        "opt_norm_mean": "min-norm interpolator",
    }
    for (key, label), marker in zip(series.items(), "os^D", strict=True):
        vals = np.array([r[key] for r in rows])
        (line,) = ax.loglog(ns, vals, marker, label=f"{label} (slope {results['slopes'][key]:.2f})")
        c = np.polyfit(np.log(ns), np.log(vals), 1)
        ax.loglog(ns, np.exp(np.polyval(c, np.log(ns))), "-", color=line.get_color(), lw=0.8)
    ax.loglog(ns, np.sqrt(2 * ns), "k:", lw=0.8, label="sqrt(2n)")
    paper = [row for row in PAPER_TABLE1 if row[0] in set(ns.tolist())]
    if paper:
        pn = [row[0] for row in paper]
        ax.loglog(pn, [row[3] for row in paper], "o", mfc="none", color="gray", label="paper: GD")
        ax.loglog(pn, [row[5] for row in paper], "D", mfc="none", color="gray", label="paper: opt")
    ax.set_xticks(ns, [str(int(n)) for n in ns])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("n (= d)")
    ax.set_ylabel("1/2 ||theta||^2")
    ax.set_title("Interpolator norms against n (mean over seeds)")
    ax.legend(fontsize=7)
    save_figure(fig, path)


def main(argv=None) -> dict:
    host_devices()
    p = parser("norm_scaling", __doc__.splitlines()[0], default_seeds=10)
    p.add_argument("--ns", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    p.add_argument("--eta", type=float, default=0.5, help="GD step")
    p.add_argument("--max-steps", type=int, default=2_000_000, help="GD step cap")
    p.add_argument("--limit-log10-inv-alpha", type=float, default=10000.0)
    args = p.parse_args(argv)
    if args.quick:
        args.ns, args.seeds = [8, 16], 2
    results = run_benchmark(
        tuple(args.ns),
        args.seeds,
        args.seed,
        eta=args.eta,
        max_steps=args.max_steps,
        limit_p=args.limit_log10_inv_alpha,
        out=args.out,
    )
    finish(args.out, results, table(results), {"norms.png": plot})
    return results


if __name__ == "__main__":
    main()
