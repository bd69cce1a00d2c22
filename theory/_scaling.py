"""Exact rescaling by powers of two, for formulas that would over- or underflow.

A homogeneous quantity (a Gram matrix, a 2-homogeneous network output, a min-norm program) is
formed on inputs scaled by 2^-e to max |x| in [1, 2) and scaled back by the matching power:
multiplying by a power of two is exact, so nothing is lost where the value is representable.
`jnp.ldexp` is not used on differentiated values: its derivative at x = 0 reads 1, not 2^e.
"""

import jax
import jax.numpy as jnp
import numpy as np

from .checks import _real_numbers, is_concrete


def binary_exponent(*xs):
    """e with max |x| / 2^e in [1, 2) over all `xs` (0 where they are all zero or not
    finite); a traced int32, outside the gradient.

    **Arguments:**

    - `xs`: one or more arrays (or numbers, or nested lists) of real numbers, each of any
      shape with at least one entry.

    **Returns:** e = floor(log2 max |x|) over every entry of every `xs`, a 0-d int32 JAX array
    under `jax.lax.stop_gradient` (traced under `jit`); 0 where every entry is zero, or where
    the maximum is not finite: one NaN or inf entry anywhere makes e = 0.

    **Raises:** `ValueError` where no array is given, where an `x` is complex, boolean, a
    string, None or not numeric, or where an `x` is empty (JAX's own error: a max over no
    entries). Values are not checked.

    >>> int(binary_exponent(jnp.array([3.0, -0.5]))), int(binary_exponent(jnp.zeros(2)))
    (1, 0)
    """
    if not xs:
        raise ValueError("`binary_exponent` needs at least one array, got none")
    xs = [_real_numbers("x", x) for x in xs]
    top = jnp.max(jnp.stack([jnp.max(jnp.abs(x)) for x in xs]))
    top = jnp.where((top > 0) & jnp.isfinite(top), top, 1.0)
    return jax.lax.stop_gradient(jnp.floor(jnp.log2(top)).astype(jnp.int32))


def times_power_of_two(x, e):
    """x 2^e, exact (two factors, so that 2^e itself never overflows) and differentiable in x
    with derivative 2^e.

    **Arguments:**

    - `x`: real numbers of any shape (an array, traced or not, a number, a nested list);
      integers are computed in JAX's default float.
    - `e`: the exponent, one integer within int32: a Python or NumPy integer, an
      integer-valued float (2.0) or a 0-d integer array where concrete; of an integer dtype
      where traced.

    **Returns:** x 2^e, of `x`'s shape and floating dtype (JAX's default float for integer
    `x`), exact where it is representable.

    **Raises:** `ValueError` where `x` is complex, boolean, a string, None or not numeric,
    where `e` is a bool or not 0-d, where a concrete `e` is not an integer, or where a traced
    `e` is not of an integer dtype (an `e` beyond int32 raises `OverflowError`). Values of `x`
    are not checked.

    >>> times_power_of_two(jnp.array([3.0, 0.0]), -1).tolist()
    [1.5, 0.0]
    """
    x = _real_numbers("x", x)
    if isinstance(e, bool) or jnp.ndim(e) != 0:
        raise ValueError(f"`e` must be one integer, got {e!r}")
    if is_concrete(e):
        if not float(np.asarray(e)).is_integer():
            raise ValueError(f"`e` must be an integer, got {e!r}")
    elif not jnp.issubdtype(jnp.asarray(e).dtype, jnp.integer):
        raise ValueError(f"`e` must be an integer, got a traced {jnp.asarray(e).dtype}")
    e = jnp.asarray(e, jnp.int32)
    half = e // 2
    one = jnp.ones((), x.dtype)
    return x * jnp.ldexp(one, half) * jnp.ldexp(one, e - half)
