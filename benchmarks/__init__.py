"""Theory against simulation, side by side: one module per question, `python -m benchmarks.X`.

Benchmarks are programs, not library code, so they set one process-wide option the library
never sets: on CPU, one XLA host device per core (unless `XLA_FLAGS` already says how many),
so that `integrators.sweep` shards seeds over all cores. It must be set before JAX starts.
"""

import os

_flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in _flags:
    _count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    os.environ["XLA_FLAGS"] = f"{_flags} --xla_force_host_platform_device_count={_count}".strip()
