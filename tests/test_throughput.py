from bench import run_quick


def test_throughput_quick(tmp_path):
    # timed sweeps run without a progress bar; the benchmark logs each part as it finishes
    stdout, results = run_quick("throughput", tmp_path / "tp", sweeps=False)
    names = [c["name"] for c in results["comparisons"]]
    assert any("numpy" in n for n in names) and any("torch" in n for n in names)
    assert any("solve_ivp" in n for n in names) and any("LinearSVC" in n for n in names)
    for c in results["comparisons"]:
        if "skipped" in c:  # an optional peer (the `bench` extra) is not installed
            continue
        assert {"name", "ours", "theirs", "unit", "ratio", "better"} <= c.keys()
        assert c["ratio"] == c["ours"] / c["theirs"]
    numpy_gd = next(c for c in results["comparisons"] if "numpy" in c["name"])
    assert numpy_gd["ratio"] > 1  # the sweep beats a NumPy loop per seed
    assert (tmp_path / "tp" / "ratios.png").stat().st_size > 10_000


def test_gpu_check_runs_on_cpu(tmp_path):
    stdout, results = run_quick("gpu_check", tmp_path / "gpu")
    assert results["gd_sweep"]["seeds"] == 8 and results["main_job_flow"]["failed_solves"] == 0
    assert "seeds/s" in stdout
