"""Multi-host sweeps for real, on one machine: two processes with `jax.distributed` (a localhost
coordinator, CPU collectives over gloo) against one process. Slow: `pytest -m slow`."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from bench import xla_flags

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
JOB = str(HERE / "multihost_job.py")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _start(port, pid, out, result, *extra, processes=2):
    env = dict(os.environ, PYTHONPATH=f"{HERE.parent}{os.pathsep}{HERE}")
    env["XLA_FLAGS"] = xla_flags(1)
    cmd = [sys.executable, JOB, str(port), str(pid), str(out), str(result), *extra]
    cmd += ["--processes", str(processes)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(procs, timeout=240):
    outs = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, stderr.decode()[-3000:]
        outs.append(json.loads(stdout.decode().strip().splitlines()[-1]))
    return outs


def _same(path_a, path_b):
    a, b = np.load(path_a), np.load(path_b)
    assert sorted(a.files) == sorted(b.files)
    for k in a.files:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_two_processes_give_the_results_of_one(tmp_path):
    one = _finish([_start(_port(), 0, "-", tmp_path / "one.npz", processes=1)])
    assert one[0]["devices"] == 1
    port = _port()
    two = _finish([_start(port, i, "-", tmp_path / "two.npz") for i in range(2)])
    assert [r["devices"] for r in two] == [2, 2] and [r["process"] for r in two] == [0, 1]
    _same(tmp_path / "one.npz", tmp_path / "two.npz")


def test_a_killed_process_and_the_rerun_resumes(tmp_path):
    full = _finish(
        [_start(_port(), 0, "-", tmp_path / "full.npz", "--steps", "20000", processes=1)]
    )
    assert full[0]["computed"] == 8
    out = tmp_path / "killed"
    port = _port()
    procs = [_start(port, i, out, tmp_path / "never.npz", "--steps", "20000") for i in range(2)]
    chunks = out / "chunks"
    deadline = time.time() + 240
    while time.time() < deadline and len(list(chunks.glob("*.npz"))) < 2:
        time.sleep(0.05)
    procs[1].send_signal(signal.SIGKILL)  # one host dies mid-sweep
    procs[1].wait()
    try:  # its peer is left waiting in a collective, or fails: either way it stops here
        procs[0].wait(timeout=20)
    except subprocess.TimeoutExpired:
        procs[0].kill()
        procs[0].wait()
    finished = sorted(chunks.glob("*.npz"))
    assert 2 <= len(finished) < 8, "the kill must land midway"
    port = _port()
    resumed = _finish(
        [_start(port, i, out, tmp_path / "resumed.npz", "--steps", "20000") for i in range(2)]
    )
    assert resumed[0]["loaded"] >= len(finished) and resumed[0]["computed"] <= 8 - len(finished)
    assert resumed[0]["loaded"] + resumed[0]["computed"] == 8
    _same(tmp_path / "full.npz", tmp_path / "resumed.npz")
