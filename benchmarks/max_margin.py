"""Directional convergence of GD on leaky-ReLU nets to the max-margin direction.

Strong-signal case (default n = 20, d = 400, m = 10, gamma = 0.1, ||mu|| = 15, so that every
<y_i x_i, y_k x_k> >= 0): GD on the exponential loss for 10^6 steps and normalized GD (GD on
log L) for 10^5 steps from a tiny init (scale 1e-10, far below the step), against
`theory.max_margin` of the all-activated pattern. Near-orthogonal case (||mu|| = 1): the
pattern need not freeze; we report what the runs do and compare them with the max-margin
direction of the pattern GD ends in. Seeds run through `integrators.sweep`.
Writes `results.json` and `convergence.png` to `--out`.

    python -m benchmarks.max_margin [--seeds 8] [--gd-steps 1000000] [--normalized-steps 100000]
"""

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._common import Timer, enable_float64, host_devices, log, parser, pyplot, save_figure
from benchmarks._driver import finish, header, run_sweep
from dynamics import gaussian_mixture, small_leaky_init
from integrators import margin_gradient_descent
from theory import max_margin, one_minus_cos

INIT_SCALE = 1e-10


def make(key, signal, n, d, m, gamma, gd_steps, normalized_steps, lr_factor):
    kd, kw = jax.random.split(key)
    X, y, mu, _ = gaussian_mixture(n, d, signal=signal, key=kd)
    return X, y, small_leaky_init(m, d, gamma, scale=INIT_SCALE, key=kw)


def run(instance, signal, n, d, m, gamma, gd_steps, normalized_steps, lr_factor):
    X, y, net = instance
    yx = y[:, None] * X
    eta = lr_factor / jnp.max(jnp.sum(X * X, axis=1))  # below 2 / lambda_max of the Hessian
    mm = max_margin(X, y, net.a, gamma)
    out = {
        "positively_correlated": jnp.all(yx @ yx.T >= 0),
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
        changed = jnp.any(sol.patterns[1:] != sol.patterns[:-1], axis=(1, 2))
        last_change = jnp.max(jnp.where(changed, sol.steps[1:], 0))
        out |= {
            f"{name}_steps": sol.steps,
            f"{name}_one_minus_cos": one_minus_cos(sol.trajectory.W, mm.W),
            f"{name}_one_minus_cos_final_pattern": one_minus_cos(sol.trajectory.W, final.W),
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


def _curve(o, name):
    med = np.median(o[f"{name}_one_minus_cos"], axis=0)
    return [[int(s), float(v)] for s, v in zip(o[f"{name}_steps"][0], med, strict=True)]


def _at(o, name, step, key="one_minus_cos"):
    steps = o[f"{name}_steps"][0]
    i = int(np.searchsorted(steps, step))
    return float(np.median(o[f"{name}_{key}"][:, i])) if i < steps.size else None


def _case(o) -> dict:
    summary = {
        "positively_correlated": float(np.mean(o["positively_correlated"])),
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
    lr_factor=1.0,
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
    config = {
        **static,
        "seeds": seeds,
        "strong_signal": strong_signal,
        "near_orthogonal_signal": weak_signal,
        "eta": f"{lr_factor} / max_i ||x_i||^2",
        "init_scale": INIT_SCALE,
        "loss": "exponential, (1/n) sum exp(-y_i f(x_i))",
        "second_layer": "+1/sqrt(m) for half the neurons, -1/sqrt(m) for the rest",
    }
    return {
        **header("max_margin", config, seed),
        "wall_seconds": timer(),
        **record,
        "curves": {"gd": _curve(strong, "gd"), "normalized": _curve(strong, "normalized")},
        "activated_after_first_step": float(np.mean(strong["gd_activated_first"])),
        "strong": _case(strong),
        "near_orthogonal": {
            **_case(weak),
            "curves_vs_final_pattern": {
                name: [
                    [int(s), float(v)]
                    for s, v in zip(
                        weak[f"{name}_steps"][0],
                        np.median(weak[f"{name}_one_minus_cos_final_pattern"], axis=0),
                        strict=True,
                    )
                ]
                for name in ("gd", "normalized")
            },
        },
    }


def table(results: dict) -> str:
    lines = []
    for case in ("strong", "near_orthogonal"):
        c = results[case]
        lines.append(
            f"{case}: positively correlated {c['positively_correlated']:.2f}, max_margin gap "
            f"<= {c['max_margin_relative_gap_max']:.1e}, its pattern kept "
            f"{c['max_margin_pattern_consistent']:.2f}"
        )
        for name in ("gd", "normalized"):
            g = c[name]
            at = ", ".join(
                f"{k}: {v:.2e}" for k, v in g["one_minus_cos_at"].items() if v is not None
            )
            lines.append(
                f"  {name:>10}: activated after step 1 {g['activated_after_first_step']:.2f},"
                f" at end {g['activated_at_end']:.2f}; 1 - cos {at}; vs own final pattern "
                f"{g['one_minus_cos_final_pattern_at_end']:.2e}"
            )
    lines.append(f"total wall time {results['wall_seconds']:.1f} s (compilation included)")
    return "\n".join(lines)


def plot(results: dict, path) -> None:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for name, marker in (("gd", "o-"), ("normalized", "s-")):
        curve = np.array(results["curves"][name])
        keep = curve[:, 1] > 0
        ax.loglog(curve[keep, 0], curve[keep, 1], marker, ms=3, label=f"{name} GD")
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
        f"||mu|| = {cfg['strong_signal']}"
    )
    ax.legend(fontsize=8)
    save_figure(fig, path)


def main(argv=None) -> dict:
    host_devices()
    p = parser("max_margin", __doc__.splitlines()[0], default_seeds=8)
    p.add_argument("--gd-steps", type=int, default=1_000_000)
    p.add_argument("--normalized-steps", type=int, default=100_000)
    p.add_argument("--signal", type=float, default=15.0, help="||mu|| of the strong case")
    p.add_argument("--lr-factor", type=float, default=1.0, help="eta = factor / max ||x_i||^2")
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.gd_steps, args.normalized_steps = 2, 10_000, 10_000
    results = run_benchmark(
        args.seeds,
        args.seed,
        strong_signal=args.signal,
        gd_steps=args.gd_steps,
        normalized_steps=args.normalized_steps,
        lr_factor=args.lr_factor,
        out=args.out,
    )
    finish(args.out, results, table(results), {"convergence.png": plot})
    return results


if __name__ == "__main__":
    main()
