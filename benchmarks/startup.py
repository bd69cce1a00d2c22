"""Where the main job's seconds go, cold and warm, in fresh processes.

Runs `python -m benchmarks.jump_times` (or its `--quick` configuration) twice through
`benchmarks._startup_probe`, each time into a fresh `--out`: **cold** with an empty
persistent compilation cache, then **warm** with the cache the cold run left. Each run's
seconds are split into imports, tracing (jaxpr), lowering (MLIR), XLA compiles, persistent
cache reads, the arithmetic (the rest of the sweep), the figure, and the table and file
writes, from JAX's own monitoring events (`jax.monitoring`); `wall_seconds` is the process's
wall time as the parent measures it, Python's start-up included.

Writes `results.json` (`runs`: one per state, `cold` and `warm`, with the breakdown, the
largest programs by seconds and `program_bytes`, each stored program's
serialized size) and `startup.png` (stacked bars) to `--out`.

    python -m benchmarks.startup [--quick]
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._common import log, parser, pyplot, save_figure
from benchmarks._driver import finish, header

PARTS = ("imports", "trace", "lower", "xla_compile", "cache_read", "arithmetic", "figure",
         "table_and_writes", "other")  # fmt: skip


def one_run(state: str, cache: Path, job_args: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "probe.json"
        env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
        command = [sys.executable, "-m", "benchmarks._startup_probe", str(record),
                   *job_args, "--out", str(Path(tmp) / "out")]  # fmt: skip
        start = time.perf_counter()
        subprocess.run(command, env=env, check=True, capture_output=True, text=True)
        wall = time.perf_counter() - start
        data = json.loads(record.read_text())
    data.update(state=state, wall_seconds=wall)
    log(f"startup: {state}: {wall:.1f} s wall ("
        + ", ".join(f"{k} {data[k]:.1f}" for k in PARTS) + ")")  # fmt: skip
    return data


def run_benchmark(quick: bool = False, seed: int = 0) -> dict:
    job_args = ["--seed", str(seed)] + (["--quick"] if quick else [])
    with tempfile.TemporaryDirectory() as cache:
        runs = [one_run(state, Path(cache), job_args) for state in ("cold", "warm")]
    config = {"job": "python -m benchmarks.jump_times " + " ".join(job_args),
              "cold": "empty persistent compilation cache, fresh --out",
              "warm": "the cold run's cache, fresh --out"}  # fmt: skip
    return {**header("startup", config, seed), "runs": runs}


def table(results: dict) -> str:
    lines = ["| run | wall s | " + " | ".join(PARTS) + " | compiles | cache reads |",
             "|---|" + "--:|" * (len(PARTS) + 3)]  # fmt: skip
    for r in results["runs"]:
        lines.append(f"| {r['state']} | {r['wall_seconds']:.1f} | "
                     + " | ".join(f"{r[k]:.1f}" for k in PARTS)
                     + f" | {r['compiles']} | {r['cache_reads']} |")  # fmt: skip
    lines += ["", "| run | largest programs (phase:function, s) |", "|---|---|"]
    for r in results["runs"]:
        big = ", ".join(f"{k} {v:.1f}" for k, v in list(r["largest"].items())[:5])
        lines.append(f"| {r['state']} | {big} |")
    sizes = results["runs"][0].get("program_bytes", {})
    if sizes:
        lines += ["", "| stored program (record:name:signature) | serialized bytes |", "|---|--:|"]
        lines += [f"| {k} | {v:,} |" for k, v in sizes.items()]
    return "\n".join(lines)


def plot(results: dict, path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3))
    runs = results["runs"]
    left = np.zeros(len(runs))
    for i, part in enumerate(PARTS):
        width = np.array([max(r[part], 0.0) for r in runs])
        ax.barh([r["state"] for r in runs], width, left=left, color=f"C{i}", label=part)
        left += width
    ax.set_xlabel("seconds")
    ax.legend(fontsize=7, ncol=3, loc="lower right")
    ax.set_title("the main job: where the seconds go")
    save_figure(fig, path)


def main(argv=None) -> dict:
    p = parser("startup", __doc__.splitlines()[0], default_seeds=16)
    args = p.parse_args(argv)
    results = run_benchmark(args.quick, args.seed)
    finish(args.out, results, table(results), {"startup.png": plot})
    return results


if __name__ == "__main__":
    main()
