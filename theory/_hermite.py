"""Hermite expansions of the multi-index paper's activations, and its stage predictions.

Conventions (they reproduce the paper's ODEs). Inputs x ~ N(0, I_d); target
f*(x) = sum_{j<=r} sigma(x_j); network f_W(x) = (1/m) sum_i ||w_i||^2 sigma(<w_i/||w_i||, x>);
flow dw_i/dt = -lambda w_i - m grad_{w_i} L with L = 1/2 E (f_W - f*)^2. Hermite coefficients
c_k = E[sigma(z) He_k(z) / sqrt(k!)], z ~ N(0, 1).

Names mean what they say: "relu", "gelu" and "swish" are those functions (GeLU with the
exact z Phi(z)). The paper's activations are even; ReLU, GeLU and Swish are made even the way
its symmetric initialization does: a pair of neurons (w, -w) computes sigma(z) + sigma(-z), so
the network and target see the even part sigma_e(z) = (sigma(z) + sigma(-z)) / 2, named
"relu_even" = |z| / 2, "gelu_even" = z erf(z / sqrt 2) / 2 and "swish_even" = z tanh(z / 2) / 2.
The staircase predictions use the even ones.

Paper: *Learning Orthogonal Multi-Index Models Beyond Small Initialization: Incremental
Learning, Competitive Dynamics and Symmetry* (NeurIPS 2026, arXiv:2609.10879).
"""

import math

import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erf
from jaxtyping import Array, Float

from ._solution import Readable
from .checks import check_activation, check_positive_int

_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(160)
_WEIGHTS = _WEIGHTS / math.sqrt(2.0 * math.pi)  # E g(z) = sum_k w_k g(z_k), exact to degree 319
_MAX_QUADRATURE_DEGREE = 300


def activation_function(activation: str):
    """sigma(z) for a name of `ACTIVATIONS`: |z|, ReLU, GeLU (exact), Swish, or the even part
    (sigma(z) + sigma(-z)) / 2 of one of the last three (`"relu_even"`, ...).

    **Arguments:**

    - `activation`: a name of `ACTIVATIONS`: `"abs"`, `"relu"`, `"gelu"`, `"swish"`,
      `"relu_even"`, `"gelu_even"` or `"swish_even"`.

    **Returns:** sigma, an elementwise function: a JAX array of any shape in, an array of the
    same shape out.

    **Raises:** `ValueError` where `activation` is not one of `ACTIVATIONS`.

    >>> activation_function("relu")(jnp.array([-2.0, 2.0])).tolist()
    [0.0, 2.0]
    >>> activation_function("relu_even")(jnp.array([-2.0, 2.0])).tolist()
    [1.0, 1.0]
    """
    check_activation(activation)
    return {
        "abs": jnp.abs,
        "relu": lambda z: jnp.maximum(z, 0.0),
        "gelu": lambda z: 0.5 * z * (1.0 + erf(z / jnp.sqrt(2.0))),
        "swish": lambda z: z / (1.0 + jnp.exp(-z)),
        "relu_even": lambda z: 0.5 * jnp.abs(z),
        "gelu_even": lambda z: 0.5 * z * erf(z / jnp.sqrt(2.0)),
        "swish_even": lambda z: 0.5 * z * jnp.tanh(0.5 * z),
    }[activation]


def _normalized_hermite(z, degree: int):
    """He_k(z) / sqrt(k!) for k = 0..degree (three-term recurrence)."""
    h = [jnp.ones_like(z), z]
    for k in range(1, degree):
        h.append((z * h[k] - math.sqrt(k) * h[k - 1]) / math.sqrt(k + 1))
    return jnp.stack(h[: degree + 1])


def hermite_coefficients(activation: str, degree: int) -> Float[Array, " K"]:
    """c_0..c_degree of sigma = `activation_function(activation)`:
    c_k = E[sigma(z) He_k(z) / sqrt(k!)].

    Closed forms for |z|: c_0 = sqrt(2/pi), c_{2j} = (-1)^(j-1) sqrt(2/pi) (2j-3)!! /
    sqrt((2j)!) for j >= 1, odd ones 0 (from E|z| He_n(z) = 2 phi(0) He_{n-2}(0));
    relu_even = |z|/2 has half of them, and relu = (|z| + z)/2 adds c_1 = 1/2. GeLU and Swish
    and their even parts by 160-point Gauss-Hermite quadrature (exact for polynomials of
    degree 319; they are smooth, so it converges fast: |c_k| agrees to 1e-13 with 320
    points), for degrees up to 300 (above, the quadrature cannot resolve them).
    Jit-compatible; `degree` is static.

    **Arguments:**

    - `activation`: a name of `ACTIVATIONS`.
    - `degree`: the highest order k, a Python or NumPy integer >= 0; at most 300 for
      `"gelu"`, `"swish"` and their even parts (any for `"abs"`, `"relu"`, `"relu_even"`).

    **Returns:** c_0..c_degree, an array of shape (degree + 1,) of JAX's default float dtype.

    **Raises:** `ValueError` where `activation` is not one of `ACTIVATIONS`, `degree` is not a
    non-negative integer (a bool, a float), or `degree` > 300 for a quadrature activation.

    >>> [round(c, 4) for c in hermite_coefficients("abs", 2).tolist()]
    [0.7979, 0.0, 0.5642]
    """
    check_activation(activation)
    if isinstance(degree, bool) or not isinstance(degree, int | np.integer) or degree < 0:
        raise ValueError(f"`degree` must be a non-negative integer, got {degree!r}")
    degree = int(degree)
    closed = activation in ("abs", "relu", "relu_even")
    if not closed and degree > _MAX_QUADRATURE_DEGREE:
        raise ValueError(
            f"`degree` must be <= {_MAX_QUADRATURE_DEGREE} for {activation!r} (Gauss-Hermite "
            f"quadrature with {_NODES.size} nodes), got {degree}"
        )
    if closed:
        c = np.zeros(degree + 1)
        c[0] = math.sqrt(2.0 / math.pi)
        for j in range(1, degree // 2 + 1):
            # (2j-3)!! / sqrt((2j)!) in logs, (2j-3)!! = (2j-2)! / (2^(j-1) (j-1)!): the
            # factorials themselves overflow a float from degree 172 on
            log_c = math.lgamma(2 * j - 1) - (j - 1) * math.log(2.0) - math.lgamma(j)
            log_c -= 0.5 * math.lgamma(2 * j + 1)
            c[2 * j] = (-1) ** (j - 1) * math.sqrt(2.0 / math.pi) * math.exp(log_c)
        if activation == "abs":
            return jnp.asarray(c)
        c = 0.5 * c
        if activation == "relu" and degree >= 1:
            c[1] = 0.5  # the odd part z / 2
        return jnp.asarray(c)
    z = jnp.asarray(_NODES)
    sigma = activation_function(activation)
    return _normalized_hermite(z, degree) @ (jnp.asarray(_WEIGHTS) * sigma(z))


def second_moment(activation: str) -> Float[Array, ""]:
    """E sigma(z)^2: 1 for |z|, 1/2 for ReLU, 1/4 for relu_even, quadrature for GeLU and
    Swish and their even parts.

    **Arguments:**

    - `activation`: a name of `ACTIVATIONS`.

    **Returns:** E sigma(z)^2, z ~ N(0, 1), a scalar array.

    **Raises:** `ValueError` where `activation` is not one of `ACTIVATIONS`.

    >>> float(second_moment("relu")), float(second_moment("relu_even"))
    (0.5, 0.25)
    """
    check_activation(activation)
    exact = {"abs": 1.0, "relu": 0.5, "relu_even": 0.25}
    if activation in exact:
        return jnp.asarray(exact[activation])
    z = jnp.asarray(_NODES)
    return jnp.asarray(_WEIGHTS) @ activation_function(activation)(z) ** 2


class HermiteEnergies(Readable):
    """The Hermite energies of f* = sum_{j<=r} sigma(x_j) and the plateaus they predict
    (weight decay 0): `E0` = (r c_0)^2, `E2` = r c_2^2, `E4_plus` = r (E sigma^2 - c_0^2 -
    c_1^2 - c_2^2); `plateau_0` = (E2 + E4_plus) / 2 is the loss once the mean is fitted
    (after stage 0), `plateau_2` = E4_plus / 2 once the subspace is (after stage 2), and
    `initial_target_energy` = (E0 + E2 + E4_plus) / 2 = 1/2 E f*^2.

    >>> e = hermite_energies(activation="abs", r=2)  # E f*^2 = r + r (r - 1) 2 / pi for |z|
    >>> round(float(e.E0 + e.E2 + e.E4_plus), 6) == round(2 + 2 * 2 / np.pi, 6)
    True
    """

    E0: Float[Array, ""]
    E2: Float[Array, ""]
    E4_plus: Float[Array, ""]
    plateau_0: Float[Array, ""]
    plateau_2: Float[Array, ""]
    initial_target_energy: Float[Array, ""]


def hermite_energies(*, activation: str, r: int) -> HermiteEnergies:
    """The Hermite energies and weight-decay-free plateaus of the target (`HermiteEnergies`).

    **Arguments:**

    - `activation`: a name of `ACTIVATIONS` (sigma of the target f* = sum_{j<=r} sigma(x_j)).
    - `r`: the number of target directions, an integer >= 1.

    **Returns:** a `HermiteEnergies` of scalar arrays: `E0`, `E2`, `E4_plus`, `plateau_0`,
    `plateau_2` and `initial_target_energy`.

    **Raises:** `ValueError` where `activation` is not one of `ACTIVATIONS` or `r` is not an
    integer >= 1.

    >>> e = hermite_energies(activation="abs", r=1)
    >>> round(float(e.E0), 4), round(float(e.plateau_2), 4)
    (0.6366, 0.0225)
    """
    r = check_positive_int("r", r)  # the number of target directions
    c = hermite_coefficients(activation, 2)
    e0 = (r * c[0]) ** 2
    e2 = r * c[2] ** 2
    e4 = r * (second_moment(activation) - jnp.sum(c**2))
    return HermiteEnergies(
        E0=e0,
        E2=e2,
        E4_plus=e4,
        plateau_0=0.5 * (e2 + e4),
        plateau_2=0.5 * e4,
        initial_target_energy=0.5 * (e0 + e2 + e4),
    )
