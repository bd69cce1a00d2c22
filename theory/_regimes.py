"""Where the leaky-ReLU paper's theorems apply, and how small the test error can be.

Directional convergence (the paper's Theorem 4.8) is proved in two cases, each a property of
the training set {(x_i, y_i)} alone:

- **positively correlated**: <y_i x_i, y_k x_k> >= 0 for every pair (a strong signal);
- **near-orthogonal**: ||x_i||^2 >= C n max_{k != i} |<x_i, x_k>| for every i.

For the second case the engine takes C = 1 / gamma, a constant we derived for step 1 only:
from a vanishing init the first step of GD (or of normalized GD) is
w_j(1) = eta (a_j / n) sum_i c_ji y_i x_i, c_ji in [gamma, 1], so
a_j y_k <x_k, w_j(1)> >= eta a_j^2 / n (gamma ||x_k||^2 - sum_{i != k} |<x_i, x_k>|) > 0
whenever gamma ||x_k||^2 > (n - 1) max_{i != k} |<x_i, x_k>|: every neuron is activated after
step 1 whatever its initial signs. Keeping the pattern at later steps needs more (the per-sample
losses enter as weights), which the paper's own, larger constant presumably supplies; that
constant was not available to us (only a summary of the paper is). Zero inputs meet neither
condition.

A lower bound on the test error (the engine's derivation, in the spirit of the paper's
Theorem 5.1 lower bound for Gaussian mixtures). GD from a vanishing init keeps every w_j in the
span of the training inputs, so the net sees a test point x = y~ mu + z, z ~ N(0, sigma^2 I),
only through P x (P: the projection on span{x_i}). P x = y~ P mu + P z with P z ~ N(0, sigma^2 P)
is a Gaussian mixture in that span, whose Bayes error is Phi(-||P mu|| / sigma). So every
classifier of P x, and every such net, has

    test error >= eta + (1 - 2 eta) Phi(-||P mu|| / sigma)                  (`span_error_bound`)

with eta the test labels' flip probability. For d >> n, x_i = b_i u + z_i^perp with
u = mu / ||mu||, b_i = y~_i ||mu|| + sigma g_i; since Z^perp Z^perp^T is Wishart,
b^T (Z^perp Z^perp^T)^-1 b ~ ||b||^2 / (sigma^2 chi^2_{d - n}), so ||P mu||^2 ->
||mu||^2 ||b||^2 / (||b||^2 + sigma^2 (d - n)) with ||b||^2 -> n (||mu||^2 + sigma^2):

    test error >= eta + (1 - 2 eta) Phi(-(s / sigma) sqrt(n (s^2 + sigma^2) /
                                        (n (s^2 + sigma^2) + sigma^2 (d - n))))     (s = ||mu||)

(`transition_lower_bound`, approximate at finite d; for n >= d it is the Bayes error). With
r = n s^2 / (d sigma^2) it is about Phi(-(s / sigma) sqrt(r / (1 + r))): the Bayes error
Phi(-s / sigma) in the strong-signal regime r >> 1, and Phi(-sqrt(n) s^2 / (sigma^2 sqrt(d)))
in the weak one, bounded away from 0 unless n s^4 >> d sigma^4. Where n ||mu||^4 <~ d sigma^4,
benign overfitting must fail.

Paper: *Directional Convergence, Benign Overfitting of Gradient Descent in leaky ReLU two-layer
Neural Networks* (ICLR 2026, arXiv:2505.16204).
"""

import jax.numpy as jnp
from jax.scipy.stats import norm as _normal
from jaxtyping import Array, Bool, Float

from ._margin import with_flips
from ._scaling import binary_exponent, times_power_of_two
from ._solution import Readable
from .checks import (
    check_finite,
    check_gamma,
    check_label_noise,
    check_plus_minus_one,
    check_positive,
    check_positive_int,
    check_shape,
    inexact,
)


class MarginConditions(Readable):
    """Result of `margin_conditions`: Theorem 4.8's two conditions on one training set.

    - `positively_correlated`: <y_i x_i, y_k x_k> >= 0 for all i, k; `min_correlation`: the
      smallest of them over i != k, relative to ||x_i|| ||x_k|| (>= 0 in that case).
    - `orthogonality_ratio`: min_i ||x_i||^2 / (n max_{k != i} |<x_i, x_k>|) (inf for n = 1 or
      exactly orthogonal inputs); `near_orthogonal`: it is >= 1 / gamma (see the module).
    """

    positively_correlated: Bool[Array, ""]
    min_correlation: Float[Array, ""]
    orthogonality_ratio: Float[Array, ""]
    near_orthogonal: Bool[Array, ""]


def margin_conditions(
    X: Float[Array, "n d"], y: Float[Array, " n"], gamma: float
) -> MarginConditions:
    """Theorem 4.8's two sufficient conditions for directional convergence, on (X, y).

    Positive correlation <y_i x_i, y_k x_k> >= 0 for all pairs, and near-orthogonality
    ||x_i||^2 >= n max_{k != i} |<x_i, x_k>| / gamma (the constant C = 1 / gamma is derived in
    the module docstring: under it one GD step from a vanishing init activates every neuron).
    Jit- and vmap-able.

    **Arguments:**

    - `X` (n, d): the training inputs, real and finite, n >= 1.
    - `y` (n,): the labels, in {-1, +1}.
    - `gamma`: the leaky-ReLU slope, one number in (0, 1).

    **Returns:** a `MarginConditions` of scalar arrays: `positively_correlated`,
    `min_correlation`, `orthogonality_ratio` and `near_orthogonal`.

    **Raises:** `ValueError` where `X` is not 2-D or has no row, `y` is not (n,) or leaves
    {-1, +1}, `gamma` is outside (0, 1), or `X` holds a non-finite entry.

    >>> c = margin_conditions(jnp.array([[3.0, 0.1], [-3.0, 0.1]]), jnp.array([1.0, -1.0]), 0.1)
    >>> bool(c.positively_correlated), bool(c.near_orthogonal)
    (True, False)
    >>> c = margin_conditions(jnp.eye(3), jnp.array([1.0, -1.0, 1.0]), 0.1)
    >>> bool(c.positively_correlated), float(c.orthogonality_ratio), bool(c.near_orthogonal)
    (True, inf, True)
    """
    check_shape("X", X, (None, None))
    n = jnp.shape(X)[0]
    if n == 0:
        raise ValueError("`X` must hold at least one sample, got 0 rows")
    check_shape("y", y, (n,))
    gamma = check_gamma(gamma)
    X = check_finite("X", inexact(X, name="X"))
    y = jnp.asarray(check_plus_minus_one("y", y), X.dtype)
    # both conditions are scale-free: X scaled by a power of 2 to max |x| in [1, 2), so that
    # the Gram matrix neither overflows (|x| ~ 1e200) nor underflows (|x| ~ 1e-200)
    X = times_power_of_two(X, -binary_exponent(X))
    yx = y[:, None] * X
    G = yx @ yx.T
    sq = jnp.diagonal(G)
    off = ~jnp.eye(n, dtype=bool)
    norms = jnp.sqrt(sq)
    outer = norms[:, None] * norms[None, :]
    rel = G / jnp.where(outer > 0, outer, 1.0)
    min_corr = jnp.min(jnp.where(off, rel, jnp.inf)) if n > 1 else jnp.asarray(jnp.inf, X.dtype)
    cross = jnp.max(jnp.where(off, jnp.abs(G), 0.0), axis=1)
    # a zero input is never activated: ratio 0 (and it is not positively correlated)
    per_sample = jnp.where(
        cross > 0, sq / jnp.where(cross > 0, n * cross, 1.0), jnp.where(sq > 0, jnp.inf, 0.0)
    )
    ratio = jnp.min(per_sample)
    return MarginConditions(
        positively_correlated=jnp.all(G >= 0) & jnp.all(sq > 0),
        min_correlation=min_corr,
        orthogonality_ratio=ratio,
        near_orthogonal=ratio >= 1.0 / gamma,
    )


def span_error_bound(
    X: Float[Array, "n d"], mu: Float[Array, " d"], *, noise_scale=1.0, label_noise=0.0
) -> Float[Array, ""]:
    """The smallest test error eta + (1 - 2 eta) Phi(-||P mu|| / sigma) of any classifier that
    sees a test point only through its projection P x on the span of the training inputs, on
    the mixture x = y~ mu + z, z ~ N(0, sigma^2 I), labels flipped with probability
    eta = `label_noise`. It bounds from below every net whose first-layer rows lie in that span,
    as GD keeps them from a vanishing init (see the module docstring).

    **Arguments:**

    - `X` (n, d): the training inputs, real and finite.
    - `mu` (d,): the class mean, real and finite.
    - `noise_scale`: sigma, finite and > 0 (default 1).
    - `label_noise`: eta, in [0, 1/2) (default 0).

    **Returns:** the bound, a scalar array (broadcast against an array-valued `noise_scale`
    or `label_noise`).

    **Raises:** `ValueError` where `X` is not 2-D, `mu` is not (d,), either is not real and
    finite, `noise_scale` is not finite and > 0, or `label_noise` is outside [0, 1/2).

    >>> X = jnp.array([[1.0, 0.0, 0.0]]); mu = jnp.array([1.0, 1.0, 0.0])
    >>> round(float(span_error_bound(X, mu)), 4)  # ||P mu|| = 1: Phi(-1)
    0.1587
    """
    check_shape("X", X, (None, None))
    check_shape("mu", mu, (jnp.shape(X)[1],))
    noise_scale = check_positive("noise_scale", noise_scale)
    label_noise = check_label_noise(label_noise)
    X = check_finite("X", inexact(X, name="X"))
    mu = check_finite("mu", inexact(mu, X.dtype, name="mu"))
    # ||P mu|| through the right singular vectors of X (not the Gram matrix: its condition
    # number is squared)
    _, sv, vt = jnp.linalg.svd(X, full_matrices=False)
    cut = jnp.max(sv, initial=0.0) * max(jnp.shape(X)) * jnp.finfo(X.dtype).eps
    proj = jnp.sum(jnp.where(sv > cut, (vt @ mu) ** 2, 0.0))
    clean = _normal.cdf(-jnp.sqrt(proj) / noise_scale)
    return with_flips(clean, label_noise)


def transition_lower_bound(n, signal, d, *, noise_scale=1.0, label_noise=0.0):
    """The large-d limit of `span_error_bound` for n samples of the Gaussian mixture with
    ||mu|| = s = `signal` in dimension d (an approximation at finite d, not itself a bound):

        eta + (1 - 2 eta) Phi(-(s / sigma) sqrt(n (s^2 + sigma^2) /
                                                (n (s^2 + sigma^2) + sigma^2 (d - n)))),

    the Bayes error Phi(-s / sigma) when n s^2 >> d sigma^2 and Phi(-sqrt(n) s^2 /
    (sigma^2 sqrt(d))) when n s^2 << d sigma^2. Where it exceeds the Bayes error by a margin,
    benign overfitting of the max-margin net must fail.

    **Arguments:**

    - `n`: the number of training samples, an integer >= 1.
    - `signal`: s = ||mu||, finite and >= 0, a number or an array.
    - `d`: the input dimension, an integer >= 1.
    - `noise_scale`: sigma, finite and > 0 (default 1).
    - `label_noise`: eta, the test labels' flip probability, in [0, 1/2) (default 0).

    **Returns:** the approximate bound, an array of `signal`'s shape (broadcast against
    array-valued `noise_scale` or `label_noise`).

    **Raises:** `ValueError` where `n` or `d` is not an integer >= 1, `noise_scale` is not
    finite and > 0, `label_noise` is outside [0, 1/2), or `signal` is not finite and >= 0.

    >>> round(float(transition_lower_bound(20, 1.0, 400)), 4)  # weak signal: far above Phi(-1)
    0.3788
    >>> bool(transition_lower_bound(20, 10.0, 400) < 1e-19)  # strong signal: ~ Phi(-9.2)
    True
    """
    n, d = check_positive_int("n", n), check_positive_int("d", d)
    noise_scale = check_positive("noise_scale", noise_scale)
    label_noise = check_label_noise(label_noise)
    s = check_positive("signal", signal, allow_zero=True)
    # in units of sigma (scale-free: no overflow of s^2 or sigma^2 at 1e200)
    q = jnp.asarray(s, float) / jnp.asarray(noise_scale, float)
    b2 = n * (q**2 + 1.0)  # may overflow to inf (q ~ 1e200): the ratio below is then 1
    clean = _normal.cdf(-q * jnp.sqrt(1.0 / (1.0 + max(d - n, 0) / b2)))
    return with_flips(clean, label_noise)
