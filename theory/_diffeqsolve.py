"""`diffeqsolve`: `diffrax.diffeqsolve` whose own argument checks add no host callback, so
that JAX's persistent compilation cache can store the programs that call it."""

import contextlib

import diffrax
import equinox as eqx


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


def diffeqsolve(*args, **kwargs) -> diffrax.Solution:
    """`diffrax.diffeqsolve(*args, **kwargs)`, with diffrax's argument checks compiled
    without host callbacks.

    diffrax checks `SaveAt(ts=...)` (increasing, within [t0, t1]) and the sign of `dt0` with
    `eqx.error_if` whatever `throw` is; each is a host callback, and JAX's persistent cache
    does not store a program with one, so every run recompiled every flow. Here those checks
    turn their value into NaN instead. Every caller in the engine checks its time grid
    before the solve (`theory.checks.check_time_grid`), so they never fire; a solver failure
    still comes back in `result` (with `throw=False`, as the engine always calls it).

    >>> import jax.numpy as jnp
    >>> sol = diffeqsolve(diffrax.ODETerm(lambda t, y, a: -y), diffrax.Tsit5(), 0.0, 1.0,
    ...                   0.1, jnp.array(1.0), saveat=diffrax.SaveAt(ts=jnp.array([1.0])))
    >>> round(float(sol.ys[0]), 4)
    0.3679
    """
    with _library_checks_as_nan():
        return diffrax.diffeqsolve(*args, **kwargs)
