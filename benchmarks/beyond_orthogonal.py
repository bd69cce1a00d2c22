"""Saddle-to-saddle beyond orthogonal inputs: how the jumps deform as the inputs correlate.

Two families of n inputs, with Gaussian labels and a balanced init of width m at alpha:

- correlated: x_i = sqrt(1 - c) q_i + sqrt(c) q_0 with q_0, ..., q_n orthonormal in R^(n+1),
  so that ||x_i|| = 1 and <x_i, x_k> = c for i != k (c = 0 is exactly the orthonormal case);
- gaussian: rows N(0, I_d / d) with d = (d/n) n.

Each seed is integrated by `integrators.two_layer_flow` (the Gram coupling, a per-neuron log
scale, kinks by events with Filippov sliding) in the rescaled time tau = log(1/alpha). Its loss
curve is read by `theory.loss_plateaus`; the jumps and the final 1/2 ||theta||^2 are compared
with Algorithm 1 on the Loewdin-orthonormalized problem (X X^T)^(-1/2) X (the orthonormal
inputs nearest to X, with the same labels and init directions); the Morse index of every
plateau is the number of negative eigenvalues of the loss Hessian at the flow's point in the
middle of the plateau (in the data basis (a, z): the directions orthogonal to the data carry
zero curvature, so the inertia is that of the full Hessian).

A second section times the generic flows on the cases of the issue (correlated two-layer net,
ReLU MLP with biases at small init, three-layer MLP): `two_layer_flow`, `orthogonal_flow` (on
orthonormal inputs), `gradient_flow` with a per-neuron log scale (`units=`) and plain diffrax
(`gradient_flow` without it): steps, wall time, outcome and loss error.

Writes `results.json` (`rows`, one per setting; `solvers`), `losses.png` (loss curves per c),
`deviation.png` (first-jump ratio and cost ratio against c at both alphas) to `--out`.

    python -m benchmarks.beyond_orthogonal [--seeds 8] [--n 16] [--cs 0 1e-6 ...]
        [--d-over-n 1 2 ...] [--no-solvers]
"""

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._beyond import HORIZON, make
from benchmarks._beyond_by_n import seconds_per_solve
from benchmarks._beyond_plots import plot_deviation, plot_losses
from benchmarks._beyond_solvers import solvers
from benchmarks._common import Timer, enable_float64, host_devices, log, parser
from benchmarks._driver import finish, header, run_sweep
from dynamics import (
    TwoLayerReLU,
    half_squared_norm,
    loewdin,
    signs_and_directions,
    square_loss,
)
from integrators import (
    hessian_spectrum,
    two_layer_flow,
)
from theory import coverage_width, crossing_times, loss_plateaus, saddle_jumps

CS = (0.0, 1e-6, 1e-3, 0.01, 0.1, 0.3)
D_OVER_N = (1, 2, 4, 16)
LOG10_INV_ALPHA = (10, 30)
GRID = 600  # save times per solve
MAX_PLATEAUS = 12  # Morse indices kept per seed
# the Morse indices come from a dense Hessian of m (n + 1) parameters: 3,055 at n = 64 (a
# second each), 13,364 at n = 256 (1.4 GB and minutes per eigendecomposition, a dozen per
# setting: the n = 256 run grew past 11 GB in them); beyond this many they are not computed
MORSE_MAX_PARAMS = 4096


def run(instance, family, n, d, c, log10_inv_alpha, width):
    X, y, model = instance
    tau = log10_inv_alpha * jnp.log(10.0)
    signs, directions = signs_and_directions(model, loewdin(X))
    pred = saddle_jumps(y, signs, directions, time_scale=tau)
    ts = jnp.linspace(0.0, pred.horizon(HORIZON), GRID)
    sol = two_layer_flow(
        X, y, model, ts, time_scale=tau, save_trajectory=True,
    )  # fmt: skip
    traj = sol.trajectory
    return {
        "loss": sol.loss,
        "ts": ts,
        "a": traj.a,
        "Z": traj.W @ X.T,  # the data-basis pre-activations z_ji = <w_j, x_i>
        "solve_ok": sol.ok,
        "steps": sol.stats["num_steps"],
        "kink_events": sol.stats["num_kink_events"],
        "sliding_entries": sol.stats["num_sliding_entries"],
        "sliding_final": jnp.sum(sol.pattern == 2),
        "measured_cost": half_squared_norm(sol.model),
        "predicted_cost": pred.cost,
        "predicted_times": pred.times,
        "predicted_first_finite_alpha": pred.times_finite_alpha[0],
        # the first crossing of the midpoint between Algorithm 1's first two plateaus
        "first_crossing": crossing_times(ts, sol.loss, pred)[0],
        "predicted_jumps": pred.num_jumps,
        "prediction_ok": pred.ok,
        "y": y,
    }


@jax.jit
def _morse_index(a, Z, y):
    """The Morse index of L(a, Z) = 1/(2n) |a relu(Z) - y|^2 at (a, Z) (`hessian_spectrum`)."""
    n = y.shape[0]
    loss = lambda m, y: square_loss(m, (jnp.eye(n), y))  # noqa: E731
    return hessian_spectrum(TwoLayerReLU(a, Z), loss, args=y).morse_index


def measure(o) -> dict:
    """NumPy read-out of one setting's seeds: plateaus, first jump, cost, Morse indices."""
    seeds = len(o["loss"])
    found, first_ratio, first_fin, first_found, morse, levels = [], [], [], [], [], []
    for s in range(seeds):
        loss, ts = np.asarray(o["loss"][s]), np.asarray(o["ts"][s])
        if not bool(o["solve_ok"][s]) or not np.all(np.isfinite(loss)) or np.any(loss <= 0):
            continue
        p = loss_plateaus(ts, loss)
        found.append(len(p["levels"]))
        levels.append(p["levels"].tolist())
        first_ratio.append(float(o["first_crossing"][s] / o["predicted_times"][s][0]))
        first_fin.append(float(o["first_crossing"][s] / o["predicted_first_finite_alpha"][s]))
        if len(p["times"]):
            first_found.append(p["times"][0] / float(o["predicted_times"][s][0]))
        # the middle of each plateau: halfway between the jumps around it
        edges = np.r_[0.0, p["times"], ts[-1]]
        mids = 0.5 * (edges[:-1] + edges[1:])[:MAX_PLATEAUS]
        idx = np.clip(np.searchsorted(ts, mids), 0, ts.size - 1)
        # the table shows every plateau's index of the first kept seed and the first plateau's of
        # the others (a dense Hessian of m (n + 1) parameters each: 3,055 at n = 64)
        idx = idx if not morse else idx[:1]
        if o["a"][s].shape[1] * (o["Z"][s].shape[2] + 1) > MORSE_MAX_PARAMS:
            continue
        morse.append([int(_morse_index(o["a"][s][i], o["Z"][s][i], o["y"][s])) for i in idx])
    return dict(
        found=found, first_ratio=first_ratio, first_fin=first_fin, first_found=first_found,
        morse=morse, levels=levels,
    )  # fmt: skip


def row(point, o, wall) -> dict:
    m = measure(o)
    cost_ratio = np.asarray(o["measured_cost"]) / np.asarray(o["predicted_cost"])
    ok = np.asarray(o["solve_ok"], bool)
    med = lambda x: float(np.median(x)) if len(x) else float("nan")  # noqa: E731
    first_morse = [x[0] for x in m["morse"] if x]
    return {
        "inputs": point["family"],
        "c": point["c"] if point["family"] == "correlated" else None,
        "d_over_n": point["d"] / point["n"],
        "n": point["n"],
        "d": point["d"],
        "width": point["width"],
        "alpha": 10.0 ** -point["log10_inv_alpha"],
        "seeds": int(ok.size),
        "solve_ok_fraction": float(ok.mean()),
        "plateaus_mean": float(np.mean(m["found"])) if m["found"] else float("nan"),
        "plateaus_predicted_mean": float(np.mean(np.asarray(o["predicted_jumps"]) + 1)),
        "first_jump_ratio_median": med(m["first_ratio"]),
        "first_jump_ratio_finite_alpha_median": med(m["first_fin"]),
        "first_found_jump_ratio_median": med(m["first_found"]),
        "cost_ratio_median": med(cost_ratio[ok]),
        "morse_index_first_plateau": med(first_morse),
        "morse_indices_seed0": m["morse"][0] if m["morse"] else [],
        "plateau_levels_seed0": m["levels"][0] if m["levels"] else [],
        "median_solver_steps": float(np.median(o["steps"])),
        "median_kink_events": float(np.median(o["kink_events"])),
        "median_sliding_entries": float(np.median(o["sliding_entries"])),
        "median_sliding_at_end": float(np.median(o["sliding_final"])),
        "wall_seconds": wall,
    }


def grid(n, width, cs, d_over_n, ps):
    points = [
        dict(family="correlated", n=n, d=n + 1, c=c, log10_inv_alpha=p, width=width)
        for p in ps
        for c in cs
    ]
    points += [
        dict(family="gaussian", n=n, d=int(r * n), c=0.0, log10_inv_alpha=p, width=width)
        for p in ps
        for r in d_over_n
    ]
    return points


def run_benchmark(
    n=16, width=None, seeds=8, seed=0, cs=CS, d_over_n=D_OVER_N, ps=LOG10_INV_ALPHA,
    max_steps=50_000, with_solvers=True, out=None,
):  # fmt: skip
    enable_float64()
    timer = Timer()
    m = coverage_width(n) if width is None else width
    points = grid(n, m, cs, d_over_n, ps)
    log(f"beyond_orthogonal: n = {n}, m = {m}, {seeds} seeds, {len(points)} settings")
    result, record = run_sweep(
        run,
        make=make,
        seeds=seeds,
        grid=points,
        static=("family", "n", "d", "width"),
        out=out,
        name="beyond_orthogonal",
        config={"horizon": HORIZON, "grid": GRID},
        base_seed=seed,
        ok=("solve_ok",),
        # one seed per device at a time (what the cache rule picks here anyway): vmapped, a
        # batch runs as many kink events as its slowest member
        batch_size=1,
        # one seed per device per chunk: each is on disk as soon as it is solved (minutes per
        # solve at n = 256), so a killed run resumes from there
        chunk_size=jax.device_count(),
    )
    rows = []
    for point, o, wall in zip(points, result.outputs, result.point_seconds, strict=True):
        rows.append(row(point, o, wall))
    config = {
        "n": n,
        "width": m,
        "seeds": seeds,
        "c": list(cs),
        "d_over_n": list(d_over_n),
        "log10_inv_alpha": list(ps),
        "alpha": "10^-p (balanced: |a_j| = ||w_j|| = alpha)",
        "labels": "N(0, 1)",
        "flow": "integrators.two_layer_flow, rtol = atol = 1e-8",
        "time": "rescaled, d theta/dt = -log(1/alpha) grad L",
        "reference": "Algorithm 1 on the Loewdin-orthonormalized inputs (X X^T)^(-1/2) X",
        "jump_time": "theory.loss_plateaus: first crossing of the midpoint between plateaus",
    }
    out_rows = {
        **header("beyond_orthogonal", config, seed),
        **record,
        "rows": rows,
        "_outputs": result.outputs,
        "_points": points,
    }
    if with_solvers:
        log("solvers: steps and wall time, compilation excluded")
        out_rows["solvers"] = solvers(n, m, ps, max_steps)
    out_rows["wall_seconds"] = timer()
    return out_rows


def _count(x: float, digits: int = 0) -> str:
    return "-" if x is None or np.isnan(x) else f"{x:.{digits}f}"


def table(results: dict) -> str:
    head = (
        f"{'inputs':>10} {'c':>7} {'d/n':>4} {'alpha':>6} {'ok':>5} {'plat':>5} {'pred':>5}"
        f" {'1st jump':>9} {'fin.':>7} {'cost':>7} {'morse1':>6} {'kinks':>6} {'slide':>6}"
        f" {'steps':>6} {'s/solve':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in results["rows"]:
        c = "" if r["c"] is None else f"{r['c']:.0e}" if r["c"] else "0"
        lines.append(
            f"{r['inputs']:>10} {c:>7} {r['d_over_n']:>4.0f} {r['alpha']:>6.0e}"
            f" {r['solve_ok_fraction']:>5.2f} {r['plateaus_mean']:>5.1f}"
            f" {r['plateaus_predicted_mean']:>5.1f} {r['first_jump_ratio_median']:>9.4f}"
            f" {r['first_jump_ratio_finite_alpha_median']:>7.4f} {r['cost_ratio_median']:>7.4f}"
            f" {_count(r['morse_index_first_plateau']):>6} {r['median_kink_events']:>6.0f}"
            f" {r['median_sliding_entries']:>6.0f} {r['median_solver_steps']:>6.0f}"
            f" {_count(seconds_per_solve(r), 1):>7}"
        )
    lines.append(
        "1st jump: measured / Algorithm 1 (Loewdin problem), limit and finite alpha; cost: final"
        " 1/2||theta||^2 / Algorithm 1's; morse1: Morse index of the first plateau (-: not"
        f" computed, over {MORSE_MAX_PARAMS} parameters); s/solve: the setting's wall time over"
        f" its seeds (solved {results.get('sweep', {}).get('devices', 2)} at a time, compilation"
        " included; -: not recorded, a run resumed from chunks written before they recorded"
        " their time)"
    )
    if results.get("solvers"):
        lines.append("")
        head = (
            f"{'case':>22} {'p':>3} {'flow':>20} {'ok':>5} {'steps':>7} {'wall s':>7}"
            f" {'loss err':>9}"
        )
        lines += [head, "-" * len(head)]
        for s in results["solvers"]:
            err = "" if s["max_loss_error"] is None else f"{s['max_loss_error']:.1e}"
            lines.append(
                f"{s['case']:>22} {s['log10_inv_alpha']:>3} {s['flow']:>20} {s['ok']!s:>5}"
                f" {s['steps']:>7} {s['wall_seconds']:>7.2f} {err:>9}"
            )
    sweep = results.get("sweep", {})
    loaded = sweep.get("loaded_chunks", 0)
    resumed = (
        f"; {loaded} of {loaded + sweep['computed_chunks']} chunks loaded from an earlier run"
        if loaded
        else ""
    )
    lines.append(f"total wall time {results['wall_seconds']:.1f} s (compilation included{resumed})")
    return "\n".join(lines)


def main(argv=None) -> dict:
    host_devices()
    p = parser("beyond_orthogonal", __doc__.splitlines()[0], default_seeds=8)
    p.add_argument("--n", type=int, default=16, help="samples n")
    p.add_argument("--width", type=int, default=None, help="neurons m (default: width rule)")
    p.add_argument("--no-solvers", action="store_true", help="skip the solver comparison")
    p.add_argument(
        "--cs", type=float, nargs="*", default=CS,
        help="correlations c (none: Gaussian inputs only)",
    )  # fmt: skip
    p.add_argument(
        "--d-over-n", type=float, nargs="*", default=D_OVER_N,
        help="Gaussian inputs' d / n (none: correlated inputs only)",
    )  # fmt: skip
    args = p.parse_args(argv)
    if args.n < 2 or args.seeds < 1:
        p.error(f"--n must be >= 2 and --seeds >= 1, got {args.n} and {args.seeds}")
    if not args.cs and not args.d_over_n:
        p.error("--cs and --d-over-n are both empty: no setting to solve")
    if not all(0.0 <= c < 1.0 for c in args.cs) or not all(r > 0 for r in args.d_over_n):
        p.error(f"--cs must be in [0, 1) and --d-over-n > 0, got {args.cs}, {args.d_over_n}")
    kw = dict(cs=tuple(args.cs), d_over_n=tuple(args.d_over_n))
    if args.quick:
        args.n, args.seeds = 6, 2
        kw = dict(cs=(0.0, 0.1), d_over_n=(2,), ps=(10,), max_steps=5_000)
    results = run_benchmark(
        args.n, args.width, args.seeds, args.seed, with_solvers=not args.no_solvers,
        out=args.out, **kw,
    )  # fmt: skip
    finish(
        args.out,
        results,
        table(results),
        {"losses.png": plot_losses, "deviation.png": plot_deviation},
    )
    return results


if __name__ == "__main__":
    main()
