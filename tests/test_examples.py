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
    ],
)
def test_example_runs(name, expected):
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert expected in proc.stdout
