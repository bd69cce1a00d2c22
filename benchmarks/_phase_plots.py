"""The figures of `benchmarks.phase_transition`: test error against signal per shape, and the
heavy-tail and label-noise variants."""

from benchmarks._common import (
    pyplot,
    save_figure,
)


def noise_law(r) -> str:
    return "gaussian" if r["noise"] == "gaussian" else f"t({r['dof']:g})"


def _shapes(rows) -> list[tuple[int, int]]:
    return sorted({(r["n"], r["d"]) for r in rows})


def _series(rows, n, d) -> list[dict]:
    """The rows of shape (n, d), by increasing signal: one curve of a figure."""
    return sorted((r for r in rows if (r["n"], r["d"]) == (n, d)), key=lambda r: r["signal"])


def plot(results: dict, path) -> None:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6.6, 4.4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    reference = [r for r in results["rows"] if r["noise"] == "gaussian" and r["label_noise"] == 0]
    for c, (n, d) in zip(colors, _shapes(reference), strict=False):
        rows = _series(reference, n, d)
        x = [r["regime_ratio"] for r in rows]
        ax.plot(x, [r["closed_form_error"] for r in rows], "-", color=c, label=f"n = {n}, d = {d}")
        ax.errorbar(
            x,
            [r["monte_carlo_error"] for r in rows],
            yerr=[2 * r["monte_carlo_stderr"] for r in rows],
            fmt="o",
            ms=3,
            color=c,
            capsize=2,
        )
        ax.plot(x, [r["bayes_error"] for r in rows], ":", color=c, lw=0.8)
        ax.plot(x, [r["lower_bound"] for r in rows], "--", color=c, lw=1.0)
    ax.plot([], [], "k-", label="closed form; dots: Monte Carlo (2 s.e.)")
    ax.plot([], [], "k--", label="lower bound (span of the samples)")
    ax.plot([], [], "k:", lw=0.8, label="Bayes error Phi(-||mu||)")
    ax.axvline(1.0, color="k", lw=0.8, ls="--")
    ax.text(1.05, 0.6, "strong signal", transform=ax.get_xaxis_transform(), fontsize=8)
    ax.text(0.95, 0.6, "weak signal", transform=ax.get_xaxis_transform(), fontsize=8, ha="right")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(1e-6, 0.6)
    ax.set_xlabel("n ||mu||^2 / R   (R = E||z||^2 = d)")
    ax.set_ylabel("test error")
    ax.set_title(
        "Benign overfitting: test error of the interpolating net\n"
        "(where the dashed bound stays far above the Bayes error, it must fail)",
        fontsize=9,
    )
    ax.legend(fontsize=6)
    save_figure(fig, path)


def plot_tails(results: dict, path) -> None:
    """Monte Carlo error on Student-t mixtures against the Gaussian closed form, per dof."""
    plt = pyplot()
    rows = [r for r in results["rows"] if r["label_noise"] == 0]
    shapes = _shapes(rows)
    fig, axes = plt.subplots(1, len(shapes), figsize=(4.6 * len(shapes), 4.2), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    laws = sorted({noise_law(r) for r in rows}, key=lambda s: (s != "gaussian", s))
    for ax, (n, d) in zip(axes[0], shapes, strict=True):
        for c, law in zip(colors, laws, strict=False):
            sub = _series([r for r in rows if noise_law(r) == law], n, d)
            x = [r["regime_ratio"] for r in sub]
            ax.plot(x, [r["monte_carlo_error"] for r in sub], "o-", ms=3, color=c, label=law)
            ax.plot(x, [r["closed_form_error"] for r in sub], "--", lw=0.8, color=c)
            ax.plot(x, [r["bayes_error"] for r in sub], ":", lw=0.8, color=c)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(1e-5, 0.6)
        ax.set_xlabel("n ||mu||^2 / R")
        ax.set_title(f"n = {n}, d = {d}", fontsize=9)
    axes[0, 0].set_ylabel("test error (dots: Monte Carlo, dashed: Gaussian formula, dotted: Bayes)")
    axes[0, 0].legend(fontsize=7)
    save_figure(fig, path)


def plot_label_noise(results: dict, path) -> None:
    """Excess risk on clean labels and the final KKT residual, per label-noise level."""
    plt = pyplot()
    rows = [r for r in results["rows"] if r["noise"] == "gaussian"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10.5, 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ("o-", "s--", "^-.", "v:")
    etas = sorted({r["label_noise"] for r in rows})
    shapes = _shapes(rows)
    for c, eta in zip(colors, etas, strict=False):
        for style, (n, d) in zip(styles, shapes, strict=False):
            sub = _series([r for r in rows if r["label_noise"] == eta], n, d)
            x = [r["regime_ratio"] for r in sub]
            lab = f"flip {eta:g}, n = {n}, d = {d}"
            ax.plot(x, [max(r["excess_risk"], 1e-6) for r in sub], style, ms=3, color=c, label=lab)
            bx.plot(x, [r["kkt_residual_median"] for r in sub], style, ms=3, color=c, label=lab)
    for a in (ax, bx):
        a.set_xscale("log")
        a.set_yscale("log")
        a.axvline(1.0, color="k", lw=0.8, ls="--")
        a.set_xlabel("n ||mu||^2 / R")
    ax.set_ylabel("excess risk on clean labels (floored at 1e-6)")
    bx.set_ylabel("median KKT residual at the last step")
    ax.legend(fontsize=6)
    save_figure(fig, path)
