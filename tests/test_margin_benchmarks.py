from bench import run_quick


def test_max_margin_quick(tmp_path):
    stdout, results = run_quick("max_margin", tmp_path / "mm")
    assert "strong" in stdout and "near_orthogonal" in stdout
    assert set(results["curves"]) == {"gd", "normalized"}
    for curve in results["curves"].values():
        steps = [s for s, _ in curve]
        assert steps == sorted(steps) and steps[0] == 1
    assert results["activated_after_first_step"] == 1.0
    strong = results["strong"]
    assert strong["positively_correlated"] == 1.0
    assert strong["max_margin_relative_gap_max"] < 1e-12
    # normalized GD converges in direction much faster than GD
    gd, ngd = strong["gd"]["one_minus_cos_at"], strong["normalized"]["one_minus_cos_at"]
    assert ngd["1e4"] < 1e-3 * gd["1e4"]
    assert (tmp_path / "mm" / "convergence.png").stat().st_size > 10_000


def test_phase_transition_quick(tmp_path):
    stdout, results = run_quick("phase_transition", tmp_path / "pt")
    assert "standard errors" in stdout
    keys = {
        "signal",
        "n",
        "d",
        "train_error",
        "closed_form_error",
        "monte_carlo_error",
        "monte_carlo_stderr",
    }
    rows = results["rows"]
    assert len(rows) == 2 and all(keys <= r.keys() for r in rows)
    assert all(r["train_error"] == 0.0 for r in rows)  # interpolation
    weak, strong = rows
    assert weak["regime"] == "weak" and strong["regime"] == "strong"
    assert strong["closed_form_error"] < weak["closed_form_error"]
    assert results["max_abs_z"] < 5
    assert (tmp_path / "pt" / "transition.png").stat().st_size > 10_000
