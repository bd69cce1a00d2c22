"""One driver for every benchmark's sweep and results: whatever a benchmark computes, its
`results.json` records the config with the base seed, the environment, the sweep's statistics,
its failed chunks and the count of failed solves."""

import numpy as np

from benchmarks._common import environment, log, write_results
from integrators import sweep


def header(name: str, config: dict, base_seed: int) -> dict:
    """The first keys of every `results.json`: benchmark name, config (with the base seed) and
    environment."""
    return {
        "benchmark": name,
        "config": {**config, "base_seed": base_seed},
        "environment": environment(),
    }


def run_sweep(
    run, *, make, seeds, grid, static, out, name, base_seed, config=None, ok=(), **options
):
    """`integrators.sweep` with the benchmark's settings (`options`: its `chunk_size` and
    `batch_size`); returns `(result, record)` where `record` holds the sweep's statistics,
    failed chunks and, over the outputs named in `ok` (boolean per-seed success flags), the
    number of failed solves per grid point."""
    result = sweep(
        run,
        make=make,
        seeds=seeds,
        grid=grid,
        static=static,
        out=out,
        name=name,
        config=config,
        base_seed=base_seed,
        **options,
    )
    failed_solves = [int(sum(np.sum(~np.asarray(o[k], bool)) for k in ok)) for o in result.outputs]
    record = {
        "sweep": {
            "devices": result.devices,
            "batch_size": result.batch_size,
            "chunk_size": result.chunk_size,
            "computed_chunks": result.computed_chunks,
            "loaded_chunks": result.loaded_chunks,
            "reloaded": result.loaded_chunks > 0,
            "wall_seconds": result.wall_seconds,
            "point_seconds": result.point_seconds,
        },
        "failed_chunks": result.failed,
        "failed_solves": failed_solves,
    }
    if result.loaded_chunks:
        # the per-point seconds of loaded chunks are those of the run that computed them
        log(
            f"{name}: {result.loaded_chunks} of {result.loaded_chunks + result.computed_chunks} "
            f"chunks loaded from an earlier run in {out} (their seconds are that run's; "
            "--fresh recomputes)"
        )
    if any(failed_solves) or any(result.failed):
        log(f"{name}: failed solves per point {failed_solves}, failed chunks {result.failed}")
    return result, record


def finish(out, results: dict, table: str, figures: dict) -> None:
    """Print the table, write `results.json` (keys starting with `_` are in-memory only) and
    the figures (`{file name: function(results, path)}`), and say where they went."""
    print(table)
    path = write_results(out, {k: v for k, v in results.items() if not k.startswith("_")})
    for file, draw in figures.items():
        draw(results, out / file)
    log(f"wrote {path}" + "".join(f", {file}" for file in figures) + f" to {out}")
