from bench import run_module, run_quick


def test_quick_run_end_to_end(tmp_path):
    out = tmp_path / "al"
    stdout, results = run_quick("alpha_limit", out)
    assert "fitted slopes" in stdout
    assert results["config"]["base_seed"] == 0
    summary = results["summary"]
    keys = {
        "log10_inv_alpha",
        "median_rel_error",
        "max_rel_error",
        "median_cost_rel_error",
        "median_solver_steps",
    }
    for e in summary:
        assert keys <= e.keys()
        assert e["failed_solves"] == 0 and e["jumps_not_crossed"] == 0
    assert [e["log10_inv_alpha"] for e in summary] == [10, 1000]
    assert summary[1]["median_rel_error"] < 0.1 * summary[0]["median_rel_error"]
    for name in ("errors.png", "exponents.png"):
        assert (out / name).stat().st_size > 10_000


def test_refuses_nonpositive_alpha_exponent(tmp_path):
    proc = run_module("alpha_limit", "--log10-inv-alpha", "0", "--out", str(tmp_path), timeout=120)
    assert proc.returncode == 2 and "log10-inv-alpha" in proc.stderr
