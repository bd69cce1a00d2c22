import json

import numpy as np
from bench import run_module


def _quick(out):
    proc = run_module("jump_times", "--quick", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "median err" in proc.stdout
    assert "2/2 chunks" in proc.stderr and "ETA" in proc.stderr  # progress
    return json.loads((out / "results.json").read_text())


def test_quick_run_end_to_end_and_resume(tmp_path):
    out = tmp_path / "jt"
    results = _quick(out)
    assert (out / "staircase.png").stat().st_size > 10_000
    assert {"benchmark", "config", "wall_seconds", "summary", "runs"} <= results.keys()
    assert results["config"]["base_seed"] == 0
    summary = results["summary"]
    assert [e["log10_inv_alpha"] for e in summary] == [10, 30]
    for e in summary:
        assert {"median_rel_error", "max_rel_error", "median_solver_steps"} <= e.keys()
        assert e["failed_solves"] == 0 and e["jumps_not_crossed"] == 0
    # the limit theorem: the error shrinks as alpha does
    assert summary[1]["median_rel_error"] < summary[0]["median_rel_error"]
    run = results["runs"][0]
    keys = {
        "seed",
        "log10_inv_alpha",
        "predicted_times",
        "measured_times",
        "predicted_cost",
        "measured_cost",
        "y",
        "signs",
        "directions",
    }
    assert keys <= run.keys()
    n = results["config"]["n"]
    assert np.asarray(run["directions"]).shape == (results["config"]["width"], n)
    assert len(run["predicted_times"]) == len(run["measured_times"])

    # the same command again loads every finished chunk and reproduces the results
    again = _quick(out)
    assert again["sweep"]["computed_chunks"] == 0
    assert again["sweep"]["loaded_chunks"] == results["sweep"]["computed_chunks"]
    untimed = [{k: v for k, v in e.items() if k != "wall_seconds"} for e in summary]
    assert untimed == [
        {k: v for k, v in e.items() if k != "wall_seconds"} for e in again["summary"]
    ]
