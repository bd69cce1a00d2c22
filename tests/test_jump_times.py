import numpy as np
from bench import run_quick

from benchmarks._common import code_version


def _quick(out):
    stdout, results = run_quick("jump_times", out)
    assert "median err" in stdout
    return results


def test_quick_run_end_to_end_and_resume(tmp_path):
    out = tmp_path / "jt"
    results = _quick(out)
    assert (out / "staircase.png").stat().st_size > 10_000
    keys = {"benchmark", "config", "environment", "wall_seconds", "summary", "runs", "sweep"}
    assert keys <= results.keys()
    assert results["environment"]["commit"] == code_version()  # which engine measured it
    assert results["config"]["base_seed"] == 0
    assert results["failed_solves"] == [0, 0] and results["failed_chunks"] == [[], []]
    summary = results["summary"]
    assert [e["log10_inv_alpha"] for e in summary] == [10, 30]
    for e in summary:
        assert {"median_rel_error", "max_rel_error", "median_solver_steps"} <= e.keys()
        assert e["failed_solves"] == 0 and e["jumps_not_crossed"] == 0
    # the limit theorem: the error shrinks as alpha does
    assert summary[1]["median_rel_error"] < summary[0]["median_rel_error"]
    # the finite-alpha prediction carries the O(1 / log(1/alpha)) corrections
    for e in summary:
        assert e["failed_predictions"] == 0
        assert e["median_rel_error_finite_alpha"] < e["median_rel_error"] / 3
        assert e["median_cost_rel_error_finite_alpha"] < 1e-2
    run = results["runs"][0]
    keys = {
        "seed",
        "log10_inv_alpha",
        "predicted_times",
        "predicted_times_finite_alpha",
        "group_sizes",
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
    assert again["sweep"]["loaded_chunks"] == 2
    untimed = [{k: v for k, v in e.items() if k != "wall_seconds"} for e in summary]
    assert untimed == [
        {k: v for k, v in e.items() if k != "wall_seconds"} for e in again["summary"]
    ]
