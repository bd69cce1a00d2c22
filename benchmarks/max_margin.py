"""Directional convergence of GD on leaky-ReLU nets to the max-margin direction.

Strong-signal case (default n = 20, d = 400, m = 10, gamma = 0.1, ||mu|| = 15, so that every
<y_i x_i, y_k x_k> >= 0): GD on the exponential loss for 10^6 steps and normalized GD (GD on
log L) for 10^5 steps from a tiny init (scale 1e-10, far below the step), against
`theory.max_margin` of the all-activated pattern. Weak-signal case (||mu|| = 1): neither of
Theorem 4.8's conditions holds there (`theory.margin_conditions`), the pattern need not
freeze; we report what the runs do, compare them with the max-margin direction of the pattern
GD ends in, and track the KKT residual of margin maximization (`theory.kkt_residual`) over
the checkpoints of both cases. The step is eta = 1.9 / max_i ||x_i||^2: with sum_j a_j^2 = 1,
max_i ||x_i||^2 bounds the smoothness of log L (its Hessian is a covariance of the margins'
gradients) and of L where L <= 1, so eta < 2 / L_smooth.

The regime map (`--map-steps`, `benchmarks/_regime_map.py`): over n in {5, 10, 20}, d from
400 to 200000 and ||mu|| from 1 to 100, both conditions, activation after step 1, pattern
freezing, 1 - cos of normalized GD, the KKT residual and the test error.
Seeds run through `integrators.sweep`. Writes `results.json`, `convergence.png` and
`regime_map.png` to `--out`.

    python -m benchmarks.max_margin [--seeds 8] [--gd-steps 1000000] [--normalized-steps 100000]
                                    [--map-steps 100000] [--map-seeds 8]
"""

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import _regime_map
from benchmarks._common import Timer, enable_float64, host_devices, log, parser, pyplot, save_figure
from benchmarks._driver import finish, header, run_sweep
from dynamics import gaussian_mixture, small_leaky_init
from integrators import margin_gradient_descent
from theory import kkt_residual, margin_conditions, max_margin, one_minus_cos

INIT_SCALE = 1e-10
LABELS = {"gd": "GD", "normalized": "normalized GD"}


def make(key, signal, n, d, m, gamma, gd_steps, normalized_steps, lr_factor):
    kd, kw = jax.random.split(key)
    X, y, mu, _ = gaussian_mixture(n, d, signal=signal, key=kd)
    return X, y, small_leaky_init(m, d, gamma, scale=INIT_SCALE, key=kw)


def run(instance, signal, n, d, m, gamma, gd_steps, normalized_steps, lr_factor):
    X, y, net = instance
    eta = lr_factor / jnp.max(jnp.sum(X * X, axis=1))  # below 2 / lambda_max of the Hessian
    mm = max_margin(X, y, net.a, gamma)
    cond = margin_conditions(X, y, gamma)
    out = {
        "positively_correlated": cond.positively_correlated,
        "near_orthogonal": cond.near_orthogonal,
        "mm_relative_gap": mm.relative_gap,
        "mm_converged": mm.ok,
        "mm_pattern_consistent": mm.pattern_consistent,
        "eta": eta,
    }
    for name, steps, normalized in (
        ("gd", gd_steps, False),
        ("normalized", normalized_steps, True),
    ):
        sol = margin_gradient_descent(
            X,
            y,
            net,
            learning_rate=eta,
            max_steps=steps,
            num_checkpoints=10 * round(np.log10(steps)) + 1,  # every decade is a checkpoint
            normalized=normalized,
        )
        final = max_margin(X, y, net.a, gamma, pattern=sol.patterns[-1])
        kkt = jax.vmap(lambda W: kkt_residual(W, net.a, X, y, gamma).residual)(sol.trajectory.W)
        changed = jnp.any(sol.patterns[1:] != sol.patterns[:-1], axis=(1, 2))
        last_change = jnp.max(jnp.where(changed, sol.steps[1:], 0))
        out |= {
            f"{name}_steps": sol.steps,
            f"{name}_one_minus_cos": one_minus_cos(sol.trajectory.W, mm.W),
            f"{name}_one_minus_cos_final_pattern": one_minus_cos(sol.trajectory.W, final.W),
            f"{name}_kkt": kkt,
            f"{name}_ok": sol.ok,
            f"{name}_activated_first": sol.activated[0],
            f"{name}_activated_final": sol.activated[-1],
            f"{name}_last_pattern_change": last_change,
            f"{name}_final_pattern_feasible": final.feasible,
            f"{name}_final_pattern_consistent": final.pattern_consistent,
            f"{name}_min_margin": sol.min_margin[-1],
            f"{name}_final_log_loss": sol.log_loss[-1],
        }
    out["mm_normalized_margin"] = 1.0 / mm.norm
    return out


def _curve(o, name, key="one_minus_cos"):
    """[step, median over seeds] of the output `{name}_{key}` at every checkpoint."""
    med = np.median(o[f"{name}_{key}"], axis=0)
    return [[int(s), float(v)] for s, v in zip(o[f"{name}_steps"][0], med, strict=True)]


def _at(o, name, step, key="one_minus_cos"):
    steps = o[f"{name}_steps"][0]
    i = int(np.searchsorted(steps, step))
    return float(np.median(o[f"{name}_{key}"][:, i])) if i < steps.size else None


def _case(o) -> dict:
    summary = {
        "positively_correlated": float(np.mean(o["positively_correlated"])),
        "near_orthogonal": float(np.mean(o["near_orthogonal"])),
        "max_margin_relative_gap_max": float(np.max(o["mm_relative_gap"])),
        "max_margin_converged": int(np.sum(o["mm_converged"])),
        "max_margin_pattern_consistent": float(np.mean(o["mm_pattern_consistent"])),
        "eta_median": float(np.median(o["eta"])),
    }
    for name in ("gd", "normalized"):
        summary[name] = {
            "activated_after_first_step": float(np.mean(o[f"{name}_activated_first"])),
            "activated_at_end": float(np.mean(o[f"{name}_activated_final"])),
            "last_pattern_change_median": float(np.median(o[f"{name}_last_pattern_change"])),
            "one_minus_cos_at": {
                f"1e{k}": _at(o, name, 10**k)
                for k in range(2, 7)
                if 10**k <= o[f"{name}_steps"][0][-1]
            },
            "kkt_residual_at": {
                f"1e{k}": _at(o, name, 10**k, "kkt")
                for k in range(0, 7)
                if 10**k <= o[f"{name}_steps"][0][-1]
            },
            "kkt_residual_curve": _curve(o, name, "kkt"),
            "one_minus_cos_final_pattern_at_end": float(
                np.median(o[f"{name}_one_minus_cos_final_pattern"][:, -1])
            ),
            "final_pattern_consistent": float(np.mean(o[f"{name}_final_pattern_consistent"])),
            "min_normalized_margin_median": float(np.median(o[f"{name}_min_margin"])),
        }
    summary["max_margin_normalized_margin_median"] = float(np.median(o["mm_normalized_margin"]))
    return summary


def run_benchmark(
    seeds=8,
    seed=0,
    n=20,
    d=400,
    m=10,
    gamma=0.1,
    strong_signal=15.0,
    weak_signal=1.0,
    gd_steps=1_000_000,
    normalized_steps=100_000,
    lr_factor=1.9,
    map_steps=100_000,
    map_seeds=8,
    map_grid=(_regime_map.NS, _regime_map.DS, _regime_map.SIGNALS),
    out=None,
):
    enable_float64()
    timer = Timer()
    log(f"max_margin: n = {n}, d = {d}, m = {m}, gamma = {gamma}, {seeds} seeds")
    static = dict(n=n, d=d, m=m, gamma=gamma, gd_steps=gd_steps, normalized_steps=normalized_steps)
    grid = [dict(signal=s, lr_factor=lr_factor, **static) for s in (strong_signal, weak_signal)]
    result, record = run_sweep(
        run,
        make=make,
        seeds=seeds,
        grid=grid,
        static=tuple(static),
        out=out,
        name="max_margin",
        config={"init_scale": INIT_SCALE},
        base_seed=seed,
        ok=("gd_ok", "normalized_ok"),
    )
    strong, weak = result.outputs
    regime_map, map_record = [], {}
    if map_steps:
        log(f"regime map: n in {map_grid[0]}, d in {map_grid[1]}, ||mu|| in {map_grid[2]}")
        map_static = dict(m=m, gamma=gamma, steps=map_steps, init_scale=INIT_SCALE)
        points = _regime_map.grid(*map_grid, lr_factor=lr_factor, **map_static)
        mapped, map_record = run_sweep(
            _regime_map.run,
            make=_regime_map.make,
            seeds=map_seeds,
            grid=points,
            static=("n", "d", *map_static),
            out=None if out is None else out / "regime_map",
            name="max_margin_regime_map",
            base_seed=seed,
            ok=("solve_ok",),
        )
        regime_map = _regime_map.entries(points, mapped.outputs)
        map_record = {**map_record, "cases": _regime_map.case_summary(mapped.outputs)}
    config = {
        **static,
        "seeds": seeds,
        "strong_signal": strong_signal,
        "weak_signal": weak_signal,
        "eta": f"{lr_factor} / max_i ||x_i||^2",
        "init_scale": INIT_SCALE,
        "loss": "exponential, (1/n) sum exp(-y_i f(x_i))",
        "second_layer": "+1/sqrt(m) for half the neurons, -1/sqrt(m) for the rest",
        "near_orthogonal_condition": "||x_i||^2 >= n max_k |<x_i, x_k>| / gamma",
        "regime_map": {
            "n": list(map_grid[0]),
            "d": list(map_grid[1]),
            "signal": list(map_grid[2]),
            "steps": map_steps,
            "seeds": map_seeds,
            "training": "normalized GD",
            "test_error": f"dynamics.projected_test_error, {_regime_map.TEST_SAMPLES} samples",
        },
    }
    return {
        **header("max_margin", config, seed),
        "wall_seconds": timer(),
        **record,
        "curves": {"gd": _curve(strong, "gd"), "normalized": _curve(strong, "normalized")},
        "activated_after_first_step": float(np.mean(strong["gd_activated_first"])),
        "strong": _case(strong),
        "weak": {
            **_case(weak),
            "curves_vs_final_pattern": {
                name: _curve(weak, name, "one_minus_cos_final_pattern")
                for name in ("gd", "normalized")
            },
        },
        "regime_map": regime_map,
        "regime_map_sweep": map_record,
    }


def table(results: dict) -> str:
    lines = []
    for case in ("strong", "weak"):
        c = results[case]
        lines.append(
            f"{case}: positively correlated {c['positively_correlated']:.2f}, near-orthogonal "
            f"{c['near_orthogonal']:.2f}, max_margin gap <= {c['max_margin_relative_gap_max']:.1e},"
            f" its pattern kept {c['max_margin_pattern_consistent']:.2f}"
        )
        for name in ("gd", "normalized"):
            g = c[name]
            at = ", ".join(
                f"{k}: {v:.2e}" for k, v in g["one_minus_cos_at"].items() if v is not None
            )
            kkt = ", ".join(f"{k}: {v:.1e}" for k, v in g["kkt_residual_at"].items() if k != "1e0")
            lines.append(
                f"  {name:>10}: activated after step 1 {g['activated_after_first_step']:.2f},"
                f" at end {g['activated_at_end']:.2f}; 1 - cos {at}; vs own final pattern "
                f"{g['one_minus_cos_final_pattern_at_end']:.2e}"
            )
            lines.append(f"  {'':>10}  KKT residual {kkt}")
    if results["regime_map"]:
        lines.append(
            f"regime map (normalized GD, {results['config']['regime_map']['steps']} steps):"
        )
        lines.append(_regime_map.table(results["regime_map"]))
        for case, c in results["regime_map_sweep"]["cases"].items():
            if case == "neither":
                med = c["one_minus_cos_median"]
                lines.append(
                    f"  neither condition: {c['instances']} instances, median 1 - cos "
                    + ("-" if med is None else f"{med:.1e}")
                )
            elif c["instances"]:
                lines.append(
                    f"  {case}: {c['instances']} instances, activated after step 1"
                    f" {c['activated_after_first_step_fraction']:.2f}, 1 - cos median"
                    f" {c['one_minus_cos_median']:.1e}, max {c['one_minus_cos_max']:.1e},"
                    f" below 1e-8: {c['below_1e-8_fraction']:.2f}"
                )
    lines.append(f"total wall time {results['wall_seconds']:.1f} s (compilation included)")
    return "\n".join(lines)


def plot(results: dict, path) -> None:
    plt = pyplot()

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11.0, 4.4))
    for name, marker in (("gd", "o-"), ("normalized", "s-")):
        curve = np.array(results["curves"][name])
        keep = curve[:, 1] > 0
        ax.loglog(curve[keep, 0], curve[keep, 1], marker, ms=3, label=LABELS[name])
    gd = np.array(results["curves"]["gd"])
    t = gd[:, 0][gd[:, 0] >= 10]
    anchor = gd[gd[:, 0] >= 10][0]
    ax.loglog(t, anchor[1] * np.log(anchor[0]) / np.log(t), "k--", lw=0.8, label="~ 1/log t")
    nm = np.array(results["curves"]["normalized"])
    tn = nm[:, 0][nm[:, 0] >= 100]
    a2 = nm[nm[:, 0] >= 100][0]
    ax.loglog(tn, a2[1] * (a2[0] / tn) ** 2, "k:", lw=0.8, label="~ 1/t^2")
    ax.set_xlabel("GD step t")
    ax.set_ylabel("median 1 - cos(W_t, W*)")
    cfg = results["config"]
    ax.set_title(
        f"n = {cfg['n']}, d = {cfg['d']}, m = {cfg['m']}, gamma = {cfg['gamma']}, "
        f"||mu|| = {cfg['strong_signal']}",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    for case, ls in (("strong", "-"), ("weak", "--")):
        for name, marker in (("gd", "o"), ("normalized", "s")):
            curve = np.array(results[case][name]["kkt_residual_curve"])
            keep = np.isfinite(curve[:, 1]) & (curve[:, 1] > 0)
            bx.loglog(
                curve[keep, 0], curve[keep, 1], marker + ls, ms=3, label=f"{case}, {LABELS[name]}"
            )
    bx.set_xlabel("GD step t")
    bx.set_ylabel("median KKT residual of margin maximization")
    bx.set_title(
        f"theory.kkt_residual, W's own pattern (weak: ||mu|| = {cfg['weak_signal']})", fontsize=9
    )
    bx.legend(fontsize=8)
    save_figure(fig, path)


def main(argv=None) -> dict:
    host_devices()
    p = parser("max_margin", __doc__.splitlines()[0], default_seeds=8)
    p.add_argument("--gd-steps", type=int, default=1_000_000)
    p.add_argument("--normalized-steps", type=int, default=100_000)
    p.add_argument("--signal", type=float, default=15.0, help="||mu|| of the strong case")
    p.add_argument("--lr-factor", type=float, default=1.9, help="eta = factor / max ||x_i||^2")
    p.add_argument(
        "--map-steps",
        type=int,
        default=100_000,
        help="normalized GD steps of the regime map (0: none)",
    )
    p.add_argument("--map-seeds", type=int, default=8, help="seeds per regime-map point")
    args = p.parse_args(argv)
    map_grid = (_regime_map.NS, _regime_map.DS, _regime_map.SIGNALS)
    if args.quick:
        args.seeds, args.gd_steps, args.normalized_steps = 2, 10_000, 10_000
        args.map_steps, args.map_seeds, map_grid = 10_000, 2, ((5,), (400, 20000), (1.0, 30.0))
    if not args.lr_factor < 2:
        p.error(f"--lr-factor must be below 2 (the step's stability bound), got {args.lr_factor}")
    results = run_benchmark(
        args.seeds,
        args.seed,
        strong_signal=args.signal,
        gd_steps=args.gd_steps,
        normalized_steps=args.normalized_steps,
        lr_factor=args.lr_factor,
        map_steps=args.map_steps,
        map_seeds=args.map_seeds,
        map_grid=map_grid,
        out=args.out,
    )
    figures = {"convergence.png": plot}
    if results["regime_map"]:
        figures["regime_map.png"] = _regime_map.plot
    finish(args.out, results, table(results), figures)
    return results


if __name__ == "__main__":
    main()
