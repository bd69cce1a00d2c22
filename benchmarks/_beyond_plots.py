"""The figures of `benchmarks.beyond_orthogonal`: loss curves per setting, and the first-jump and
cost ratios against c (the Gaussian families as horizontal lines)."""

import numpy as np

from benchmarks._common import pyplot, save_figure


def _rows(results, p, inputs="correlated"):
    return [
        (i, r) for i, r in enumerate(results["rows"])
        if r["inputs"] == inputs and np.isclose(r["alpha"], 10.0**-p, rtol=1e-6, atol=0)
    ]  # fmt: skip


def plot_losses(results: dict, path) -> None:
    plt = pyplot()
    ps = results["config"]["log10_inv_alpha"]
    fig, axes = plt.subplots(1, len(ps), figsize=(5.5 * len(ps), 4.2), squeeze=False)
    for ax, p in zip(axes[0], ps, strict=True):
        curves = [(i, f"c = {r['c']:g}", "-") for i, r in _rows(results, p)]
        curves += [
            (i, f"Gaussian, d/n = {r['d_over_n']:g}", "--")
            for i, r in _rows(results, p, "gaussian")
        ]
        for i, label, style in curves:
            o = results["_outputs"][i]
            ax.semilogy(np.asarray(o["ts"][0]), np.asarray(o["loss"][0]), style, label=label)
        ax.set_xlabel("rescaled time t")
        ax.set_ylabel("loss")
        ax.set_ylim(1e-12, None)
        ax.set_title(f"seed 0, alpha = 1e-{p}")
        ax.legend(fontsize=8)
    save_figure(fig, path)


def plot_deviation(results: dict, path) -> None:
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    floor = 1e-8  # where c = 0 is drawn on the log axis
    for p, marker in zip(results["config"]["log10_inv_alpha"], "os", strict=False):
        rows = [r for _, r in _rows(results, p)]
        c = np.array([max(r["c"], floor) for r in rows])
        a1.semilogx(c, [abs(r["first_jump_ratio_median"] - 1) + 1e-16 for r in rows],
                    marker + "-", label=f"alpha = 1e-{p}")  # fmt: skip
        a2.semilogx(
            c, [r["cost_ratio_median"] for r in rows], marker + "-", label=f"alpha = 1e-{p}"
        )
        for (_, r), style in zip(_rows(results, p, "gaussian"), (":", "-.", "--"), strict=False):
            label = f"Gaussian d/n = {r['d_over_n']:g}, alpha = 1e-{p}"
            a1.axhline(abs(r["first_jump_ratio_median"] - 1) + 1e-16, ls=style, label=label)
            a2.axhline(r["cost_ratio_median"], ls=style, label=label)
    a1.set_yscale("log")
    a1.set_xlabel(f"correlation c (c = 0 drawn at {floor:g})")
    a1.set_ylabel("|first jump / Algorithm 1 - 1| (median)")
    a2.set_xlabel(f"correlation c (c = 0 drawn at {floor:g})")
    a2.set_ylabel("final cost / Algorithm 1's cost (median)")
    for ax in (a1, a2):
        ax.legend(fontsize=8)
    a1.set_title("first jump against Algorithm 1 on the Loewdin problem")
    a2.set_title("final 1/2 ||theta||^2 against Algorithm 1")
    save_figure(fig, path)
