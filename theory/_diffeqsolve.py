"""`diffeqsolve`: `diffrax.diffeqsolve` whose own argument checks add no host callback, so
that JAX's persistent compilation cache can store the programs that call it."""

import contextlib

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from .checks import _shown, check_value


@contextlib.contextmanager
def _library_checks_as_nan():
    """While tracing inside this context, `eqx.error_if` checks that follow the process-wide
    setting (`EQX_ON_ERROR`, default "raise") turn their value into NaN instead of adding a
    host callback. The engine's own checks (`theory.checks`) pass the user's setting
    explicitly and stay as they are. A no-op where equinox keeps the setting elsewhere."""
    errors = getattr(eqx, "_errors", None)
    names = ("EQX_ON_ERROR", "branched_error_if_impl_jit", "branched_error_if_impl")
    saved = {name: getattr(errors, name, None) for name in names}
    if any(v is None for v in saved.values()):
        yield
        return
    # equinox traces each check through a jitted helper whose trace JAX caches for the
    # process: one traced before in "raise" mode would be reused, callback and all; the
    # unjitted helper is traced afresh
    errors.EQX_ON_ERROR = "nan"
    errors.branched_error_if_impl_jit = saved["branched_error_if_impl"]
    try:
        yield
    finally:
        errors.EQX_ON_ERROR = saved["EQX_ON_ERROR"]
        errors.branched_error_if_impl_jit = saved["branched_error_if_impl_jit"]


def diffeqsolve(
    terms, solver, t0, t1, dt0, y0, args=None, *, saveat=None, grid_checked=False, **kwargs
):
    """`diffrax.diffeqsolve` forward in time, with diffrax's argument checks compiled without
    host callbacks.

    diffrax checks `SaveAt(ts=...)` (increasing, within [t0, t1]) and the sign of `dt0` with
    `eqx.error_if` whatever `throw` is; each is a host callback, and JAX's persistent cache
    does not store a program with one, so every run recompiled every flow. Here the same
    conditions (and t0 <= t1: this wrapper integrates forward only) are checked by the
    engine's checks first (`ValueError` when concrete; under jit an `eqx.error_if` that
    follows `EQX_ON_ERROR`, or collected inside `integrators.sweep`), and diffrax's own
    copies, which then cannot fire, turn their value into NaN instead of adding a callback.
    `grid_checked=True` skips the engine's checks too, for a caller that has made them
    already (the flows check their time grid with `theory.checks.check_time_grid`).
    Everything else is `diffrax.diffeqsolve`'s (pass `throw=False` to get solver failures in
    `result`).

    **Arguments:**

    - `terms`: the terms, as for `diffrax.diffeqsolve` (e.g. a `diffrax.ODETerm`).
    - `solver`: a diffrax solver.
    - `t0`: the start time, finite.
    - `t1`: the end time, >= `t0` (forward only; its finiteness is not checked).
    - `dt0`: the first step, > 0, or None (the step-size controller picks it).
    - `y0`: the initial state, a pytree.
    - `args`: passed to the terms (default None).
    - `saveat`: a `diffrax.SaveAt` (default None: `SaveAt(t1=True)`); the `ts` of each of its
      `SubSaveAt`s must be nondecreasing and lie in [t0, t1].
    - `grid_checked`: skip the engine's checks of `t0`, `t1`, `dt0` and `saveat` (default
      False).
    - `kwargs`: passed on to `diffrax.diffeqsolve` (`stepsize_controller`, `max_steps`,
      `throw`, `event`, ...).

    **Returns:** the `diffrax.Solution`. With `throw=False`, a failed solve shows in its
    `result`. With diffrax's default `throw=True` a failed solve raises (below).

    **Raises:** `ValueError` where a concrete `t0` is not finite, `t1` < `t0`, `dt0` <= 0, or
    a `saveat` time is out of order or outside [t0, t1]; where they are traced, through
    `eqx.error_if` following `EQX_ON_ERROR` (or recorded inside `collect_checks`). None of
    these with `grid_checked=True`. With `throw=True` (diffrax's default), a solve that
    fails: `ValueError` when run eagerly, through `eqx.error_if` under `jit`.
    `diffrax.diffeqsolve`'s own errors at trace time (a solver that does not fit `terms`,
    say) pass through.

    >>> import jax.numpy as jnp
    >>> sol = diffeqsolve(diffrax.ODETerm(lambda t, y, a: -y), diffrax.Tsit5(), 0.0, 1.0,
    ...                   0.1, jnp.array(1.0), saveat=diffrax.SaveAt(ts=jnp.array([1.0])))
    >>> round(float(sol.ys[0]), 4)
    0.3679
    >>> diffeqsolve(diffrax.ODETerm(lambda t, y, a: -y), diffrax.Tsit5(), 0.0, 1.0,
    ...             0.1, jnp.array(1.0), saveat=diffrax.SaveAt(ts=jnp.array([2.0])))
    Traceback (most recent call last):
    ValueError: `saveat.ts` must be nondecreasing and lie in [t0, t1] = [0, 1], got an array
    """
    saveat = diffrax.SaveAt(t1=True) if saveat is None else saveat
    if not grid_checked:
        t0 = _check_grid(t0, t1, dt0, saveat)
    # diffrax's own failure check would be turned into NaN with the argument checks: the
    # solve runs with throw=False and a failure is raised here, by the engine's check
    throw = kwargs.pop("throw", True)
    with _library_checks_as_nan():
        sol = diffrax.diffeqsolve(
            terms, solver, t0, t1, dt0, y0, args, saveat=saveat, throw=False, **kwargs
        )
    if not throw:
        return sol
    ok = diffrax.is_okay(sol.result)  # successful, or stopped by an event
    message = (
        "the solve failed (diffrax's result is not successful: a spent `max_steps`, a step "
        "size that fell to zero, or a non-finite state); pass throw=False to read `result`"
    )
    # through every array of the solution (saved values, times, stats, dense output): a
    # check on a value the caller does not use is compiled away
    arrays, rest = eqx.partition(sol, eqx.is_array)
    arrays = jax.tree_util.tree_map(lambda x: check_value(x, ok, message), arrays)
    return eqx.combine(arrays, rest)


def _check_grid(t0, t1, dt0, saveat):
    """t0 with the checks of `diffeqsolve` threaded through it."""
    t0 = check_value(t0, jnp.isfinite(t0), f"`t0` must be finite, got {_shown(t0)}")
    # each check is threaded through t0, so that it stays in the traced program
    t0 = check_value(t0, t0 <= t1, f"`t1` must be >= t0 (forward in time), got {_shown(t1)}")
    if dt0 is not None:
        t0 = check_value(t0, dt0 > 0, f"`dt0` must be > 0 or None, got {_shown(dt0)}")
    subs = jax.tree_util.tree_leaves(
        saveat.subs, is_leaf=lambda x: isinstance(x, diffrax.SubSaveAt)
    )
    for ts in (sub.ts for sub in subs if sub.ts is not None):
        ok = jnp.all(ts[1:] >= ts[:-1]) & jnp.all((ts >= t0) & (ts <= t1))
        message = (
            "`saveat.ts` must be nondecreasing and lie in [t0, t1] = "
            f"[{_shown(t0)}, {_shown(t1)}], got {_shown(ts)}"
        )
        t0 = check_value(t0, ok, message)
    return t0
