"""Every other benchmark end to end (`--quick`), as a user runs it. Slow: `pytest -m slow`."""

import math

import numpy as np
import pytest
from bench import run_module, run_quick

pytestmark = pytest.mark.slow


def test_alpha_limit(tmp_path):
    out = tmp_path / "al"
    stdout, results = run_quick("alpha_limit", out)
    assert "fitted slopes" in stdout
    assert results["config"]["base_seed"] == 0 and results["failed_solves"] == [0] * 6
    summary = results["summary"]
    for e in summary:
        assert {"median_rel_error", "max_rel_error", "median_cost_rel_error"} <= e.keys()
        assert e["failed_solves"] == 0 and e["jumps_not_crossed"] == 0
    assert [e["log10_inv_alpha"] for e in summary] == [10, 1000]
    assert summary[1]["median_rel_error"] < 0.1 * summary[0]["median_rel_error"]
    for name in ("errors.png", "exponents.png", "solvers.png"):
        assert (out / name).stat().st_size > 10_000
    # the stiff default beside the explicit solver it replaced: same jumps, fewer steps
    stiff, explicit = results["solvers"]["rodas5p"], results["solvers"]["dopri5"]
    np.testing.assert_allclose(stiff["median_rel_error"], explicit["median_rel_error"], rtol=1e-3)
    steps = zip(stiff["median_solver_steps"], explicit["median_solver_steps"], strict=True)
    assert all(a < b for a, b in steps)
    assert all(w > 0 for w in stiff["median_wall_seconds_per_solve"])
    assert "median_wall_seconds_per_solve" in summary[0]
    proc = run_module("alpha_limit", "--log10-inv-alpha", "0", "--out", str(tmp_path), timeout=120)
    assert proc.returncode == 2 and "log10-inv-alpha" in proc.stderr


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    ns = run_quick("norm_scaling", root / "norm_scaling")
    wa = run_quick("width_ablation", root / "width_ablation")
    return root, ns, wa


def test_norm_scaling(tables):
    root, (stdout, results), _ = tables
    assert "log-log slopes" in stdout
    assert [r["n"] for r in results["rows"]] == [8, 16]
    for r in results["rows"]:
        assert r["converged"] == r["seeds"] and r["failed_flows"] == 0
        # no interpolator beats the minimum norm; the alpha -> 0 flow ends at Algorithm 1's cost
        assert r["pred_norm_mean"] >= r["opt_norm_mean"] * (1 - 1e-9)
        assert r["limit_cost_mean"] == pytest.approx(r["alg1_cost_mean"], rel=1e-2)
    assert (root / "norm_scaling" / "norms.png").stat().st_size > 10_000


def test_width_ablation_reports_uncovered_samples(tables):
    root, _, (stdout, results) = tables
    rows = {(r["init"], r["m"]): r for r in results["rows"]}
    assert set(rows) == {("small", 10), ("small", 64), ("he", 10), ("he", 64)}
    # the quick run has samples that no width-10 neuron covers: reported, and the run stopped
    # at the loss floor instead of running to the step cap
    small10 = rows[("small", 10)]
    assert small10["uncovered_mean"] > 0 and small10["final_loss"] > 1e-3
    assert small10["converged"] == small10["seeds"]
    assert rows[("small", 64)]["final_loss"] <= 1e-10
    he = rows[("he", 64)]
    assert he["paper_eta"]["eta"] == 1e-3 and he["final_loss"] <= 1e-10
    assert (root / "width_ablation" / "widths.png").stat().st_size > 10_000


def test_reproduction_document_is_generated_from_results(tables, tmp_path):
    root, (_, ns), (_, wa) = tables
    out = tmp_path / "reproduction.md"
    proc = run_module("reproduction", "--results", str(root), "--out", str(out), timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "## Table 1" in text and "## Table 2" in text
    assert f"{ns['rows'][1]['pred_norm_mean']:.2f}" in text  # our measured number, n = 16
    assert "6.24 +- 0.12" in text  # the paper's number beside it
    assert f"{wa['rows'][0]['norm_mean']:.2f}" in text
    assert "run `python -m benchmarks.alpha_limit` first" in text  # missing results are said


def test_max_margin(tmp_path):
    stdout, results = run_quick("max_margin", tmp_path / "mm")
    assert "strong" in stdout and "weak" in stdout and "regime map" in stdout
    for curve in results["curves"].values():
        steps = [s for s, _ in curve]
        assert steps == sorted(steps) and steps[0] == 1
    assert results["activated_after_first_step"] == 1.0 and results["failed_solves"] == [0, 0]
    strong = results["strong"]
    assert strong["positively_correlated"] == 1.0
    assert strong["max_margin_relative_gap_max"] < 1e-12
    # normalized GD converges in direction much faster than GD
    gd, ngd = strong["gd"]["one_minus_cos_at"], strong["normalized"]["one_minus_cos_at"]
    assert ngd["1e4"] < 1e-3 * gd["1e4"]
    assert (tmp_path / "mm" / "convergence.png").stat().st_size > 10_000
    # the KKT residual falls along normalized GD where program (5) is the limit
    kkt = strong["normalized"]["kkt_residual_at"]
    assert kkt["1e4"] < 0.1 * kkt["1e2"]
    fields = {
        "n", "d", "signal", "seeds", "positively_correlated_fraction", "near_orthogonal_fraction",
        "activated_after_first_step_fraction", "pattern_frozen_fraction",
        "normalized_one_minus_cos_median", "test_error_median",
    }  # fmt: skip
    rmap = results["regime_map"]
    assert len(rmap) == 4 and all(fields <= e.keys() for e in rmap)
    near = [e for e in rmap if e["near_orthogonal_fraction"] == 1.0]
    assert near and all(e["activated_after_first_step_fraction"] == 1.0 for e in near)
    assert (tmp_path / "mm" / "regime_map.png").stat().st_size > 10_000


def test_phase_transition(tmp_path):
    stdout, results = run_quick("phase_transition", tmp_path / "pt")
    assert "standard errors" in stdout
    rows = results["rows"]
    assert len(rows) == 2 and all(r["train_error"] == 0.0 for r in rows)  # interpolation
    weak, strong = rows
    assert weak["regime"] == "weak" and strong["regime"] == "strong"
    assert strong["closed_form_error"] < weak["closed_form_error"]
    assert results["max_abs_z"] < 5
    # no hyperplane net in the span of the samples beats the per-instance bound
    assert all(r["span_bound_mean"] <= r["closed_form_error"] * (1 + 1e-6) for r in rows)
    assert (tmp_path / "pt" / "transition.png").stat().st_size > 10_000


def test_phase_transition_heavy_tails_and_label_noise(tmp_path):
    argv = ("--noise", "student-t", "--dof", "3", "--label-noise", "0", "0.1")
    stdout, results = run_quick("phase_transition", tmp_path / "pt", *argv)
    rows = results["rows"]
    assert {(r["noise"], r["dof"], r["label_noise"]) for r in rows} == {
        ("gaussian", None, 0.0),
        ("gaussian", None, 0.1),
        ("student_t", 3.0, 0.0),
        ("student_t", 3.0, 0.1),
    }
    assert all(r["train_error"] == 0.0 for r in rows)  # the noisy labels are interpolated
    for r in rows:
        assert {"excess_risk", "kkt_residual_curve", "pattern_frozen_fraction"} <= r.keys()
    for name in ("transition.png", "tails.png", "label_noise.png"):
        assert (tmp_path / "pt" / name).stat().st_size > 10_000
    bad = run_module("phase_transition", "--quick", "--dof", "2", timeout=120)
    assert bad.returncode == 2 and "--dof" in bad.stderr


def test_multi_index(tmp_path):
    out = tmp_path / "mi"
    stdout, res = run_quick("multi_index", out)
    assert "pred. plateau" in stdout
    assert {"d", "r", "m", "activation"} <= res["config"].keys()
    for key in ("t", "alpha_measured", "alpha_predicted", "beta1_measured", "beta1_predicted"):
        assert len(res["mass"][key]) == len(res["loss_curve"])
    assert res["final_loss"] < 0.01 * res["loss_curve"][0][1]
    assert [e["order"] for e in res["stages"]] == ["0", "2", ">=4"]
    for name in ("staircase.png", "mass.png"):
        assert (out / name).stat().st_size > 10_000
    bad = run_module("multi_index", "--quick", "--weight-decay", "-1", timeout=120)
    assert bad.returncode == 2 and "weight_decay" in bad.stderr
    # a sample count with no usable batch divisor is refused, naming it
    bad = run_module("multi_index", "--quick", "--samples", "10007", timeout=120)
    assert bad.returncode == 2 and "samples" in bad.stderr and "10007" in bad.stderr


def test_multi_index_batch_divides_the_sample_count():
    from benchmarks.multi_index import BATCH, _batch

    assert _batch(16000) == 4000 and _batch(50000) == BATCH and _batch(300) == 300


def test_throughput(tmp_path):
    stdout, results = run_quick("throughput", tmp_path / "tp")
    names = [c["name"] for c in results["comparisons"]]
    assert any("numpy" in n for n in names) and any("solve_ivp" in n for n in names)
    for c in results["comparisons"]:
        if "skipped" in c:  # an optional peer (the `bench` extra) is not installed
            continue
        assert c["better"] in ("higher", "lower")
        assert c["ours"] > 0 and c["theirs"] > 0 and math.isfinite(c["ratio"])
    # the same NumPy loop in the data basis reproduces the engine's GD on the same instance
    assert results["details"]["gd"]["numpy_data_basis_final_loss_rel_diff"] < 1e-6
    assert "GD sweep vs bandwidth peak" in names
    assert results["details"]["binding_limit"]["binds"] in ("flops", "bandwidth")
    assert (tmp_path / "tp" / "ratios.png").stat().st_size > 10_000


def test_gpu_check_runs_on_cpu(tmp_path):
    stdout, results = run_quick("gpu_check", tmp_path / "gpu")
    assert results["gd_sweep"]["seeds"] == 8 and results["main_job_flow"]["failed_solves"] == 0
    assert "seeds/s" in stdout


def test_sweep_throughput(tmp_path):
    stdout, results = run_quick("sweep_throughput", tmp_path / "st")
    assert [r["seeds"] for r in results["rows"]] == [1, 16]
    assert {r["devices"] for r in results["sharded"]} == {1, 2}
    assert "seed-epochs/s" in stdout


def test_beyond_orthogonal(tmp_path):
    stdout, results = run_quick("beyond_orthogonal", tmp_path / "bo")
    keys = {
        "inputs", "c", "d_over_n", "alpha", "seeds", "solve_ok_fraction", "plateaus_mean",
        "first_jump_ratio_median", "cost_ratio_median", "morse_index_first_plateau",
    }  # fmt: skip
    rows = results["rows"]
    assert [r["inputs"] for r in rows] == ["correlated", "correlated", "gaussian"]
    for r in rows:
        assert keys <= r.keys() and r["solve_ok_fraction"] == 1.0 and r["seeds"] == 2
    # c = 0 is the orthonormal case: the finite-alpha prediction times the first jump
    assert abs(rows[0]["first_jump_ratio_finite_alpha_median"] - 1) < 1e-3
    assert rows[0]["median_sliding_entries"] == 0 and rows[1]["median_sliding_entries"] > 0
    flows = {(s["case"], s["flow"]): s for s in results["solvers"]}
    assert flows[("orthonormal two-layer", "orthogonal_flow")]["max_loss_error"] < 1e-6
    assert flows[("correlated c=0.1", "two_layer_flow")]["ok"]
    for name in ("losses.png", "deviation.png"):
        assert (tmp_path / "bo" / name).stat().st_size > 10_000
    assert "1st jump" in stdout


def test_any_model(tmp_path):
    stdout, results = run_quick("any_model", tmp_path / "am")
    rows = {(r["case"], r["alpha"], r["method"]): r for r in results["rows"]}
    keys = {"case", "alpha", "method", "ok", "steps", "wall_seconds", "max_rel_error"}
    assert all(keys <= r.keys() for r in results["rows"])
    for alpha in (1e-10, 1e-30):
        # small init: refused by default, right with units against the log-coordinate solve
        assert not rows[("diagonal", alpha, "default")]["ok"]
        assert rows[("diagonal", alpha, "units")]["ok"]
        assert rows[("diagonal", alpha, "units")]["max_rel_error"] < 1e-5
        assert rows[("diagonal", alpha, "diffrax")]["max_rel_error"] > 0.1
    # the deep ReLU net slides after its first jump: held kinks and sliding, against GD
    # extrapolated to step 0, in at least 5x fewer steps than the plain solve
    held, plain = rows[("deep_relu", 1.0, "default")], rows[("deep_relu", 1.0, "no_hold")]
    assert held["ok"] and held["max_rel_error"] < 1e-3
    assert 5 * held["steps"] <= plain["steps"]
    # small init where GD cannot go: both alphas ok, the first jump at the same rescaled time
    jumps = results["jumps"]["shallow_relu"]
    assert (
        rows[("shallow_relu", 1e-10, "units")]["ok"]
        and rows[("shallow_relu", 1e-30, "units")]["ok"]
    )
    assert abs(jumps["1e-10"]["times"][0] / jumps["1e-30"]["times"][0] - 1) < 1e-2
    assert rows[("tanh", 1.0, "default")]["ok"]
    assert rows[("tanh", 1.0, "default")]["max_rel_error"] < 1e-6
    assert (tmp_path / "am" / "curves.png").stat().st_size > 10_000


def test_two_layer_vs_gd(tmp_path):
    stdout, results = run_quick("two_layer_vs_gd", tmp_path / "tg")
    (row,) = results["rows"]
    assert row["flow_ok"] and row["flow_kink_events"] > 0
    # the flow agrees with GD extrapolated to step 0, up to the reference's own uncertainty
    assert row["flow_max_rel_error"] < 1e-3 + 2 * row["reference_uncertainty"]
    # GD's error is first order in its step
    errors = [row["gd_rel_error"][k] for k in sorted(row["gd_rel_error"], key=float)]
    assert errors[0] < errors[1] < errors[2]
    assert "flow / GD" in stdout


def test_correlated_vs_gd(tmp_path):
    stdout, results = run_quick("correlated_vs_gd", tmp_path / "cg")
    (row,) = results["rows"]
    assert row["ok"] == [True] and row["kink_events"][0] > 0
    assert row["error"][0] < 1e-3 + 2 * row["uncertainty"][0]
    # where the largest gap is, and the shift in time that would make it
    assert 0 < row["error_time"][0] and 0 <= row["error_shift"][0] < 1e-2
    assert "flow vs GD" in stdout and "largest gap" in stdout


def test_saddles(tmp_path):
    stdout, results = run_quick("saddles", tmp_path / "sd")
    rows = results["rows"]
    assert {r["method"] for r in rows} == {
        'critical_point(kind="minimum")',
        'critical_point(kind="any")',
        "trust-krylov",
        "BFGS",
    }
    for r in rows:
        assert {"params", "method", "seconds", "grad_norm", "morse_index", "ok"} <= set(r)
        assert r["ok"] == (r["grad_norm"] < 1e-10)
    ours = next(r for r in rows if r["method"] == 'critical_point(kind="minimum")')
    assert ours["ok"] and ours["morse_index"] == 0 and ours["params"] == 33
    assert "| P | method |" in stdout and (tmp_path / "sd" / "polish.png").exists()


def test_diagonal_networks(tmp_path):
    out = tmp_path / "dn"
    stdout, results = run_quick("diagonal_networks", out)
    assert "limit - min-l1" in stdout
    rows = results["rows"]
    assert all(r["ok"] == r["seeds"] for r in rows)
    for size in {(r["n"], r["d"]) for r in rows}:
        mine = sorted(
            (r for r in rows if (r["n"], r["d"]) == size), key=lambda r: r["log10_inv_alpha"]
        )
        errors = [r["median_max_time_error"] for r in mine]
        assert errors == sorted(errors, reverse=True)  # shrinking as alpha -> 0
        assert mine[0]["max_limit_vs_min_l1"] < 1e-9
    assert (out / "loss_curves.png").exists() and (out / "errors.png").exists()


def test_teacher_student(tmp_path):
    out = tmp_path / "ts"
    stdout, results = run_quick("teacher_student", out)
    assert "Morse index" in stdout
    for r in results["rows"]:
        assert r["ok"] and r["final_loss"] < 1e-4
        for s in r["saddles"]:
            assert s["loss"] >= 0 and s["morse_index"] >= 0
    assert (out / "loss_curves.png").exists() and (out / "saddles.png").exists()


def test_beyond_orthogonal_gaussian_only(tmp_path):
    # `--cs` with no value: the Gaussian families alone, drawn in both figures
    from benchmarks import beyond_orthogonal
    from benchmarks._beyond_plots import plot_deviation, plot_losses

    with pytest.raises(SystemExit):
        beyond_orthogonal.main(["--cs", "--d-over-n"])  # nothing to solve
    ts = np.linspace(0.0, 5.0, 20)
    row = {
        "inputs": "gaussian", "c": None, "d_over_n": 1.0, "alpha": 1e-10,
        "first_jump_ratio_median": 0.9, "cost_ratio_median": 0.95,
    }  # fmt: skip
    results = {
        "config": {"log10_inv_alpha": [10]},
        "rows": [row],
        "_outputs": [{"ts": [ts], "loss": [np.exp(-ts)]}],
    }
    for plot, name in ((plot_losses, "l.png"), (plot_deviation, "d.png")):
        plot(results, tmp_path / name)
        assert (tmp_path / name).stat().st_size > 10_000


def test_relu_networks(tmp_path):
    stdout, results = run_quick("relu_networks", tmp_path / "rn")
    rows = {r["method"]: r for r in results["rows"]}
    held = rows["held"]
    # through the loss drop, within 1e-4 of GD extrapolated to step 0 (and its uncertainty)
    assert held["ok"] and held["loss_end"] < 0.5 * held["loss_start"]
    assert held["error"] < 1e-4 + 2 * held["reference_uncertainty"]
    assert held["max_sliding"] > 0 and held["kink_crossings"] > 0
    assert held["compile_seconds"] > 0 and held["solve_seconds"] > 0
    assert "flow/GD" in stdout and (tmp_path / "rn" / "losses.png").stat().st_size > 10_000


def test_fresh_removes_the_sweeps_under_out(tmp_path):
    # a rerun into the same --out loads the earlier chunks (and says so); --fresh recomputes
    from benchmarks._common import parser

    sweep_dir = tmp_path / "inner"
    (sweep_dir / "chunks").mkdir(parents=True)
    (sweep_dir / "chunks" / "p0_0_2.npz").write_bytes(b"x")
    (sweep_dir / "sweep.json").write_text("{}")
    (tmp_path / "results.json").write_text("{}")
    args = ["--out", str(tmp_path), "--no-compile-cache"]
    parser("x", "x", 1).parse_args(args)
    assert (sweep_dir / "sweep.json").exists()
    parser("x", "x", 1).parse_args([*args, "--fresh"])
    assert not (sweep_dir / "sweep.json").exists() and not (sweep_dir / "chunks").exists()
    assert (tmp_path / "results.json").exists()


@pytest.mark.slow
def test_saddle_chain(tmp_path):
    stdout, results = run_quick("saddle_chain", tmp_path / "sc")
    tanh = [r for r in results["rows"] if r.get("data") is None]
    first = [r for r in tanh if r["saddle"] == 0]
    # the origin of each net: a certified saddle of index = width, left along U
    assert all(r["ok"] and r["grad_norm"] < 1e-12 for r in first)
    assert [r["morse_index"] for r in first] == [r["width"] for r in first]
    assert all(r["escape_angle"] < 1e-2 for r in first)
    assert all(d["ok"] and d["wasserstein1"] < 1e-3 for d in results["density"])
    # orthonormal data: every saddle polished on its piece, certified, and where Algorithm 1
    # predicts it (seed 1; seed 0 fires a group sharing a sample: no prediction) within 1e-6
    ortho = [r for r in results["rows"] if r.get("data") == "orthonormal"]
    assert ortho and all(r["ok"] and r["morse_exact"] for r in ortho)
    assert [r["distance_to_prediction"] < 1e-6 for r in ortho if r["seed"] == 1] == [True, True]
    assert (tmp_path / "sc" / "chain.png").exists() and (
        tmp_path / "sc" / "orthonormal.png"
    ).exists()


def test_online_sgd(tmp_path):
    stdout, results = run_quick("online_sgd", tmp_path / "os")
    rows = results["simulation"]
    assert [r["d"] for r in rows] == [250, 500] and all(r["ok"] for r in rows)
    assert all(r["max_z"] < 5 for r in rows)  # the mean inside the seeds' error bars
    solver = {r["method"]: r for r in results["solver"]}
    assert solver["dopri8"]["max_rel_error"] < 1e-8
    assert solver["euler_equal_evals"]["max_rel_error"] > 100 * solver["dopri8"]["max_rel_error"]
    plateau = results["plateau"]
    assert all(r["fixed_point_ok"] for r in plateau["rows"])
    assert abs(plateau["escape_slope"] / plateau["inverse_unstable"] - 1) < 0.05
    assert (tmp_path / "os" / "eg.png").exists() and (tmp_path / "os" / "plateau.png").exists()


def test_startup(tmp_path):
    stdout, results = run_quick("startup", tmp_path / "su")
    cold, warm = results["runs"]
    assert (cold["state"], warm["state"]) == ("cold", "warm")
    assert cold["xla_compile"] > warm["xla_compile"] and warm["cache_reads"] > 0
    assert warm["trace"] < 0.5  # the stored programs ran untraced
    assert (tmp_path / "su" / "startup.png").exists()
