"""The memory a program can use, for the checks that refuse a run before it would not fit
(`check_memory` for finite-sample flows, `check_dense_memory` for dense Hessians)."""

import os

import jax


def available_bytes() -> int:
    """The memory of the default device: its `bytes_limit`, or the host's physical memory on
    CPU."""
    device = jax.devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"])
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
