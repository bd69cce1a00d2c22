"""The reproduction page (docs/reproduction.md) from measured results: the paper's tables 1 and
2 beside ours, shared by its command (`benchmarks.reproduction`) and the docs generator
(`benchmarks.docs`), so that neither benchmark module imports the other.

Reads the `results.json` of `benchmarks.norm_scaling`, `benchmarks.width_ablation` and
`benchmarks.alpha_limit` and writes the side-by-side tables with, for every difference, the
reason, computed from the same results wherever it can be (finite alpha, GD against the flow,
the loss normalization, widths, or a claim that cannot hold for the model as written). The
paper's numbers are its tables (arXiv:2605.27097, in `benchmarks._paper`).
"""

import json
import math
from pathlib import Path

from benchmarks._common import fit_slope
from benchmarks._paper import PAPER_TABLE1, PAPER_TABLE2


def load(path: Path) -> dict | None:
    """A benchmark's results from `path`, or None where it has not been run."""
    return json.loads(path.read_text()) if path.exists() else None


def table1(ns: dict) -> list[str]:
    rows = {r["n"]: r for r in ns["rows"]}
    out = [
        "## Table 1: norm of the interpolator against n",
        "",
        f"Ours: `python -m benchmarks.norm_scaling`, {ns['config']['seeds']} seeds per n, "
        f"alpha = {ns['config']['alpha']}, eta = {ns['config']['eta']}, GD until "
        f"L <= {ns['config']['tol']:g}, L = 1/(2n) sum (h - y)^2. Norms are 1/2 ||theta||^2; "
        "mean +- std over seeds. *Limit* is the vanishing-init flow at "
        f"alpha = {ns['config']['limit_alpha']}.",
        "",
        "| n | m paper / ours | epochs paper / ours | GD norm paper / ours | opt norm paper / ours"
        " | ratio paper / ours | Algorithm 1 | limit flow |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, m, ep, pn, ps, on, osd, ratio in PAPER_TABLE1:
        r = rows.get(n)
        if r is None:
            continue
        out.append(
            f"| {n} | {m} / {r['m']} | {ep:.1e} / {r['epochs_mean']:.2e} | {pn:.2f} +- {ps:.2f} /"
            f" {r['pred_norm_mean']:.2f} +- {r['pred_norm_std']:.2f} | {on:.2f} +- {osd:.2f} /"
            f" {r['opt_norm_mean']:.2f} +- {r['opt_norm_std']:.2f} | {ratio:.2f} /"
            f" {r['ratio_mean']:.3f} +- {r['ratio_std']:.3f} | {r['alg1_cost_mean']:.2f} |"
            f" {r['limit_cost_mean']:.2f} |"
        )
    common = [row for row in PAPER_TABLE1 if row[0] in rows]
    n_list = [row[0] for row in common]
    opt_over = [rows[n]["opt_norm_mean"] / math.sqrt(2 * n) for n in n_list]
    paper_over = [row[5] / math.sqrt(2 * row[0]) for row in common]
    gd_vs_flow = max(abs(rows[n]["pred_norm_mean"] / rows[n]["flow_cost_mean"] - 1) for n in n_list)
    finite = [rows[n]["flow_cost_mean"] / rows[n]["alg1_cost_mean"] - 1 for n in n_list]
    limit = [abs(rows[n]["limit_cost_mean"] / rows[n]["alg1_cost_mean"] - 1) for n in n_list]
    epochs_ratio = [rows[n]["epochs_mean"] / rows[n]["alg1_epochs_mean"] for n in n_list]
    fewer = [row[2] / rows[row[0]]["epochs_mean"] for row in common]
    s = ns["slopes"]
    out += [
        "",
        "**Every difference, and why:**",
        "",
        "- **Widths.** The rule m = ceil(ln(1e4 n) / ln(4/3)) gives "
        + ", ".join(f"{rows[n]['m']}" for n in n_list)
        + "; the paper prints "
        + ", ".join(f"{row[1]}" for row in common)
        + ", one more than its own rule except at n = 32. We use the rule.",
        "- **The optimal norm column cannot hold for the model as written.** For orthonormal "
        "inputs the minimum of 1/2 ||theta||^2 over interpolators is exactly ||y_+|| + ||y_-|| "
        "(proof in `theory.min_norm_cost`), about sqrt(2n) for standard Gaussian labels. Our "
        "measured optimum is " + ", ".join(f"{v:.3f}" for v in opt_over) + " x sqrt(2n); the "
        "paper's is " + ", ".join(f"{v:.3f}" for v in paper_over) + " x sqrt(2n), which would "
        "need labels of standard deviation about "
        f"{sum(paper_over) / len(paper_over):.2f}, or a different norm convention that the "
        "paper does not state. Its *ratio* column, which is convention-free, is the fair "
        "comparison.",
        f"- **The ratio is not constant.** The paper reports 1.74-1.82 for every n. We measure "
        f"{rows[n_list[0]]['ratio_mean']:.2f} at n = {n_list[0]} rising to "
        f"{rows[n_list[-1]]['ratio_mean']:.2f} at n = {n_list[-1]} for GD, and "
        f"{rows[n_list[0]]['alg1_ratio_mean']:.2f} to {rows[n_list[-1]]['alg1_ratio_mean']:.2f} "
        f"for Algorithm 1 (the alpha -> 0 limit). Fitted log-log slopes against n: GD "
        f"{s['pred_norm_mean']:.3f}, Algorithm 1 {s['alg1_cost_mean']:.3f}, optimum "
        f"{s['opt_norm_mean']:.3f} (theory: 1/2 for the optimum). With m ~ log n neurons each "
        "fitting a fraction of the remaining samples, a cost of order sqrt(n log n) would have "
        f"local slope 1/2 + 1/(2 ln n), i.e. {0.5 + 0.5 / math.log(n_list[0]):.2f} to "
        f"{0.5 + 0.5 / math.log(n_list[-1]):.2f} here: the O(sqrt n) bound of the paper's "
        "theorem 3 is not visible at these sizes, and the constant ratio is not reproduced.",
        f"- **GD against the flow.** At eta = {ns['config']['eta']} GD ends within "
        f"{100 * gd_vs_flow:.2f}% of the rescaled gradient flow at the same alpha (mean norms): "
        "the step size is not the cause of any difference here.",
        "- **Finite alpha.** At alpha = 1e-30 / sqrt(m) the flow ends "
        + ", ".join(f"{100 * v:+.1f}%" for v in finite)
        + " away from Algorithm 1's cost (always below it: at finite alpha a neuron that was "
        "about to fire shares the samples of the one that fires, which lowers the norm). The "
        "vanishing-init flow at the limit alpha closes that gap to "
        + ", ".join(f"{100 * v:.2f}%" for v in limit)
        + " (mean norms). So the measured GD ratio sits below the limit's ratio by a finite-alpha "
        "effect of O(1/log(1/alpha)), which grows with n.",
        "- **Epochs.** Ours are "
        + ", ".join(f"{rows[n]['epochs_mean']:.0f}" for n in n_list)
        + f", {min(fewer):.0f}-{max(fewer):.0f} times fewer than the paper's. They follow from the"
        " jump process: the last "
        "jump happens at ordinary time log(1/alpha) t_K, i.e. after log(1/alpha) t_K / eta "
        "epochs, and the measured mean epochs are "
        + ", ".join(f"{v:.2f}" for v in epochs_ratio)
        + " times that prediction (the rest is the final exponential convergence to "
        f"L <= 1e-10). The paper's counts would need a {min(fewer):.0f}-{max(fewer):.0f} times "
        "smaller effective step, e.g. another loss normalization; they are not consistent with "
        "eta = 0.5 on this loss.",
    ]
    return out


def table2(wa: dict) -> list[str]:
    rows = {(r["init"], r["m"]): r for r in wa["rows"]}
    out = [
        "## Table 2: width ablation, small against He init (n = d = 32)",
        "",
        f"Ours: `python -m benchmarks.width_ablation`, {wa['config']['seeds']} seeds per row. "
        "Norms are 1/2 ||theta||^2, mean +- std; deviation is norm / (||y_+|| + ||y_-||) - 1, "
        "mean over seeds; final loss is the largest over seeds.",
        "",
        "| init | m | eta paper / ours | final loss paper / ours | norm paper / ours |"
        " deviation paper / ours | uncovered samples (mean) | converged |",
        "|---|---|---|---|---|---|---|---|",
    ]
    paper = {(i, m): (eta, nm, ns, dev) for i, m, eta, nm, ns, dev in PAPER_TABLE2}
    for (init, m), r in sorted(rows.items(), key=lambda kv: (kv[0][0] != "small", kv[0][1])):
        if (init, m) in paper:
            eta, nm, nsd, dev = paper[(init, m)]
            p = (f"{eta:g}", "< 1e-10", f"{nm:.2f} +- {nsd:.2f}", f"{100 * dev:+.1f}%")
        else:
            p = ("-", "-", "-", "-")
        out.append(
            f"| {init} | {m} | {p[0]} / {r['eta']:.3g} | {p[1]} / {r['final_loss']:.1e} |"
            f" {p[2]} / {r['norm_mean']:.2f} +- {r['norm_std']:.2f} | {p[3]} /"
            f" {100 * r['rel_deviation_mean']:+.1f}% | {r['uncovered_mean']:.2f} |"
            f" {r['converged']}/{r['seeds']} |"
        )
    out += ["", "**Every difference, and why:**", ""]
    small = sorted((m, r) for (i, m), r in rows.items() if i == "small")
    he = sorted((m, r) for (i, m), r in rows.items() if i == "he")
    if small and small[0][1]["uncovered_mean"] > 0:
        m0, r0 = small[0]
        out.append(
            f"- **m = {m0} cannot interpolate.** A sample is in a neuron's support only if "
            "<u_j, x_i> > 0 and s_j y_i > 0 (probability 1/4), and the small-init flow can never "
            f"fit a sample outside every support. At m = {m0}, {r0['uncovered_seeds']} of "
            f"{r0['seeds']} seeds had such samples ({r0['uncovered_mean']:.2f} per seed on "
            f"average, expected n (3/4)^m = {32 * 0.75**m0:.2f}); their loss stays at "
            f"1/(2n) sum of those y_i^2 (largest final loss {r0['final_loss']:.1e}). The paper's "
            "L < 1e-10 at m = 10 cannot hold for those seeds. GD stopped at that floor + 1e-10 "
            "instead of running forever; the norm and deviation of this row are of "
            "non-interpolating nets."
        )
    if small:
        devs = ", ".join(f"{100 * r['rel_deviation_mean']:+.1f}% (m = {m})" for m, r in small)
        out.append(
            "- **Small init, wider nets.** Our deviations from the optimum: " + devs + ". "
            "Wider nets have more neurons whose supports cover the samples, so the first neurons"
            " to fire take larger subsets and the norm falls towards ||y_+|| + ||y_-||, as the "
            "paper says; the paper's absolute norms inherit its optimum column's scale (Table 1)."
        )
    if he:
        paper_conv = ", ".join(
            f"m = {m}: {r['paper_eta']['converged']}/{r['seeds']} (median loss "
            f"{r['paper_eta']['final_loss_median']:.1e} after {r['paper_eta']['epochs_mean']:.0f}"
            " epochs)"
            for m, r in he
        )
        out.append(
            f"- **He init, eta = 0.001.** Within {wa['config']['paper_eta_step_cap']:.0e} steps "
            "the paper's step reached L <= 1e-10 in " + paper_conv + ". A row uses the largest "
            "step that does not diverge, 2^-k / lambda_max of the initial tangent kernel, only "
            "where that brings more seeds to 1e-10 (column eta). At m = 10 neither brings every "
            "seed there within the cap; the paper's table has no He row at m = 10."
        )
        added = ", ".join(
            f"m = {m}: {r['initial_norm_mean']:.1f} + {r['norm_mean'] - r['initial_norm_mean']:.1f}"
            for m, r in he
        )
        out.append(
            "- **He init norms are the init's own norm plus a roughly constant fitting cost.** "
            "PyTorch's default init has E 1/2 ||theta_0||^2 = (m + 1)/6 (W_jk ~ U(-1/sqrt d, "
            "1/sqrt d), a_j ~ U(-1/sqrt m, 1/sqrt m)); measured final norm = init norm + what GD "
            "added: " + added + ". So the norm grows linearly with m, as the paper says, but a "
            "value below the init's own norm (the paper's 112.5 at m = 1000, against "
            "(1000 + 1)/6 = 166.8) would need GD to shrink the initial weights, which it does "
            "not do in this lazy regime: that entry cannot hold for the init as stated."
        )
        done = [(m, r) for m, r in he if r["converged"] == r["seeds"]]
        if len(done) > 1:
            slope = fit_slope([m for m, _ in done], [r["norm_mean"] for _, r in done])
            out.append(
                f"- Fitted slope of the He-init norm against m over the rows where every seed "
                f"interpolated (m = {', '.join(str(m) for m, _ in done)}): {slope:.2f} "
                "(linear: 1; the fitting cost keeps it below 1 at small m)."
            )
    return out


def alpha_section(al: dict) -> list[str]:
    out = [
        "## The alpha -> 0 limit (no table in the paper)",
        "",
        "`python -m benchmarks.alpha_limit`: the vanishing-init flow against Algorithm 1, "
        f"n = d = {al['config']['n']}, m = {al['config']['width']}, {al['config']['seeds']} "
        "seeds.",
        "",
        "| log10(1/alpha) | median jump-time error | max | median cost error | solver steps |",
        "|---|---|---|---|---|",
    ]
    for e in al["summary"]:
        out.append(
            f"| {e['log10_inv_alpha']} | {e['median_rel_error']:.2e} | {e['max_rel_error']:.2e} |"
            f" {e['median_cost_rel_error']:.2e} | {e['median_solver_steps']:.0f} |"
        )
    s = al["slopes"]
    out += [
        "",
        f"Fitted slopes against log(1/alpha): median {s['median_rel_error']:.2f}, max "
        f"{s['max_rel_error']:.2f}, cost {s['median_cost_rel_error']:.2f}: the errors fall as "
        "1/log(1/alpha), as the limit theorem implies, and keep falling through alpha = "
        "10^-10000. The paper's 'jump times within 0.5%' holds at the median from alpha = "
        "1e-100 on; the largest errors come from near-ties between two neurons' waiting times, "
        "which at finite alpha share samples (the gap closes like exp(-log(1/alpha) x gap)).",
    ]
    return out


INPUTS = ("norm_scaling", "width_ablation", "alpha_limit")  # the benchmarks it reads


def render(results_dir: Path) -> str:
    """The page from `<results_dir>/<name>/results.json` for each of `INPUTS`."""
    return render_data(*(load(results_dir / name / "results.json") for name in INPUTS))


def render_data(ns: dict | None, wa: dict | None, al: dict | None) -> str:
    """The page from the three benchmarks' results (`None` where one has not been run)."""
    lines = [
        "# Reproducing the orthogonal-data paper's tables",
        "",
        "Generated by `python -m benchmarks.docs` from `docs/data/norm_scaling.json`,"
        " `width_ablation.json` and `alpha_limit.json` (the benchmarks' `results.json`);"
        " do not edit by hand. The paper's numbers are claims to test, not targets: every "
        "number here under *ours* was measured by this engine.",
        "",
    ]
    for section, data, name in (
        (table1, ns, "norm_scaling"),
        (table2, wa, "width_ablation"),
        (alpha_section, al, "alpha_limit"),
    ):
        if data is None:
            lines += [f"*(no results: run `python -m benchmarks.{name}` first)*", ""]
        else:
            lines += section(data) + [""]
    env = (ns or wa or al or {}).get("environment", {})
    if env:
        lines.append(
            f"Measured with jax {env.get('jax')} on {env.get('backend')}, "
            f"{env.get('cpu_count')} CPU cores."
        )
    return "\n".join(lines) + "\n"
