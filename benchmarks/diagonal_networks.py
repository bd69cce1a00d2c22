"""Diagonal linear networks: the alpha -> 0 jump process against the exact flow.

Pesme and Flammarion, "Saddle-to-Saddle Dynamics in Diagonal Linear Networks", NeurIPS 2023
(arXiv 2304.00488). Sparse regression: X (n, d) with N(0, 1) entries, y = X beta* with
`sparsity` nonzero entries of beta* (N(0, 1)), beta = u*u - v*v from u = v = alpha. For each
(n, d), seed and alpha, `theory.diagonal_jumps` (the limit) against `integrators.diagonal_flow`
(the exact flow in log form, alpha down to 10^-10000):

- the jump times (the loss crossing the midpoint of each pair of predicted plateaus), their
  largest relative error |t_flow / t_limit - 1|, and the slope of log(error) against
  log(1 / log(1/alpha)) fitted over alpha;
- the first jump against its finite-alpha correction (`first_time_finite_alpha`);
- the saddles: beta of the flow halfway between consecutive predicted jumps against the
  predicted saddle beta^k;
- the final beta of the flow against the limit, and the limit against the minimum-l1-norm
  interpolator (the LP min ||beta||_1 s.t. X beta = y, solved by scipy's HiGHS).

Writes `results.json` (`rows`, one per (n, d, alpha) with per-seed lists), `table.md`,
`loss_curves.png` and `errors.png`.
"""

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

from benchmarks._common import Timer, enable_float64, log, parser, pyplot, save_figure
from benchmarks._driver import finish, header
from integrators import diagonal_flow
from theory import crossing_times, diagonal_jumps

SIZES = ((20, 40), (20, 200), (50, 100), (50, 500), (100, 200), (100, 1000))
LOG10_INV_ALPHAS = (5, 10, 30, 100, 1000, 10000)
SLOPE_FROM = 30  # the slope is fitted over log10(1/alpha) >= this (the asymptotic range)
SPARSITY = 5
GRID = 3001
WINDOW = 1001


def problem(n: int, d: int, seed: int):
    kx, kb = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), 1000 * n + d))
    X = jax.random.normal(kx, (n, d))
    beta = jnp.zeros(d).at[:SPARSITY].set(jax.random.normal(kb, (SPARSITY,)))
    return X, X @ beta


def min_l1(X, y) -> np.ndarray:
    """argmin ||beta||_1 s.t. X beta = y, as the LP over (beta+, beta-) >= 0."""
    X, y = np.asarray(X), np.asarray(y)
    d = X.shape[1]
    res = scipy.optimize.linprog(
        np.ones(2 * d), A_eq=np.hstack([X, -X]), b_eq=y, bounds=(0, None), method="highs"
    )
    if res.status != 0:
        raise RuntimeError(f"the min-l1 LP failed: {res.message}")
    return res.x[:d] - res.x[d:]


def time_grid(times) -> jnp.ndarray:
    """0; GRID points in geometric progression from t_1 / 4 to 1.3 t_K (0.3% relative
    spacing, for the crossings far from the limit at larger alpha); and WINDOW points within
    +-2% of each predicted jump t_k (4e-5 relative spacing, for those close to it)."""
    times = np.asarray(times)
    parts = [np.zeros(1), np.geomspace(times[0] / 4.0, 1.3 * times[-1], GRID)]
    parts += [np.linspace(0.98 * t, 1.02 * t, WINDOW) for t in times]
    return jnp.asarray(np.unique(np.concatenate(parts)))


def one_setting(n: int, d: int, seeds: list[int], log10s) -> list[dict]:
    rows = {k: [] for k in log10s}
    curves = {}
    for seed in seeds:
        X, y = problem(n, d, seed)
        t = Timer()
        pred = jax.block_until_ready(diagonal_jumps(X, y))
        pred_seconds = t()
        k = int(pred.num_jumps)
        levels = np.concatenate([[float(pred.initial_loss)], np.asarray(pred.losses[:k])])
        ref = min_l1(X, y)
        l1_gap = float(np.abs(np.asarray(pred.final_beta) - ref).max())
        ts = time_grid(pred.times[:k])
        for log10 in log10s:
            tau = log10 * np.log(10.0)
            t = Timer()
            sol = jax.block_until_ready(diagonal_flow(X, y, ts, time_scale=tau))
            seconds = t()
            measured = np.asarray(crossing_times(ts, sol.loss, pred))[:k]
            # the saddles: beta halfway between consecutive predicted jumps against beta^k
            mids = np.asarray(pred.times[:k])
            mids = np.append(0.5 * (mids[:-1] + mids[1:]), 1.3 * mids[-1])
            at = diagonal_flow(X, y, jnp.asarray(np.concatenate([[0.0], mids])),
                               time_scale=tau, save_trajectory=True)  # fmt: skip
            saddle_err = float(jnp.abs(at.beta[1:] - pred.betas[:k]).max())
            err = np.abs(measured / np.asarray(pred.times[:k]) - 1.0)  # relative
            alpha_first = 10.0 ** (-log10) if log10 < 300 else None
            first_fin = (
                abs(measured[0] / float(pred.first_time_finite_alpha(alpha_first)) - 1.0)
                if alpha_first is not None
                else None
            )
            rows[log10].append(
                dict(
                    seed=seed, ok=bool(sol.ok and pred.ok), jumps=k,
                    max_time_error=float(np.nanmax(err)), first_time_error=float(err[0]),
                    first_time_error_finite_alpha=first_fin,
                    final_beta_error=float(jnp.abs(sol.final_beta - pred.final_beta).max()),
                    saddle_error=saddle_err,
                    limit_vs_min_l1=l1_gap, flow_seconds=seconds, prediction_seconds=pred_seconds,
                    steps=int(sol.stats["num_steps"]), missed_jumps=int(np.isnan(measured).sum()),
                )
            )  # fmt: skip
            if seed == seeds[0]:
                curves[log10] = (np.asarray(ts).tolist(), np.asarray(sol.loss).tolist())
        if seed == seeds[0]:
            curves["prediction"] = (np.asarray(pred.times[:k]).tolist(), levels.tolist())
    out = []
    for log10 in log10s:
        per = rows[log10]
        out.append(
            dict(
                n=n, d=d, log10_inv_alpha=log10, seeds=len(per),
                ok=sum(r["ok"] for r in per), per_seed=per,
                median_jumps=float(np.median([r["jumps"] for r in per])),
                median_max_time_error=float(np.median([r["max_time_error"] for r in per])),
                max_final_beta_error=max(r["final_beta_error"] for r in per),
                median_saddle_error=float(np.median([r["saddle_error"] for r in per])),
                max_limit_vs_min_l1=max(r["limit_vs_min_l1"] for r in per),
                median_flow_seconds=float(np.median([r["flow_seconds"] for r in per])),
            )
        )  # fmt: skip
    slope = fitted_slope(
        [(r["log10_inv_alpha"], r["median_max_time_error"]) for r in out
         if r["log10_inv_alpha"] >= SLOPE_FROM]
    )  # fmt: skip
    for r in out:
        r["fitted_slope"] = slope
    return out, curves


def fitted_slope(points) -> float:
    """Slope of log(error) against log(1 / log(1/alpha)) (1: error ~ 1 / log(1/alpha))."""
    x = np.log(1.0 / (np.array([p[0] for p in points]) * np.log(10.0)))
    e = np.array([p[1] for p in points])
    keep = e > 0
    return float(np.polyfit(x[keep], np.log(e[keep]), 1)[0]) if keep.sum() >= 2 else float("nan")


def run_benchmark(sizes=SIZES, seeds=8, seed=0, log10s=LOG10_INV_ALPHAS) -> dict:
    enable_float64()
    timer = Timer()
    rows, curves = [], {}
    for n, d in sizes:
        log(f"diagonal_networks: n = {n}, d = {d}, {seeds} seeds")
        out, c = one_setting(n, d, list(range(seed, seed + seeds)), log10s)
        rows += out
        curves[f"{n}x{d}"] = c
    config = {
        "sizes": [list(s) for s in sizes], "log10_inv_alphas": list(log10s),
        "sparsity": SPARSITY, "grid_points": GRID, "window_points": WINDOW,
        "slope_from_log10_inv_alpha": SLOPE_FROM,
        "data": "X_ij ~ N(0, 1), y = X beta*, beta* with SPARSITY N(0, 1) entries",
        "flow": "integrators.diagonal_flow (Rodas5P, Woodbury, rtol = atol = 1e-8)",
        "jump time": "first crossing of the midpoint between consecutive predicted plateaus",
        "time errors": "relative, |t_flow / t_limit - 1|",
    }  # fmt: skip
    return {
        **header("diagonal_networks", config, seed),
        "rows": rows,
        "curves": curves,
        "wall_seconds": timer(),
    }


def table(results: dict) -> str:
    lines = [
        "| n | d | log10(1/alpha) | ok | jumps | max rel. time err | slope | first err (fin.) | "
        "saddle err | beta err | limit - min-l1 | flow s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        fin = [x["first_time_error_finite_alpha"] for x in r["per_seed"]]
        fin = "-" if fin[0] is None else f"{np.median(fin):.1e}"
        first = np.median([x["first_time_error"] for x in r["per_seed"]])
        lines.append(
            f"| {r['n']} | {r['d']} | {r['log10_inv_alpha']} | {r['ok']}/{r['seeds']} | "
            f"{r['median_jumps']:g} | {r['median_max_time_error']:.1e} | "
            f"{r['fitted_slope']:.2f} | {first:.1e} ({fin}) | {r['median_saddle_error']:.1e} | "
            f"{r['max_final_beta_error']:.1e} | "
            f"{r['max_limit_vs_min_l1']:.1e} | {r['median_flow_seconds']:.2f} |"
        )
    lines.append(
        "\nmedians over seeds; slope: log(error) against log(1/log(1/alpha)) per (n, d); "
        "first err: the first jump against the limit and (fin.) against the finite-alpha "
        "correction; saddle err: max_k |beta_flow - beta^k| halfway between jumps k and k + 1; "
        "beta err: max |beta_flow(T) - beta_limit|; limit - min-l1: max over seeds"
    )
    return "\n".join(lines)


def plot_curves(results: dict, path) -> None:
    plt = pyplot()
    name = next(iter(results["curves"]))
    c = results["curves"][name]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for i, key in enumerate(k for k in c if k != "prediction"):
        ts, loss = c[key]
        ax.semilogy(ts, loss, color=f"C{i}", lw=1.2, label=f"flow, alpha = 1e-{key}")
    times, levels = c["prediction"]
    steps_t = [0.0] + [t for t in times for _ in (0, 1)] + [ts[-1]]
    steps_l = [lv for lv in levels for _ in (0, 1)]
    ax.semilogy(steps_t, steps_l, "k--", lw=1.0, label="jump process (alpha -> 0)")
    ax.set_ylim(max(min(levels[-1], 1e-12), 1e-12), levels[0] * 2)
    ax.set_xlabel("rescaled time t / log(1/alpha)")
    ax.set_ylabel("training loss")
    ax.set_title(f"diagonal network, n x d = {name}, seed 0")
    ax.legend(fontsize=7)
    save_figure(fig, path)


def plot_errors(results: dict, path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    sizes = list(dict.fromkeys((r["n"], r["d"]) for r in results["rows"]))
    for i, (n, d) in enumerate(sizes):
        rows = [r for r in results["rows"] if (r["n"], r["d"]) == (n, d)]
        x = [1.0 / (r["log10_inv_alpha"] * np.log(10.0)) for r in rows]
        ax.loglog(x, [r["median_max_time_error"] for r in rows], "o-", color=f"C{i}",
                  label=f"n = {n}, d = {d} (slope {rows[0]['fitted_slope']:.2f})")  # fmt: skip
    ax.set_xlabel("1 / log(1/alpha)")
    ax.set_ylabel("median max |t_flow / t_limit - 1|")
    ax.legend(fontsize=7)
    save_figure(fig, path)


def main(argv=None) -> dict:
    p = parser("diagonal_networks", __doc__.splitlines()[0], default_seeds=8)
    args = p.parse_args(argv)
    kw = {}
    if args.quick:
        kw = dict(sizes=((20, 40), (20, 100)), log10s=(5, 30, 1000, 10000))
    results = run_benchmark(seeds=args.seeds if not args.quick else 2, seed=args.seed, **kw)
    finish(args.out, results, table(results), {"loss_curves.png": plot_curves,
                                                "errors.png": plot_errors})  # fmt: skip
    return results


if __name__ == "__main__":
    main()
