"""The leaky-ReLU network with a fixed second layer, and the margin losses.

Paper: *Directional Convergence, Benign Overfitting of Gradient Descent in leaky ReLU two-layer
Neural Networks* (ICLR 2026, arXiv:2505.16204).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from theory.checks import (
    check_dtype,
    check_finite,
    check_gamma,
    check_key,
    check_positive,
    check_positive_int,
    check_shape,
    inexact,
)

MARGIN_LOSSES = ("exponential", "logistic")


def check_margin_loss(loss: str) -> None:
    """`loss` must name one of `MARGIN_LOSSES`.

    **Arguments:**

    - `loss`: the name to check.

    **Returns:** None.

    **Raises:** `ValueError` where `loss` is not one of `MARGIN_LOSSES`
    (`"exponential"`, `"logistic"`).

    >>> check_margin_loss("hinge")
    Traceback (most recent call last):
    ValueError: `loss` must be one of ('exponential', 'logistic'), got 'hinge'
    """
    if loss not in MARGIN_LOSSES:
        raise ValueError(f"`loss` must be one of {MARGIN_LOSSES}, got {loss!r}")


def leaky_relu(z, gamma):
    """phi(z) = max(z, gamma z), gamma in (0, 1).

    **Arguments:**

    - `z`: pre-activations, a real array (or number) of any shape; integers are converted to
      JAX's default float.
    - `gamma`: the slope on negative inputs, one real number in (0, 1).

    **Returns:** phi(z), of the shape of `z`, floating.

    **Raises:** `ValueError` where `gamma` is not one real number in (0, 1) (through
    `eqx.error_if` when traced), or `z` is complex, boolean or not numeric.

    >>> leaky_relu(jnp.array([-2.0, 3.0]), 0.5).tolist()
    [-1.0, 3.0]
    """
    gamma = check_gamma(gamma)
    z = inexact(z, name="z")  # complex pre-activations have no leaky ReLU
    return jnp.maximum(z, gamma * z)


class LeakyReLUNet(eqx.Module):
    """f(x; W) = sum_j a_j phi(<w_j, x>), phi(z) = max(z, gamma z), with a fixed second layer.

    `a` (m,) is fixed (`fixed_second_layer`: +1/sqrt(m) for the first half of the neurons,
    -1/sqrt(m) for the rest); only `W` (m, d) is trained. `__call__` takes one x (d,).

    >>> net = LeakyReLUNet(jnp.array([[1.0, 0.0], [0.0, 1.0]]), jnp.array([1.0, -1.0]), 0.1)
    >>> net.predict(jnp.array([[2.0, -1.0]])).tolist()
    [2.1]
    """

    W: Float[Array, "m d"]
    a: Float[Array, " m"]
    gamma: float = eqx.field(static=True)

    def __init__(self, W, a, gamma: float):
        dtype = jnp.result_type(jnp.asarray(W), jnp.asarray(a), float)
        W, a = inexact(W, dtype, "W"), inexact(a, dtype, "a")
        check_shape("W", W, (None, None))
        check_shape("a", a, (W.shape[0],))
        check_gamma(gamma)
        self.W, self.a, self.gamma = W, a, float(gamma)

    def __call__(self, x: Float[Array, " d"]) -> Float[Array, ""]:
        return jnp.dot(self.a, leaky_relu(self.W @ x, self.gamma))

    def predict(self, X: Float[Array, "n d"]) -> Float[Array, " n"]:
        """f(x_i) for every row of `X`."""
        return leaky_relu(X @ self.W.T, self.gamma) @ self.a


def fixed_second_layer(m: int, dtype=None) -> Float[Array, " m"]:
    """a_j = +1/sqrt(m) for j < ceil(m/2), -1/sqrt(m) for the others.

    **Arguments:**

    - `m`: number of neurons, an int >= 2 (so that both signs occur).
    - `dtype`: floating dtype (default: JAX's default float).

    **Returns:** the second layer `a`, shape (m,).

    **Raises:** `ValueError` where `m` is not an int >= 2, or `dtype` is not floating (or is
    float64 without x64 enabled).

    >>> fixed_second_layer(4).tolist()
    [0.5, 0.5, -0.5, -0.5]
    """
    m = check_positive_int("m", m, minimum=2)  # both signs
    dtype = jnp.zeros(()).dtype if dtype is None else check_dtype(dtype)
    signs = jnp.where(jnp.arange(m) < (m + 1) // 2, 1.0, -1.0).astype(dtype)
    return signs / jnp.sqrt(jnp.asarray(m, dtype))


def small_leaky_init(
    m: int, d: int, gamma: float, *, scale, key: PRNGKeyArray, dtype=None
) -> LeakyReLUNet:
    """w_j ~ N(0, scale^2 I_d / d) with the fixed second layer; `scale` much smaller than the
    step size activates every neuron after the first GD step in the strong-signal case.

    **Arguments:**

    - `m`: number of neurons, an int >= 2.
    - `d`: input dimension, a positive int.
    - `gamma`: the leaky-ReLU slope, one number in (0, 1).
    - `scale`: the initialization scale, finite and > 0.
    - `key`: a `jax.random.PRNGKey`.
    - `dtype`: floating dtype (default: JAX's default float).

    **Returns:** a `LeakyReLUNet` with `W` of shape (m, d) and `a = fixed_second_layer(m)`.

    **Raises:** `ValueError` where `m` is not an int >= 2, `d` is not a positive int, `scale`
    is not finite and > 0, `gamma` is not in (0, 1), `key` is not a JAX PRNG key, or `dtype`
    is not floating (or is float64 without x64 enabled).

    >>> net = small_leaky_init(10, 400, 0.1, scale=1e-10, key=jax.random.PRNGKey(0))
    >>> net.W.shape, net.gamma
    ((10, 400), 0.1)
    """
    m, d = check_positive_int("m", m, minimum=2), check_positive_int("d", d)
    scale = check_positive("scale", scale)
    dtype = jnp.zeros(()).dtype if dtype is None else check_dtype(dtype)
    W = scale * jax.random.normal(check_key(key), (m, d), dtype) / jnp.sqrt(d)
    return LeakyReLUNet(W, fixed_second_layer(m, dtype), gamma)


def margin_loss(margins: Float[Array, " n"], loss: str = "exponential") -> Float[Array, ""]:
    """(1/n) sum_i l(y_i f(x_i)) with l(u) = exp(-u) or log(1 + exp(-u)), overflow-safe.

    The exponential loss is exp(logsumexp(-u) - log n): finite for margins of any sign and
    size (it is +inf only where the true value overflows float64, u < -709 - log n).

    **Arguments:**

    - `margins`: the margins u_i = y_i f(x_i), shape (n,) with n >= 1, real and finite.
    - `loss`: `"exponential"` (default) or `"logistic"` (one of `MARGIN_LOSSES`).

    **Returns:** the mean loss L, a scalar.

    **Raises:** `ValueError` where `loss` is not one of `MARGIN_LOSSES`, `margins` is not 1-D
    or is empty, or `margins` is not real and finite (through `eqx.error_if` when traced).

    >>> float(margin_loss(jnp.array([0.0, 0.0])))
    1.0
    >>> float(margin_loss(jnp.array([-800.0, 1.0])))  # exp(800) / 2 overflows float64
    inf
    """
    return _margin_loss(_check_margins(margins, loss), loss)


def _check_margins(margins, loss):
    check_margin_loss(loss)
    check_shape("margins", margins, (None,))
    if jnp.shape(margins)[0] == 0:
        raise ValueError("`margins` must hold at least one sample, got none")
    return check_finite("margins", margins)


def _margin_loss(margins, loss="exponential"):
    """`margin_loss` without the checks (for iterations that report non-finite margins).

    It checks nothing, and that is its point: a solver's loop evaluates it at every step,
    where a check would run each time (and, traced, be a host callback); check the arguments
    once outside the loop, or use the checked `dynamics.margin_loss`. Invalid input is not
    refused: it gives wrong numbers or nan, or whatever error JAX meets on the way.

    **Arguments:**

    - `margins`: the margins u_i = y_i f(x_i), an array of shape (n,) with n >= 1 (not
      converted: a list fails; neither n nor finiteness is checked, and non-finite margins
      propagate).
    - `loss`: `"exponential"` (default) or `"logistic"`; the name is checked (a Python
      comparison when the program is traced, nothing at run time), so a misspelt name is
      refused, not taken for the logistic loss.

    **Returns:** the mean loss L, a scalar: exp(log L) for the exponential loss (overflow-safe,
    as in `margin_loss`), mean log(1 + exp(-u)) for the logistic one.
    """
    check_margin_loss(loss)
    if loss == "exponential":
        return jnp.exp(_log_margin_loss(margins, loss))
    return jnp.mean(jnp.logaddexp(0.0, -margins))


def log_margin_loss(margins: Float[Array, " n"], loss: str = "exponential") -> Float[Array, ""]:
    """log L, computed without forming L: logsumexp(-u) - log n for the exponential loss.

    **Arguments:**

    - `margins`: the margins u_i = y_i f(x_i), shape (n,) with n >= 1, real and finite.
    - `loss`: `"exponential"` (default) or `"logistic"` (one of `MARGIN_LOSSES`).

    **Returns:** log L, a scalar, finite where L itself under- or overflows.

    **Raises:** `ValueError` where `loss` is not one of `MARGIN_LOSSES`, `margins` is not 1-D
    or is empty, or `margins` is not real and finite (through `eqx.error_if` when traced).

    >>> float(log_margin_loss(jnp.array([1000.0, 1000.0])))  # L = exp(-1000) underflows
    -1000.0
    """
    return _log_margin_loss(_check_margins(margins, loss), loss)


def _log_margin_loss(margins, loss="exponential"):
    """`log_margin_loss` without the checks.

    It checks nothing, and that is its point: a solver's loop evaluates it at every step,
    where a check would run each time (and, traced, be a host callback); check the arguments
    once outside the loop, or use the checked `dynamics.log_margin_loss`. Invalid input is
    not refused: it gives wrong numbers or nan, or whatever error JAX meets on the way.

    **Arguments:**

    - `margins`: the margins u_i = y_i f(x_i), an array of shape (n,) with n >= 1 (not
      converted: a list fails; neither n nor finiteness is checked, and non-finite margins
      propagate).
    - `loss`: `"exponential"` (default) or `"logistic"`; the name is checked (a Python
      comparison when the program is traced, nothing at run time), so a misspelt name is
      refused, not taken for the logistic loss.

    **Returns:** log L, a scalar: logsumexp(-u) - log n for the exponential loss, the log of
    the mean of log(1 + exp(-u)) for the logistic one; finite where L itself under- or
    overflows.
    """
    check_margin_loss(loss)
    n = margins.shape[0]
    if loss == "exponential":
        return jax.nn.logsumexp(-margins) - jnp.log(n)
    # log mean softplus(-u) = logsumexp(log softplus(-u)) - log n, with log softplus(-u)
    # = -u + log1p(exp(u)) for u < 0 and log1p(exp(-u)) for u >= 0 (no underflow to -inf)
    sp = jnp.where(margins > 30, -margins, jnp.log(jnp.logaddexp(0.0, -margins)))
    return jax.nn.logsumexp(sp) - jnp.log(n)
