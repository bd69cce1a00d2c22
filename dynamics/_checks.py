"""Argument checks shared by the engine's public functions.

Shape problems raise `ValueError` at trace time. Value problems raise `ValueError` when the
value is concrete (eager calls, Python numbers) and go through `eqx.error_if` under `jit`.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


def is_concrete(x) -> bool:
    """True when `x` holds a value now (not a tracer inside `jit`/`vmap`)."""
    return not isinstance(x, jax.core.Tracer)


def check_value(x, ok, message: str):
    """Raise `ValueError(message)` when `ok` is False; under `jit` use `eqx.error_if`.

    `ok` is a boolean (or boolean array, reduced with `all`) computed from `x`. Returns `x`,
    which callers must use so that the runtime check stays in the traced program.
    """
    if is_concrete(ok):
        if not bool(np.all(np.asarray(ok))):
            raise ValueError(message)
        return x
    return eqx.error_if(x, ~jnp.all(ok), message)


def check_shape(name: str, x, shape: tuple) -> None:
    """Raise `ValueError` unless `x.shape` matches `shape` (`None` entries match anything)."""
    actual = jnp.shape(x)
    mismatch = len(actual) != len(shape) or any(
        s is not None and s != a for s, a in zip(shape, actual, strict=True)
    )
    if mismatch:
        expected = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
        raise ValueError(f"`{name}` must have shape {expected}, got {tuple(actual)}")


def check_alpha(alpha, dtype) -> None:
    """`alpha` must lie in (0, 1), and `alpha**2` (the scale of the first gradients) must not
    underflow `dtype`: alpha = 1e-30 is fine in float64 and underflows float32."""
    if not is_concrete(alpha):
        return
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise ValueError(f"`alpha` must lie in (0, 1), got {a}")
    tiny = float(jnp.finfo(dtype).tiny)
    if a * a < tiny:
        raise ValueError(
            f"`alpha`={a:g} underflows {jnp.dtype(dtype).name}: alpha**2 = {a * a:g} is below "
            f"its smallest normal number {tiny:g}. Enable float64 with "
            "`jax.config.update('jax_enable_x64', True)` and pass `dtype=jnp.float64`."
        )


def check_log_inv_alpha(log_inv_alpha):
    """log(1/alpha) must be finite and > 0; returns it as an array (`ValueError` when concrete,
    `eqx.error_if` under `jit`)."""
    tau = jnp.asarray(log_inv_alpha)
    ok = jnp.isfinite(tau) & (tau > 0)
    shown = float(tau) if is_concrete(tau) and tau.ndim == 0 else "an array"
    return check_value(tau, ok, f"`log_inv_alpha` must be finite and > 0, got {shown}")


def check_orthonormal_rows(name: str, X, atol: float = 1e-6):
    """Check that the rows of `X` (n, d) are orthonormal: X X^T = I_n to `atol`."""
    n = jnp.shape(X)[0]
    gram = X @ X.T
    err = jnp.max(jnp.abs(gram - jnp.eye(n, dtype=gram.dtype)))
    return check_value(
        X, err <= atol, f"the rows of `{name}` must be orthonormal (X X^T = I to {atol:g})"
    )


def check_representable(model) -> None:
    """Refuse parameters whose first gradients underflow their dtype.

    A neuron's gradient scales as |a_j| ||w_j||; in float32 a balanced init at alpha = 1e-30
    has gradients of 1e-60, which are exactly 0, so nothing would ever move.
    """
    if not is_concrete(model.a):
        return
    a = np.abs(np.asarray(model.a, dtype=np.float64))
    w = np.linalg.norm(np.asarray(model.W, dtype=np.float64), axis=-1)
    product = a * w
    tiny = float(jnp.finfo(model.a.dtype).tiny)
    if np.all(product[product > 0] < tiny) and np.any(product > 0):
        raise ValueError(
            f"the parameters underflow {model.a.dtype}: every |a_j| ||w_j|| is below {tiny:g}, "
            "so every gradient is 0. Enable float64 (`jax.config.update('jax_enable_x64', True)`)."
        )
