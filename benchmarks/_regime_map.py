"""The regime map of `benchmarks.max_margin`: Theorem 4.8's two cases over (n, d, ||mu||).

At every grid point and seed: both conditions of `theory.margin_conditions` on the training
set; normalized GD from a tiny init for `steps` steps; whether every neuron is activated after
step 1; whether the activation pattern is frozen over the last decade of steps; 1 - cos to the
all-activated max-margin direction (program (5)); the KKT residual of the final W for its own
pattern (`theory.kkt_residual`, the certificate where program (5) does not apply); and the
test error (`dynamics.projected_test_error`, exact Monte Carlo at any d).
"""

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._common import frozen_over_last_decade, pyplot, save_figure, two_per_decade
from dynamics import gaussian_mixture, projected_test_error, small_leaky_init
from integrators import margin_gradient_descent
from theory import kkt_residual, margin_conditions, max_margin, one_minus_cos

NS = (5, 10, 20)
DS = (400, 4000, 40000, 200000)
SIGNALS = (1.0, 3.0, 10.0, 30.0, 100.0)
TEST_SAMPLES = 20000


def make(key, signal, n, d, m, gamma, steps, lr_factor, init_scale):
    kd, kw, kt = jax.random.split(key, 3)
    X, y, _, _ = gaussian_mixture(n, d, signal=signal, key=kd)
    return X, y, small_leaky_init(m, d, gamma, scale=init_scale, key=kw), kt


def run(instance, signal, n, d, m, gamma, steps, lr_factor, init_scale):
    X, y, net, key = instance
    cond = margin_conditions(X, y, gamma)
    eta = lr_factor / jnp.max(jnp.sum(X * X, axis=1))
    sol = margin_gradient_descent(
        X,
        y,
        net,
        learning_rate=eta,
        max_steps=steps,
        num_checkpoints=two_per_decade(steps),
        normalized=True,
    )
    mm = max_margin(X, y, net.a, gamma)
    kkt = kkt_residual(sol.model.W, net.a, X, y, gamma)
    return {
        "positively_correlated": cond.positively_correlated,
        "near_orthogonal": cond.near_orthogonal,
        "orthogonality_ratio": cond.orthogonality_ratio,
        "activated_first": sol.activated[0],
        "activated_final": sol.activated[-1],
        "pattern_frozen": frozen_over_last_decade(sol.patterns),
        "one_minus_cos": one_minus_cos(sol.model.W, mm.W),
        "mm_ok": mm.ok,
        "kkt_residual": kkt.residual,
        "test_error": projected_test_error(
            sol.model, key=key, signal=signal, num_samples=TEST_SAMPLES
        ),
        "solve_ok": sol.ok,
    }


def grid(ns, ds, signals, **static):
    return [dict(n=n, d=d, signal=float(s), **static) for n in ns for d in ds for s in signals]


def entries(points, outputs) -> list[dict]:
    """One `regime_map` entry per grid point (the fields the issue names, and a few more)."""
    out = []
    for p, o in zip(points, outputs, strict=True):
        frac = {k: float(np.mean(o[k])) for k in o if np.asarray(o[k]).dtype == bool}
        out.append(
            {
                "n": p["n"],
                "d": p["d"],
                "signal": p["signal"],
                "seeds": int(np.asarray(o["one_minus_cos"]).shape[0]),
                "positively_correlated_fraction": frac["positively_correlated"],
                "near_orthogonal_fraction": frac["near_orthogonal"],
                "activated_after_first_step_fraction": frac["activated_first"],
                "activated_at_end_fraction": frac["activated_final"],
                "pattern_frozen_fraction": frac["pattern_frozen"],
                "normalized_one_minus_cos_median": float(np.median(o["one_minus_cos"])),
                "normalized_one_minus_cos_max": float(np.max(o["one_minus_cos"])),
                "kkt_residual_median": float(np.median(o["kkt_residual"])),
                "test_error_median": float(np.median(o["test_error"])),
                "orthogonality_ratio_median": float(np.median(o["orthogonality_ratio"])),
                "max_margin_ok_fraction": frac["mm_ok"],
            }
        )
    return out


def case_summary(outputs) -> dict:
    """1 - cos over the instances that meet each theorem case's condition (all points pooled)."""
    summary = {}
    for key in ("positively_correlated", "near_orthogonal"):
        vals = np.concatenate(
            [np.asarray(o["one_minus_cos"])[np.asarray(o[key], bool)] for o in outputs]
        )
        act = np.concatenate(
            [np.asarray(o["activated_first"])[np.asarray(o[key], bool)] for o in outputs]
        )
        summary[key] = {
            "instances": int(vals.size),
            "activated_after_first_step_fraction": float(np.mean(act)) if act.size else None,
            "one_minus_cos_median": float(np.median(vals)) if vals.size else None,
            "one_minus_cos_max": float(np.max(vals)) if vals.size else None,
            "below_1e-8_fraction": float(np.mean(vals < 1e-8)) if vals.size else None,
        }
    neither = np.concatenate(
        [
            np.asarray(o["one_minus_cos"])[
                ~np.asarray(o["positively_correlated"], bool) & ~np.asarray(o["near_orthogonal"])
            ]
            for o in outputs
        ]
    )
    summary["neither"] = {
        "instances": int(neither.size),
        "one_minus_cos_median": float(np.median(neither)) if neither.size else None,
    }
    return summary


def table(regime_map: list[dict]) -> str:
    head = (
        f"{'n':>3} {'d':>7} {'||mu||':>7} {'pos.corr':>8} {'near-orth':>9} {'act.1':>6}"
        f" {'frozen':>6} {'1 - cos':>9} {'KKT res.':>9} {'test err':>9}"
    )
    lines = [head, "-" * len(head)]
    for e in regime_map:
        lines.append(
            f"{e['n']:>3} {e['d']:>7} {e['signal']:>7.1f}"
            f" {e['positively_correlated_fraction']:>8.2f} {e['near_orthogonal_fraction']:>9.2f}"
            f" {e['activated_after_first_step_fraction']:>6.2f}"
            f" {e['pattern_frozen_fraction']:>6.2f}"
            f" {e['normalized_one_minus_cos_median']:>9.1e} {e['kkt_residual_median']:>9.1e}"
            f" {e['test_error_median']:>9.2e}"
        )
    return "\n".join(lines)


def plot(results: dict, path) -> None:
    """Phase diagram: one panel per n, d across, ||mu|| up; colour 1 - cos of normalized GD,
    marker the theorem case the instances meet (most of the seeds)."""
    plt = pyplot()
    rmap = results["regime_map"]
    ns = sorted({e["n"] for e in rmap})
    fig, axes = plt.subplots(1, len(ns), figsize=(4.2 * len(ns), 4.0), squeeze=False)
    omc = np.array([max(e["normalized_one_minus_cos_median"], 1e-16) for e in rmap])
    vmin, vmax = np.log10(omc.min()), np.log10(omc.max())
    markers = {(True, True): "D", (True, False): "o", (False, True): "s", (False, False): "X"}
    labels = {
        (True, True): "both conditions",
        (True, False): "positively correlated",
        (False, True): "near-orthogonal",
        (False, False): "neither",
    }
    for ax, n in zip(axes[0], ns, strict=True):
        seen = set()
        for e in (e for e in rmap if e["n"] == n):
            case = (
                e["positively_correlated_fraction"] >= 0.5,
                e["near_orthogonal_fraction"] >= 0.5,
            )
            sc = ax.scatter(
                e["d"],
                e["signal"],
                c=[np.log10(max(e["normalized_one_minus_cos_median"], 1e-16))],
                vmin=vmin,
                vmax=vmax,
                cmap="viridis",
                marker=markers[case],
                s=110,
                edgecolors="k" if e["pattern_frozen_fraction"] == 1.0 else "r",
                label=None if case in seen else labels[case],
            )
            seen.add(case)
        d = np.geomspace(min(e["d"] for e in rmap), max(e["d"] for e in rmap), 50)
        ax.plot(d, (3.5 * np.sqrt(d)) ** 0.5, "k--", lw=0.7, label="||mu||^2 = 3.5 sqrt(d)")
        gamma = results["config"]["gamma"]
        ax.plot(d, np.sqrt(gamma * d / n), "k:", lw=0.7, label="||mu||^2 = gamma d / n")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(0.5, 3000.0)  # room above the grid for the legend
        ax.set_xlabel("d")
        ax.set_ylabel("||mu||")
        ax.set_title(f"n = {n}")
        ax.legend(fontsize=6, loc="upper left", ncol=2)
    fig.colorbar(sc, ax=axes[0, -1], label="log10 median 1 - cos (red edge: not frozen)")
    fig.suptitle("Regime map: normalized GD after the last step, against program (5)", fontsize=9)
    save_figure(fig, path)
