"""What every benchmark shares: the CLI, process set-up, float64, timing, figures and results."""

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


def compile_cache_dir() -> Path:
    """Where the benchmarks keep JAX's persistent compilation cache: the user's cache folder
    (`$XDG_CACHE_HOME`, else `~/.cache`), under `saddle_dynamics/jax`."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "saddle_dynamics" / "jax"


def compile_cache(enabled: bool = True) -> Path | None:
    """Turn on JAX's persistent compilation cache in `compile_cache_dir()`, for programs of
    any compile time and size, so that rerunning a benchmark with the same options reads its
    programs back instead of compiling them. JAX does not store programs that contain host
    callbacks. The engine adds none: inside a sweep its argument checks are collected
    (`theory.checks.collect_checks`), and diffrax's own checks are compiled without one
    (`theory.numerics.diffeqsolve`). A process-wide setting, made by the benchmarks' CLI
    only; `enabled=False` leaves JAX as it is, and so does a cache folder that cannot be
    created (with a warning). Returns the folder, or None."""
    if not enabled:
        return None
    path = compile_cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        log(f"compile cache off: cannot create {path} ({err})")
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return path


class _Parser(argparse.ArgumentParser):
    """Parses, then applies `--no-compile-cache` (the cache must be set before any compile)."""

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(args, namespace)
        compile_cache(not parsed.no_compile_cache)
        if parsed.fresh:
            forget_sweeps(parsed.out)
        return parsed


def forget_sweeps(out: Path) -> None:
    """Remove every sweep's chunks and manifest under `out` (`--fresh`): a rerun into the same
    folder then computes everything again instead of loading the first run's chunks."""
    for manifest in sorted(Path(out).rglob("sweep.json")) if Path(out).exists() else ():
        shutil.rmtree(manifest.parent / "chunks", ignore_errors=True)
        manifest.unlink()
        log(f"--fresh: removed the sweep in {manifest.parent}")


def parser(name: str, description: str, default_seeds: int) -> argparse.ArgumentParser:
    """The common CLI: `--out`, `--seeds`, `--seed`, `--quick`, `--fresh`, `--no-compile-cache`.
    Parsing turns on the persistent compilation cache (`compile_cache`) unless
    `--no-compile-cache`, and with `--fresh` removes the sweeps under `--out`."""
    p = _Parser(prog=f"python -m benchmarks.{name}", description=description)
    p.add_argument("--out", type=Path, default=Path("results") / name, help="output folder")
    p.add_argument("--seeds", type=int, default=default_seeds, help="number of seeds")
    p.add_argument("--seed", type=int, default=0, help="base seed")
    p.add_argument("--quick", action="store_true", help="a small, fast configuration")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="recompute every sweep chunk (a rerun into the same --out loads the chunks of the "
        "earlier run and says so)",
    )
    p.add_argument(
        "--no-compile-cache",
        action="store_true",
        help="do not use the persistent compilation cache ($XDG_CACHE_HOME or ~/.cache, under"
        " saddle_dynamics/jax)",
    )
    return p


def host_devices() -> None:
    """On CPU, one XLA host device per core (unless `XLA_FLAGS` already says how many), so that
    `integrators.sweep` shards seeds over all cores. Called first thing in every benchmark's
    `main`: it only takes effect before JAX starts its backend, and it is a process-wide
    setting that the library itself never makes."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" in flags:
        return
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={count}".strip()


def enable_float64() -> None:
    """Benchmarks run in float64 (the library never flips this itself)."""
    jax.config.update("jax_enable_x64", True)


def log(message: str) -> None:
    """Progress and notes go to stderr; stdout holds the table."""
    print(message, file=sys.stderr, flush=True)


class Timer:
    """Wall-clock seconds since construction."""

    def __init__(self):
        self.start = time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() - self.start


def best_seconds(fn, repeats: int = 3) -> float:
    """Warm `fn` up once (compilation), then the best wall time of `repeats` calls, each
    blocked until its results are ready."""
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t = Timer()
        jax.block_until_ready(fn())
        times.append(t())
    return min(times)


def pyplot():
    """matplotlib.pyplot on the non-interactive Agg backend: benchmarks only write files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def two_per_decade(steps: int) -> int:
    """Checkpoints for log-spaced GD records with two per decade of steps, so that the last
    three span the last decade (see `frozen_over_last_decade`)."""
    return 2 * round(math.log10(steps)) + 1


def frozen_over_last_decade(patterns):
    """Whether the activation pattern stayed the same over the last three checkpoints of a
    `two_per_decade` record, i.e. over the last decade of steps."""
    last = patterns[-3:]
    return jnp.all(last == last[-1])


def save_figure(fig, path) -> None:
    """Lay out, write (120 dpi) and close a figure."""
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    pyplot().close(fig)


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, Path):
        return str(x)
    if isinstance(x, np.ndarray | jax.Array):
        return _jsonable(np.asarray(x).tolist())
    if isinstance(x, np.generic):
        return _jsonable(x.item())
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def from_jsonable(x):
    """`results.json` read back as it was written: "inf" / "-inf" are floats again (NaN stays
    None, which the tables print as missing)."""
    if isinstance(x, dict):
        return {k: from_jsonable(v) for k, v in x.items()}
    if isinstance(x, list):
        return [from_jsonable(v) for v in x]
    if x in ("inf", "-inf"):
        return float(x)
    return x


def fit_slope(x, y) -> float:
    """Least-squares slope of log y against log x (finite, positive entries only)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(y) & (y > 0)
    if keep.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)[0])


def code_version() -> str | None:
    """The engine's git commit (short hash, `+modified` when the checkout has uncommitted
    changes to tracked files), or None outside a git checkout."""
    here = Path(__file__).resolve().parents[1]

    def git(*args):
        run = subprocess.run(["git", "-C", str(here), *args], capture_output=True, text=True)
        return run.stdout.strip() if run.returncode == 0 else None

    try:
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except OSError:  # no git on this machine
        return None
    return None if commit is None else commit + ("+modified" if dirty else "")


def environment() -> dict:
    """What ran: Python, JAX, backend, devices and the engine's commit (`code_version`)."""
    return {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "cpu_count": os.cpu_count(),
        "commit": code_version(),
    }


def write_results(out: Path, results: dict) -> Path:
    """Write `results.json` atomically (NaN -> null, inf -> "inf"); returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(_jsonable(results), indent=1))
    tmp.replace(path)
    return path


def comparison_entry(name, ours, theirs, unit, better, **extra) -> dict:
    """One row of a side-by-side comparison: `ratio` = ours / theirs, `better` "higher" or
    "lower"."""
    return {
        "name": name,
        "ours": ours,
        "theirs": theirs,
        "unit": unit,
        "ratio": ours / theirs,
        "better": better,
        **extra,
    }
