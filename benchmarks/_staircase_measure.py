"""The measurements of `benchmarks.multi_index` on one configuration's solves: the staircase's
stages, the weight-decay switch-off and the decay fit, against the theory's predictions."""

import numpy as np

from theory import (
    compare_stages,
    hermite_energies,
    stage_equilibria,
)

GROUP_SAMPLES, GROUP_REPEATS = 16, 4  # symmetrized net: K group elements, independent draws


def analyse(o, s, weight_decay, activation, r, d, m, decay_off) -> dict:
    """Stage table and prediction errors for seed s of one sweep point."""
    ts, loss = o["ts"][s], o["loss"][s]
    E = hermite_energies(activation=activation, r=r)
    eq = stage_equilibria(activation=activation, r=r, d=d, weight_decay=weight_decay)
    cmp = compare_stages(
        ts, loss, o["alpha"][s], o["q"][s], o["alignment_mean"][s], activation=activation,
        r=r, d=d, m=m, weight_decay=weight_decay, initial_alignment=o["initial_alignment"][s],
    )  # fmt: skip
    measured = cmp.measured_time.tolist()
    paper = [float(E.plateau_0), float(E.plateau_2), 0.0]
    table = [
        {
            "order": order,
            "predicted_plateau": float(cmp.predicted_plateau[k]),
            "paper_plateau": paper[k],
            "predicted_mass": float(cmp.predicted_mass[k]),
            "measured_loss_at_predicted_time": float(cmp.loss_at_predicted_time[k]),
            "measured_loss_at_measured_time": float(cmp.loss_at_measured_time[k]),
            "predicted_time": float(cmp.predicted_time[k]),
            "measured_time": measured[k],
        }
        for k, order in enumerate(("0", "2", ">=4"))
    ]
    switch = switch_off(o, s, activation, r, d, decay_off, eq, measured)
    # prediction errors over the degree-2 stage, [t_0, t_2] (measured times)
    lo, hi = table[0]["measured_time"], table[1]["measured_time"]
    window = (ts >= lo) & (ts <= hi)
    errs = {}
    for name in ("corrected", "paper"):
        beta = o[f"beta_{name}"][s]
        alpha_pred = r * beta[:, 0] + (d - r) * beta[:, 1]
        errs[name] = {
            "alpha_max_rel_error": float(np.max(np.abs(alpha_pred / o["alpha"][s] - 1)[window])),
            "beta1_max_rel_error": float(np.max(np.abs(beta[:, 0] / o["beta1"][s] - 1)[window])),
            "beta2_max_rel_error": float(np.max(np.abs(beta[:, 1] / o["beta2"][s] - 1)[window])),
        }
    stage0 = ts <= lo
    errs["mass_ode_stage0_max_rel_error"] = float(
        np.max(np.abs(o["alpha_mass_ode"][s] / o["alpha"][s] - 1)[stage0])
    )
    # stage 0's logistic with every Hermite order (`StageEquilibria.relax`)
    logistic = np.asarray(eq.relax(o["alpha"][s][0], ts, 0))
    errs["stage0_logistic_max_rel_error"] = float(
        np.max(np.abs(logistic / o["alpha"][s] - 1)[stage0])
    )
    dec = o["decomposition"][s]  # (init / final, repeats, [L, A, B])
    residual = dec[..., 0] - dec[..., 1] - dec[..., 2]
    decomposition = {
        when: {
            "loss": float(dec[i, 0, 0]),
            "symmetric_part": float(np.mean(dec[i, :, 1])),
            "asymmetric_part": float(np.mean(dec[i, :, 2])),
            "residual_mean": float(np.mean(residual[i])),
            "residual_stderr": float(np.std(residual[i], ddof=1) / np.sqrt(residual.shape[1])),
            "group_samples": GROUP_SAMPLES,
        }
        for i, when in enumerate(("init", "final"))
    }
    return {
        "stages": table,
        "prediction_errors": errs,
        "degree2_window": [lo, hi],
        "decomposition": decomposition,
        **switch,
    }


def switch_off(o, s, activation, r, d, decay_off, eq, measured) -> dict:
    """The mass before the switch-off of lambda against the equilibrium of the stage reached
    by then, and the relaxation after it (the logistic of `StageEquilibria.relax` with
    lambda = 0) against the simulation."""
    ts, alpha, loss = o["ts"][s], o["alpha"][s], o["loss"][s]
    t_off = min(decay_off, float(ts[-1]))
    stage = int(np.sum(np.asarray(measured) <= t_off)) - 1  # 0, 1, 2: orders 0, 2, >= 4
    stage = max(stage, 0)
    # the last save time before the switch-off (interpolating across it would mix the two)
    i = max(int(np.searchsorted(ts, t_off, side="left")) - 1, 0)
    late = float(alpha[i])
    out = {
        "stage_at_decay_off": ["0", "2", ">=4"][stage],
        "mass_equilibrium_predicted": float(eq.mass[stage]),
        "mass_late_measured": late,
        "mass_late_rel_error": abs(late / float(eq.mass[stage]) - 1.0),
        "loss_late_predicted": float(eq.loss[stage]),
        "loss_late_measured": float(loss[i]),
        "late_time": float(ts[i]),
    }
    after = ts > t_off
    if decay_off < float(ts[-1]) and np.any(after):
        eq0 = stage_equilibria(activation=activation, r=r, d=d, weight_decay=0.0)
        pred = np.asarray(eq0.relax(late, ts[after] - t_off, stage))
        out["after_decay_off"] = {
            "mass_equilibrium_predicted": float(eq0.mass[stage]),
            "mass_final_predicted": float(pred[-1]),
            "mass_final_measured": float(alpha[-1]),
            "mass_max_rel_error": float(np.max(np.abs(pred / alpha[after] - 1.0))),
            "loss_final_predicted": float(eq0.loss_at(pred[-1], stage)),
            "loss_final_measured": float(loss[-1]),
            "relaxation_rate": float(eq0.rate[stage]),
        }
    return out


def decay_fit(ts, beta2, lo, hi) -> dict:
    """Fits of log beta_2 on [lo, hi]: exponential (against t) and power law (against log t)."""
    keep = (ts >= lo) & (ts <= hi) & (beta2 > 0)
    t, lb = ts[keep], np.log(beta2[keep])
    exp_fit = np.polyfit(t, lb, 1, full=True)
    pow_fit = np.polyfit(np.log(t), lb, 1, full=True)
    rss = lambda f: float(f[1][0]) if len(f[1]) else 0.0  # noqa: E731
    return {
        "exponential_rate": float(-exp_fit[0][0]),
        "exponential_rss": rss(exp_fit),
        "power_exponent": float(pow_fit[0][0]),
        "power_rss": rss(pow_fit),
        "better_fit": "exponential" if rss(exp_fit) < rss(pow_fit) else "power law",
        "window": [float(lo), float(hi)],
    }
