"""The roofline part of `benchmarks.throughput`: the GD sweep's achieved FLOP/s and memory traffic
against a measured matmul peak and STREAM-like triad bandwidth on this machine."""

import jax
import jax.numpy as jnp

from benchmarks import _gd_sweep as gd_bench
from benchmarks._common import (
    best_seconds,
    comparison_entry,
)

M_N_BYTES = 8 * gd_bench.M * gd_bench.N  # one seed's float64 data-basis weights


def peak_flops(size: int = 2048) -> float:
    A = jax.random.normal(jax.random.PRNGKey(0), (size, size))
    f = jax.jit(lambda A: A @ A)
    return 2 * size**3 / best_seconds(lambda: f(A))


def triad_bandwidth(elements: int, iterations: int) -> float:
    """Bytes per second of the triad x <- 0.5 x + c (24 bytes per element: x and c read, x
    written) on `elements` float64 entries per device, on all local devices at once
    (`jax.pmap`, the arrays placed on their devices beforehand), repeated inside one compiled
    loop. Timed at `iterations` and at twice as many; the difference removes the call's fixed
    costs (dispatch, the copy of x on entry)."""
    devices = jax.local_devices()
    x = jax.pmap(lambda v: v, devices=devices)(jnp.ones((len(devices), elements)))

    def timed(count):
        step = jax.pmap(
            lambda x, c: jax.lax.fori_loop(0, count, lambda _, x: 0.5 * x + c, x),
            devices=devices,
        )
        return best_seconds(lambda: step(x, x))

    extra = max(timed(2 * iterations) - timed(iterations), 1e-9)
    return 24.0 * elements * iterations * len(devices) / extra


def compare_bandwidth(gd: dict, quick: bool) -> tuple[list, dict]:
    """The GD sweep's least memory traffic against the triad on its working set and on large
    arrays."""
    # the sweep's vmapped weights, split between the triad's two arrays x and c
    working = max(1, gd["batch_size"] * M_N_BYTES // 16)
    large = 2**20 if quick else 2**23  # 8 MiB / 64 MiB per array
    small_bw = triad_bandwidth(working, 200 if quick else 2000)
    large_bw = triad_bandwidth(large, 3 if quick else 10)
    achieved = gd["seed_epochs_per_s"] * gd_bench.BYTES_PER_EPOCH
    detail = {
        "working_set_elements_per_device": working,
        "triad_working_set_bytes_per_s": small_bw,
        "triad_large_bytes_per_s": large_bw,
        "large_elements_per_device": large,
        "gd_sweep_bytes_per_s": achieved,
        "gd_bytes_per_epoch": gd_bench.BYTES_PER_EPOCH,
    }
    rows = [
        comparison_entry(
            "GD sweep vs bandwidth peak",
            achieved,
            small_bw,
            "B/s",
            "higher",
            note="least traffic of the sweep against the triad on its working set",
        ),
        comparison_entry(
            "GD sweep vs bandwidth peak (large arrays)",
            achieved,
            large_bw,
            "B/s",
            "higher",
            note="against the triad on 64 MiB arrays (main memory)",
        ),
    ]
    return rows, detail
