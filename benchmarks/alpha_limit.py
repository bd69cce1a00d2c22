"""The alpha -> 0 limit: the vanishing-initialization flow against Algorithm 1 up to 10^-10000.

For each seed: orthonormal data (n = d), the signs and directions of a balanced init of width m
(the paper's width rule by default), and for each alpha = 10^-p / sqrt(m) the rescaled flow
integrated by `integrators.vanishing_flow`, which never forms alpha. The jump times are
measured on a save grid that resolves every jump (`theory.jump_time_grid`); the final
1/2 ||theta||^2 is compared with Algorithm 1's cost. The limit theorem says both errors vanish
as alpha -> 0; the fitted slope of error against log(1/alpha) on log-log axes measures how fast.

The same sweep runs with each solver of `--solvers`: `rodas5p`, the flow's default (an
L-stable Rosenbrock method with a structured linear solve and the live set held per step),
`dopri5`, the explicit solver it replaced, on the plain field as before (its steps grow with
log(1/alpha) once neurons have fitted), and `dopri5-held`, Dopri5 with the live set held per
step (cheap where the flow is not stiff, at its stability limit where it is). The summary is the
first solver's; `solvers` holds every solver's steps, wall time per solve (the flow alone,
for each of the first `--timed-seeds` seeds solved by itself after compiling; the median)
and errors side by side.
Writes `results.json`, `errors.png`, `exponents.png` and `solvers.png` to `--out`.

    python -m benchmarks.alpha_limit [--seeds 8] [--log10-inv-alpha 10 30 100 300 1000 10000]
        [--solvers rodas5p dopri5 dopri5-held] [--timed-seeds 8]
"""

import time

import diffrax
import jax
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
from integrators import vanishing_flow
from theory import coverage_width, jump_time_grid, predicted_exponents, saddle_jumps

HORIZON = 1.3  # integrate to 1.3 x the last predicted jump time
CURVE = 400  # points of the stored exponent and loss curves
# name: (solver, hold_live); None is vanishing_flow's default (Rodas5P, Woodbury solve)
SOLVERS = {
    "rodas5p": (None, True),
    "dopri5": (diffrax.Dopri5, False),  # the flow as it was integrated before
    "dopri5-held": (diffrax.Dopri5, True),
}


def make(key, log10_inv_alpha, n, width, rtol, solver="rodas5p"):
    """Labels, signs and directions of one seed: the instance of `benchmarks.jump_times` with
    the same key (only the scale alpha differs, and it is never formed here)."""
    return _saddle.limit_instance(key, n, width)


def _solve(instance, tau, rtol, solver):
    """Algorithm 1's prediction, its save grid and the flow with the named solver."""
    y, signs, directions = instance
    pred = saddle_jumps(y, signs, directions, time_scale=tau)
    t1 = pred.horizon(HORIZON)
    ts = jump_time_grid(pred, t1, time_scale=tau)
    sol = vanishing_flow(y, signs, directions, ts, time_scale=tau, rtol=rtol, atol=rtol,
                         **_solver_options(solver))  # fmt: skip
    return pred, t1, ts, sol


def _solver_options(name: str) -> dict:
    make_solver, hold = SOLVERS[name]
    return {"solver": None if make_solver is None else make_solver(), "hold_live": hold}


def run(instance, log10_inv_alpha, n, width, rtol, solver="rodas5p"):
    signs = instance[1]
    tau = _saddle.time_scale(log10_inv_alpha, width)
    pred, t1, ts, sol = _solve(instance, tau, rtol, solver)
    curve_t = jnp.linspace(0.0, t1, CURVE)
    exponents = jax.vmap(lambda e: jnp.interp(curve_t, ts, e), in_axes=1, out_axes=1)
    return {
        **_saddle.jump_measurements(pred, ts, sol.loss),
        "measured_cost": sol.cost[-1],
        "final_loss": sol.loss[-1],
        "solver_steps": sol.stats["num_steps"],
        "rejected_steps": sol.stats["num_rejected_steps"],
        "solve_ok": sol.ok,
        "t1": t1,
        "exponents": exponents(sol.exponents),
        "predicted_exponents": predicted_exponents(pred, curve_t),
        "signs": signs,
    }


def time_solves(n, width, seeds, seed, ps, rtol, solver) -> list[float]:
    """Median wall seconds of one solve per p: the flow alone, returning its whole solution
    (its save grid and Algorithm 1's prediction are made beforehand), each of `seeds` seeds
    solved by itself after one compiling call (the sweep batches seeds, so its wall time is
    not a solve's)."""
    options = _solver_options(solver)

    def flow(y, signs, directions, ts, tau):
        # the whole solution, as a caller gets it (returning the loss alone would let XLA drop
        # the saved exponents and costs, which are most of the saving work)
        return vanishing_flow(
            y, signs, directions, ts, time_scale=tau, rtol=rtol, atol=rtol, **options
        )

    def grid(y, signs, directions, tau):
        pred = saddle_jumps(y, signs, directions, time_scale=tau)
        return jump_time_grid(pred, pred.horizon(HORIZON), time_scale=tau)

    one, grid = jax.jit(flow), jax.jit(grid)
    instances = [
        make(jax.random.fold_in(jax.random.PRNGKey(seed), s), None, n, width, rtol)
        for s in range(seeds)
    ]
    medians = []
    for k, p in enumerate(ps):
        tau = _saddle.time_scale(p, width)
        grids = [grid(*inst, tau) for inst in instances]
        if k == 0:
            jax.block_until_ready(one(*instances[0], grids[0], tau))  # compile
        walls = []
        for inst, ts in zip(instances, grids, strict=True):
            jax.block_until_ready(ts)
            start = time.perf_counter()
            jax.block_until_ready(one(*inst, ts, tau))
            walls.append(time.perf_counter() - start)
        medians.append(float(np.median(walls)))
    return medians


def run_benchmark(
    n=32,
    width=None,
    seeds=8,
    seed=0,
    ps=(10, 30, 100, 300, 1000, 10000),
    rtol=1e-9,
    out=None,
    solvers=("rodas5p", "dopri5", "dopri5-held"),
    timed_seeds=8,
):
    enable_float64()
    timer = Timer()
    m = coverage_width(n) if width is None else width
    log(f"alpha_limit: n = d = {n}, m = {m}, {seeds} seeds, p = {list(ps)}, {list(solvers)}")
    result, record = run_sweep(
        run,
        make=make,
        seeds=seeds,
        grid=[
            dict(log10_inv_alpha=p, n=n, width=m, rtol=rtol, solver=name)
            for name in solvers
            for p in ps
        ],
        static=("n", "width", "rtol", "solver"),
        out=out,
        name="alpha_limit",
        config={"horizon": HORIZON, "curve_points": CURVE},
        base_seed=seed,
        ok=("solve_ok",),
    )
    timed = min(seeds, timed_seeds)
    by_solver = {}
    for k, name in enumerate(solvers):
        log(f"alpha_limit: timing {timed} single solves per p with {name}")
        walls = time_solves(n, m, timed, seed, ps, rtol, name) if timed else [None] * len(ps)
        rows = []
        part = slice(k * len(ps), (k + 1) * len(ps))
        points = zip(
            ps, result.outputs[part], result.failed[part], result.point_seconds[part], walls,
            strict=True,
        )  # fmt: skip
        for p, o, failed, wall, per_solve in points:
            entry = _saddle.summarize(p, o, wall)
            entry["failed_chunks"] = failed
            entry["median_final_loss"] = float(np.median(o["final_loss"]))
            entry["median_wall_seconds_per_solve"] = per_solve
            entry["solver"] = name
            rows.append(entry)
        by_solver[name] = rows
    summary = by_solver[solvers[0]]
    comparison = {
        name: {
            "median_solver_steps": [e["median_solver_steps"] for e in rows],
            "median_wall_seconds_per_solve": [e["median_wall_seconds_per_solve"] for e in rows],
            "steps_ratio_last_to_first": rows[-1]["median_solver_steps"]
            / rows[0]["median_solver_steps"],
            "steps_ratio_max_to_min": max(e["median_solver_steps"] for e in rows)
            / min(e["median_solver_steps"] for e in rows),
            "median_rel_error": [e["median_rel_error"] for e in rows],
            "max_rel_error": [e["max_rel_error"] for e in rows],
            "median_cost_rel_error": [e["median_cost_rel_error"] for e in rows],
        }
        for name, rows in by_solver.items()
    }
    taus = [e["log_inv_alpha"] for e in summary]
    slopes = {
        key: fit_slope(taus, [e[key] for e in summary])
        for key in ("median_rel_error", "max_rel_error", "median_cost_rel_error")
    }
    config = {
        "n": n,
        "d": n,
        "width": m,
        "seeds": seeds,
        "log10_inv_alpha": list(ps),
        "alpha": "10^-p / sqrt(m)",
        "rtol": rtol,
        "atol": rtol,
        "horizon": f"{HORIZON} x last predicted jump time",
        "time": "rescaled, d theta/dt = -log(1/alpha) grad L, L = 1/(2n) sum (h - y)^2",
        "jump_time": "first crossing of the midpoint between predicted plateaus",
        "solvers": list(solvers),
        "timed_seeds": timed,
        "wall_per_solve": "median over the timed seeds, each solved alone after compiling",
    }
    return {
        **header("alpha_limit", config, seed),
        "wall_seconds": timer(),
        **record,
        "summary": summary,
        "slopes": slopes,
        "solvers": comparison,
        "_outputs": dict(zip(ps, result.outputs[: len(ps)], strict=True)),
    }


def table(results: dict) -> str:
    head = (
        f"{'p':>6} {'log(1/a)':>9} {'median err':>11} {'max err':>9} {'cost err':>9}"
        f" {'steps':>7} {'wall s':>7}"
    )
    lines = [head, "-" * len(head)]
    # a run that only reloaded its chunks timed the loading, not the solves: said so
    sweep = results.get("sweep") or {}
    loaded = sweep.get("computed_chunks") == 0 and sweep.get("loaded_chunks", 0) > 0
    for e in results["summary"]:
        wall = "loaded" if loaded else f"{e['wall_seconds']:.1f}"
        lines.append(
            f"{e['log10_inv_alpha']:>6} {e['log_inv_alpha']:>9.1f} {e['median_rel_error']:>11.2e}"
            f" {e['max_rel_error']:>9.2e} {e['median_cost_rel_error']:>9.2e}"
            f" {e['median_solver_steps']:>7.0f} {wall:>7}"
        )
    if loaded:
        lines.append(
            f"wall s: this run reloaded all {sweep['loaded_chunks']} chunks of its sweep "
            "(computed none), so it timed no solve here; s/solve below times each solve alone"
        )
    s = results["slopes"]
    lines.append(
        f"fitted slopes vs log(1/alpha): median err {s['median_rel_error']:.2f}, max err "
        f"{s['max_rel_error']:.2f}, cost err {s['median_cost_rel_error']:.2f}"
    )
    lines.append("")
    head = f"{'solver':>8} {'p':>6} {'steps':>7} {'s/solve':>8} {'median err':>11} {'cost err':>9}"
    lines += [head, "-" * len(head)]
    ps = [e["log10_inv_alpha"] for e in results["summary"]]
    for name, c in results["solvers"].items():
        for i, p in enumerate(ps):
            wall = c["median_wall_seconds_per_solve"][i]
            lines.append(
                f"{name:>8} {p:>6} {c['median_solver_steps'][i]:>7.0f}"
                f" {'-' if wall is None else f'{wall:.3f}':>8} {c['median_rel_error'][i]:>11.2e}"
                f" {c['median_cost_rel_error'][i]:>9.2e}"
            )
        lines.append(
            f"{name:>8} median steps, largest over smallest p: {c['steps_ratio_max_to_min']:.2f}x"
        )
    lines.append(f"total wall time {results['wall_seconds']:.1f} s (compilation included)")
    return "\n".join(lines)


def plot_errors(results: dict, path) -> None:
    plt = pyplot()
    summary = results["summary"]
    taus = np.array([e["log_inv_alpha"] for e in summary])
    fig, ax = plt.subplots(figsize=(6, 4.2))
    labels = {
        "median_rel_error": "median jump-time error",
        "max_rel_error": "max jump-time error",
        "median_cost_rel_error": "median cost error",
    }
    for (key, label), marker in zip(labels.items(), "osD", strict=True):
        errs = np.array([e[key] for e in summary])
        slope = results["slopes"][key]
        (line,) = ax.loglog(taus, errs, marker, label=f"{label} (slope {slope:.2f})")
        keep = errs > 0
        c = np.polyfit(np.log(taus[keep]), np.log(errs[keep]), 1)
        ax.loglog(taus, np.exp(np.polyval(c, np.log(taus))), "-", color=line.get_color(), lw=0.8)
    ax.set_xlabel("log(1/alpha)")
    ax.set_ylabel("relative error against Algorithm 1")
    config = results["config"]
    ax.set_title(f"Vanishing-init flow, n = {config['n']}, m = {config['width']}")
    ax.legend(fontsize=8)
    save_figure(fig, path)


def plot_exponents(results: dict, path) -> None:
    plt = pyplot()
    p = max(results["_outputs"])
    o = results["_outputs"][p]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    t = np.linspace(0.0, 1.0, CURVE) * o["t1"][0]
    fired = np.unique(o["predicted_neurons"][0][o["predicted_neurons"][0] >= 0])
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, j in enumerate(fired):
        c = colors[i % len(colors)]
        ax.plot(t, o["exponents"][0][:, j], color=c, lw=3.0, alpha=0.6)
        ax.plot(t, o["predicted_exponents"][0][:, j], color="k", ls="--", lw=0.9)
    ax.set_xlabel("rescaled time t")
    ax.set_ylabel("exponent ell_j  (||w_j|| = alpha^-ell_j)")
    ax.set_title(f"seed 0, alpha = 1e-{p}/sqrt(m): flow (colour) vs Algorithm 1 (black dashed)")
    ax.set_ylim(-1.05, 0.05)
    save_figure(fig, path)


def plot_solvers(results: dict, path) -> None:
    """Median steps and wall seconds per solve against log(1/alpha), one line per solver."""
    plt = pyplot()
    taus = np.array([e["log_inv_alpha"] for e in results["summary"]])
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.0))
    for name, c in results["solvers"].items():
        left.loglog(taus, c["median_solver_steps"], "o-", label=name)
        walls = c["median_wall_seconds_per_solve"]
        if all(w is not None for w in walls):
            right.loglog(taus, walls, "o-", label=name)
    left.set_ylabel("median solver steps per solve")
    right.set_ylabel("median wall seconds per solve")
    for ax in (left, right):
        ax.set_xlabel("log(1/alpha)")
        ax.legend(fontsize=8)
    config = results["config"]
    fig.suptitle(
        f"Vanishing-init flow, n = {config['n']}, m = {config['width']}, rtol {config['rtol']:g}"
    )
    save_figure(fig, path)


def main(argv=None) -> dict:
    host_devices()
    p = parser("alpha_limit", __doc__.splitlines()[0], default_seeds=8)
    p.add_argument("--n", type=int, default=32, help="samples n = input dimension d")
    p.add_argument("--width", type=int, default=None, help="neurons m (default: width rule)")
    p.add_argument(
        "--log10-inv-alpha", type=float, nargs="+", default=[10, 30, 100, 300, 1000, 10000]
    )
    p.add_argument("--rtol", type=float, default=1e-9, help="solver rtol = atol")
    p.add_argument(
        "--solvers", nargs="+", choices=sorted(SOLVERS),
        default=["rodas5p", "dopri5", "dopri5-held"],
        help="solvers side by side; the summary is the first one's",
    )  # fmt: skip
    p.add_argument(
        "--timed-seeds", type=int, default=8, help="seeds timed one solve at a time (0: none)"
    )
    args = p.parse_args(argv)
    if args.timed_seeds < 0:
        p.error(f"--timed-seeds must be >= 0, got {args.timed_seeds}")
    if len(set(args.solvers)) != len(args.solvers):
        p.error(f"--solvers must not repeat a solver, got {args.solvers}")
    if args.quick:
        args.n, args.seeds, args.log10_inv_alpha = 8, 2, [10, 1000]
    for q in args.log10_inv_alpha:
        if not np.isfinite(q) or q <= 0:
            p.error(f"--log10-inv-alpha must be finite and > 0, got {q}")
    ps = tuple(int(q) if float(q).is_integer() else q for q in args.log10_inv_alpha)
    results = run_benchmark(
        args.n, args.width, args.seeds, args.seed, ps, args.rtol, out=args.out,
        solvers=tuple(args.solvers), timed_seeds=args.timed_seeds,
    )  # fmt: skip
    finish(
        args.out,
        results,
        table(results),
        {"errors.png": plot_errors, "exponents.png": plot_exponents, "solvers.png": plot_solvers},
    )
    return results


if __name__ == "__main__":
    main()
