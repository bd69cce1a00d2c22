"""Dual kernels of the multi-index paper's activations under Gaussian inputs.

k(rho) = E sigma(u.x) sigma(v.x) for unit u, v with <u, v> = rho and x ~ N(0, I_d). For |z| it
is the arc-cosine kernel (2/pi)(sqrt(1 - rho^2) + rho arcsin rho) in closed form; in general
it is the Hermite series k(rho) = sum_k c_k^2 rho^k of `hermite_coefficients`, truncated at
degree 40 with the truncation error bounded by E sigma^2 - sum_{k<=40} c_k^2 for |rho| <= 1.

Paper: *Learning Orthogonal Multi-Index Models Beyond Small Initialization: Incremental
Learning, Competitive Dynamics and Symmetry* (NeurIPS 2026, arXiv:2609.10879).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._hermite import hermite_coefficients, second_moment
from .checks import _real_numbers, check_activation, check_value, is_concrete

SERIES_DEGREE = 40


@jax.custom_jvp
def arccos_kernel(rho):
    """(2/pi)(sqrt(1 - rho^2) + rho arcsin rho) = E|u.x||v.x| for unit u, v with <u, v> = rho.

    Its derivative (2/pi) arcsin rho is carried explicitly (`jax.custom_jvp`), so it stays
    finite at rho = +-1 where sqrt(1 - rho^2) alone has an infinite slope.

    >>> float(jax.grad(arccos_kernel)(1.0))
    1.0
    """
    rho = _check_correlation(rho)
    rho = jnp.clip(rho, -1.0, 1.0)  # rounding only: |rho| <= 1 + 1e-6 was checked
    return (2.0 / math.pi) * (jnp.sqrt(1.0 - rho * rho) + rho * jnp.arcsin(rho))


def _check_correlation(rho):
    """A correlation of unit vectors: finite, |rho| <= 1 up to rounding (1e-6)."""
    _real_numbers("rho", rho)  # None, strings and complex are refused by name
    xp = jnp if not is_concrete(rho) else np
    r = xp.asarray(rho)
    shown = rho if is_concrete(rho) else "a traced value"
    return check_value(
        rho,
        xp.isfinite(r) & (xp.abs(r) <= 1.0 + 1e-6),
        f"`rho` must be a correlation in [-1, 1], got {shown}",
    )


@arccos_kernel.defjvp
def _arccos_kernel_jvp(primals, tangents):
    (rho,), (drho,) = primals, tangents
    slope = (2.0 / math.pi) * jnp.arcsin(jnp.clip(rho, -1.0, 1.0))
    return arccos_kernel(rho), slope * drho


def dual_kernel(activation: str):
    """k(rho) = E sigma(u.x) sigma(v.x) for unit u, v at <u, v> = rho, x ~ N(0, I), for
    sigma = `activation_function(activation)`: the arc-cosine kernel k_abs for |z|, k_abs / 4
    for relu_even, (k_abs + rho) / 4 for ReLU = (|z| + z) / 2 (the cross terms E|u| v vanish),
    the Hermite series sum_{k <= 40} c_k^2 rho^k for GeLU and Swish and their even parts.

    **Arguments:**

    - `activation`: a name of `ACTIVATIONS`.

    **Returns:** k, an elementwise function of rho (a number or an array of correlations,
    finite, in [-1, 1] up to 1e-6) that returns an array of rho's shape; it raises
    `ValueError` (`eqx.error_if` when traced) on a rho outside that range.

    **Raises:** `ValueError` where `activation` is not one of `ACTIVATIONS`.

    >>> k = dual_kernel("abs")
    >>> round(float(k(jnp.array(0.0))), 6), float(k(jnp.array(1.0)))  # 2/pi and E z^2 = 1
    (0.63662, 1.0)
    """
    check_activation(activation)
    if activation == "abs":
        return arccos_kernel
    if activation == "relu_even":
        return lambda rho: 0.25 * arccos_kernel(rho)
    if activation == "relu":
        return lambda rho: 0.25 * (arccos_kernel(rho) + jnp.clip(rho, -1.0, 1.0))
    c2 = hermite_coefficients(activation, SERIES_DEGREE) ** 2
    return lambda rho: jnp.polyval(c2[::-1], _check_correlation(rho))  # |rho| > 1: no kernel


def kernel_truncation_error(activation: str) -> Float[Array, ""]:
    """Bound on |k(rho) - series| for |rho| <= 1: the Hermite energy above degree 40 (0 for
    the closed-form kernels).

    **Arguments:**

    - `activation`: a name of `ACTIVATIONS`.

    **Returns:** E sigma^2 - sum_{k<=40} c_k^2, a scalar array (0 for `"abs"`, `"relu"` and
    `"relu_even"`).

    **Raises:** `ValueError` where `activation` is not one of `ACTIVATIONS`.

    >>> float(kernel_truncation_error("abs"))
    0.0
    """
    check_activation(activation)
    if activation in ("abs", "relu", "relu_even"):
        return jnp.zeros(())
    c = hermite_coefficients(activation, SERIES_DEGREE)
    return second_moment(activation) - jnp.sum(c**2)
