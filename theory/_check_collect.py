"""Checks of traced values: recorded inside `collect_checks` (the traced function returns them;
no host callback in the program) or added as `eqx.error_if`."""

import contextlib

import equinox as eqx
import jax
import jax.numpy as jnp

_COLLECTORS: list[list] = []  # the active `collect_checks` contexts, innermost last


@contextlib.contextmanager
def collect_checks(*traced):
    """Within this context, a check of a traced value records `(ok, message)` in the list it
    yields instead of adding `eqx.error_if` (a host callback) to the program: the caller
    returns the `ok`s from the traced function and reports a failure itself, and the program
    has no callback, so JAX's persistent cache can store it. `integrators.sweep` traces every
    `make` and `run` this way and records a seed whose check failed as a failed chunk with the
    check's message. Checks of concrete values still raise at once.

    Only checks traced at the level of `traced` (the arguments of the function being traced)
    are collected: a check inside a transformation within it (a `jax.vmap` in the function)
    cannot leave that scope and stays an `eqx.error_if`.

    >>> from theory.checks import check_value
    >>> def f(v):
    ...     with collect_checks(v) as found:
    ...         v = check_value(v, v > 0, "`v` must be > 0")
    ...     return v, jnp.stack([ok for ok, _ in found])
    >>> jax.jit(f)(-1.0)[1].tolist()
    [False]
    """
    leaves = [x for x in jax.tree_util.tree_leaves(traced) if isinstance(x, jax.core.Tracer)]
    # the traces alive now (the arguments', the current one and its parents: a value closed
    # over from an enclosing jit, or unbatched under `lax.map(batch_size=...)`): a check at
    # one of them can be returned; one traced inside a transformation opened later cannot
    traces = _live_traces()
    for x in leaves:
        if not any(x._trace is t for t in traces):
            traces.append(x._trace)
    found: list = []
    _COLLECTORS.append((traces, found))
    try:
        yield found
    finally:
        _COLLECTORS.pop()


def _live_traces() -> list:
    """The current trace and its parents (JAX's trace context; empty if this version of JAX
    keeps it elsewhere, and then only the arguments' traces count)."""
    from jax._src import core  # the trace context has no public name

    ctx = getattr(core, "trace_ctx", None)
    t, out = getattr(ctx, "trace", None), []
    while t is not None and len(out) < 64:
        out.append(t)
        t = getattr(t, "parent_trace", None)
    return out


def _traced_check(x, ok, message: str):
    """`x`, with the traced check `ok` either recorded (`collect_checks`, at its level) or
    added as `eqx.error_if`."""
    ok = jnp.all(ok)
    if _COLLECTORS:
        traces, found = _COLLECTORS[-1]
        if any(getattr(ok, "_trace", None) is t for t in traces):
            found.append((ok, message))
            return x
    # the user's EQX_ON_ERROR (read at import): `integrators.sweep` turns the checks of the
    # libraries it calls into NaN while it traces, to keep its programs cacheable, never ours
    on_error = getattr(getattr(eqx, "_config", None), "EQX_ON_ERROR", "default")
    return eqx.error_if(jnp.asarray(x), ~ok, message, on_error=on_error)
