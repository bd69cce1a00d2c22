"""How many kink entries may slide at once in `gradient_flow`, and growing that number.

The sliding solve carries a capacity x capacity matrix (`integrators._sliding`), copied at
every trial step (a rejected step keeps the last one): at 1024 slots that is 8 MiB a step,
which cost 3-4 ms a step on a 16-16-16 ReLU MLP whose own field costs 60 us. So a solve
starts with `FIRST_CAPACITY` slots (or `max_sliding`, when given), and where more entries
want to slide than it has, the solve stops at that step's start (`RESULTS.kink_limited`)
and `regrow` continues it from there with `GROWTH` times the slots (a new program, compiled
once per capacity), up to `MAX_CAPACITY` (128 MiB a copy: memory is the bound). The pieces
are joined at the stop: its time is a save time of neither. Under an outer `jax.jit` the
stop cannot be looked at, and the solution stays `kink_limited` (pass `max_sliding`).
"""

import jax
import jax.numpy as jnp
import numpy as np

from theory import RESULTS
from theory.checks import is_concrete

CHUNK = 8  # Jacobian columns formed at once (the slots are a multiple of it)
FIRST_CAPACITY = 32
GROWTH = 4
MAX_CAPACITY = 4096


def capacity_for(entries: int, wanted: int) -> int:
    """The number of sliding slots: `wanted`, at most the loss's site `entries`, rounded up
    to a multiple of `CHUNK`.

    >>> capacity_for(3840, 32), capacity_for(20, 32), capacity_for(20, 9)
    (32, 24, 16)
    """
    wanted = min(entries, wanted)
    return max(CHUNK, -(-wanted // CHUNK) * CHUNK)


def _stitch(a, b, k):
    """The first k saves of `a`, then `b`'s saves after its first (the stop); `None` stays."""

    def join(x, y):
        if not isinstance(x, jax.Array):  # a model's functions and static fields
            return x
        return jnp.concatenate([x[:k], y[1:]])

    return None if a is None else jax.tree_util.tree_map(join, a, b)


def regrow(first, rerun, ts, capacity):
    """Continue a solve that stopped `kink_limited` because too few slots, with more.

    `rerun(model, ts, capacity)` solves from `model` over the save times `ts`; `first` is
    the solution over `ts` with `capacity` slots."""
    out = first
    while (
        is_concrete(out.result._value)
        and bool(out.result == RESULTS.kink_limited)
        and bool(jnp.isfinite(out.stats["kink_time"]))
        and capacity < MAX_CAPACITY
    ):
        capacity = min(capacity * GROWTH, MAX_CAPACITY)
        stop = out.stats["kink_time"]
        k = int(np.sum(np.asarray(ts) <= float(stop)))
        rest = jnp.concatenate([jnp.reshape(stop, (1,)).astype(ts.dtype), ts[k:]])
        second = rerun(out.model, rest, capacity)
        out = _merge(out, second, k, ts)
    return out


def _merge(first, second, k, ts):
    def tree(a, b):
        return _stitch(a, b, k)

    stats = dict(second.stats)
    for key in ("num_steps", "num_accepted_steps", "num_rejected_steps", "sliding_entries",
                "kink_crossings"):  # fmt: skip
        stats[key] = first.stats[key] + second.stats[key]
    stats["max_sliding"] = jnp.maximum(first.stats["max_sliding"], second.stats["max_sliding"])
    stats["regrown"] = first.stats.get("regrown", 0) + 1
    return type(first)(
        ts=ts,
        loss=tree(first.loss, second.loss),
        grad_norm=tree(first.grad_norm, second.grad_norm),
        observables=tree(first.observables, second.observables),
        log_scale=tree(first.log_scale, second.log_scale),
        model=second.model,
        trajectory=tree(first.trajectory, second.trajectory),
        steady_time=second.steady_time,
        time_scale=second.time_scale,
        result=second.result,
        stats=stats,
    )
