"""Every example runs as a user would run it, and prints what its docstring promises."""

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, expected",
    [
        ("jump_process.py", "median relative jump-time error"),
        ("vanishing_limit.py", "alpha = 1e-1000"),
        ("max_margin.py", "1 - cos(W_t, W*)"),
        ("staircase.py", "predicted plateaus"),
        ("saddle_hessians.py", "equals Algorithm 1's rate"),
        ("diagonal_networks.py", "alpha = 1e-1000: max relative jump-time error"),
        ("teacher_student.py", "saddle of the first plateau"),
        ("deep_relu.py", "events against steps"),
        ("spectra.py", "W1(SLQ, dense)"),
    ],
)
def test_example_runs(name, expected, tmp_path):
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert expected in proc.stdout
    assert list(tmp_path.glob("*.png")), "every example draws its figure"


def test_every_example_is_tested_and_in_the_gallery():
    from benchmarks import gallery

    cases = next(m for m in test_example_runs.pytestmark if m.name == "parametrize")
    tested = {case[0] for case in cases.args[1]}
    assert {p.name for p in gallery.examples()} == tested
    assert gallery.stale() == [], "run python -m benchmarks.gallery"
