"""Running a benchmark module end to end, as a user would (`python -m benchmarks.X`)."""

import json
import os
import subprocess
import sys


def run_module(module: str, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if env.get("XLA_FLAGS") == "--xla_backend_optimization_level=0":  # conftest's, for the
        del env["XLA_FLAGS"]  # compile-bound unit tests; a benchmark runs long, optimized
    return subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def run_quick(module: str, out, *args: str) -> tuple[str, dict]:
    """`--quick --out out`: checks that it succeeded; returns (stdout, results)."""
    proc = run_module(module, "--quick", "--out", str(out), *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, json.loads((out / "results.json").read_text())
