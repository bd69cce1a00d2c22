"""Running a benchmark module end to end, as a user would (`python -m benchmarks.X`)."""

import json
import os
import subprocess
import sys


def xla_flags(devices: int) -> str:
    """XLA_FLAGS for a subprocess with `devices` host devices, compiling as the tests do."""
    flags = os.environ.get("TESTS_XLA_FLAGS", "")
    return f"{flags} --xla_force_host_platform_device_count={devices}".strip()


def run_module(module: str, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    # conftest's cheap-compile flags suit compile-bound runs (the default run's quick main
    # job); the slow benchmarks integrate long and run optimized (any_model passed its 600 s
    # only so)
    if module != "jump_times" and env.get("XLA_FLAGS") == env.get("TESTS_XLA_FLAGS"):
        del env["XLA_FLAGS"]
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
