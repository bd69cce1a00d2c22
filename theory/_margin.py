"""The max-margin limit direction of leaky-ReLU nets with a fixed second layer, and its test error.

With the second layer a fixed and an activation pattern s_ji = sign(<w_j, x_i>) fixed, the net
f(x_i; W) = sum_j a_j phi(<w_j, x_i>), phi(z) = max(z, gamma z), is linear in W:

    y_i f(x_i; W) = sum_j <w_j, z_ji>,   z_ji = a_j c_ji y_i x_i,   c_ji = 1 if s_ji > 0 else gamma.

Gradient descent on the exponential loss then converges in direction to the solution of

    min 1/2 ||W||_F^2   subject to   y_i f(x_i; W) >= 1 for all i            (primal)
    max 1^T lam - 1/2 lam^T G lam   subject to   lam >= 0                    (dual)

with G_ik = y_i y_k <x_i, x_k> sum_j a_j^2 c_ji c_jk and w_j = a_j sum_i lam_i c_ji y_i x_i.
The all-activated pattern of the strong-signal case is s_ji = sign(a_j) y_i (every
a_j y_i <x_i, w_j> > 0). The dual is solved by the Lawson-Hanson active-set method, which
terminates in finitely many steps at an exact KKT point; the loop runs until the KKT conditions
hold to float64 accuracy, and the result carries its certificate (duality gap, KKT residual).

Paper: *Directional Convergence, Benign Overfitting of Gradient Descent in leaky ReLU two-layer
Neural Networks* (ICLR 2026, arXiv:2505.16204).
"""

import contextlib
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betainc
from jax.scipy.stats import norm as _normal
from jaxtyping import Array, Bool, Float

from ._nnqp import _nnqp
from ._scaling import binary_exponent, times_power_of_two
from ._solution import RESULTS, AbstractSolution
from .checks import (
    check_finite,
    check_gamma,
    check_label_noise,
    check_plus_minus_one,
    check_positive,
    check_positive_int,
    check_shape,
    check_value,
    inexact,
    is_concrete,
)


class MaxMarginSolution(AbstractSolution):
    """Result of `max_margin`.

    - `W` (m, d): the limit direction, unit Frobenius norm; `dual` (n,): multipliers lam
      (lam scales as 1 / (s t)^2 for X scaled by s and a by t, and over- or underflows where
      that leaves the floating range; W, `norm` and `margins` are exact at any scale).
    - `norm`: ||W_mm||_F of the min-norm solution with margins >= 1 (the normalized margin
      of `W` is 1 / `norm`); `margins` (n,): y_i f(x_i; W_mm), >= 1 with equality on support.
    - `duality_gap`: P - D >= 0 with P the primal value of W_mm scaled to feasibility and D the
      dual value of lam; `relative_gap` = gap / P. `kkt_residual`: max violation of
      lam >= 0, 1 - G lam <= 0 off the support, complementary slackness.
    - `pattern`: the pattern s_ji > 0 solved for; `pattern_consistent`: whether W_mm realizes
      it (sign <w_j, x_i> = s_ji for every j, i: for the default pattern, every neuron stays
      activated).
    - `result`: `RESULTS.successful` when the KKT test passed; `RESULTS.infeasible` when the
      program has no solution (the dual is unbounded: the data are not separable with this
      pattern, certified by Farkas' lemma or an unbounded dual; W and lam are then 0, never
      NaN); `RESULTS.nonfinite` when the Gram matrix overflows; `RESULTS.max_steps_reached`
      when the active-set loop stopped first. `feasible` reads it.
    - `stats`: `{"num_steps": ...}`, the active-set iterations.

    >>> mm = max_margin(jnp.array([[1.0, 0.0]]), jnp.array([1.0]), jnp.array([1.0]), 0.5)
    >>> mm.W.tolist(), bool(mm.feasible), bool(mm.ok)
    ([[1.0, 0.0]], True, True)
    """

    result: RESULTS
    stats: dict
    W: Float[Array, "m d"]
    dual: Float[Array, " n"]
    norm: Float[Array, ""]
    margins: Float[Array, " n"]
    duality_gap: Float[Array, ""]
    relative_gap: Float[Array, ""]
    kkt_residual: Float[Array, ""]
    pattern: Bool[Array, "m n"]
    pattern_consistent: Bool[Array, ""]

    @property
    def feasible(self):
        """False where the program was shown infeasible (a Farkas certificate: lam >= 0,
        lam != 0 with G lam = 0, or an unbounded dual) or could not be formed (its Gram
        matrix overflowed); True where it was solved, or the solve stopped short."""
        return (self.result != RESULTS.infeasible) & (self.result != RESULTS.nonfinite)


def activation_pattern(W: Float[Array, "m d"], X: Float[Array, "n d"]) -> Bool[Array, "m n"]:
    """s_ji = [<w_j, x_i> > 0]: the neurons' activation pattern on the samples.

    **Arguments:**

    - `W` (m, d): the first layer, one neuron w_j per row, real and finite.
    - `X` (n, d): the inputs, one sample x_i per row, real and finite.

    **Returns:** the pattern, a boolean array of shape (m, n).

    **Raises:** `ValueError` where `W` is not 2-D, `X` is not (n, d) with `W`'s d, or either
    holds a non-finite entry.

    >>> activation_pattern(jnp.array([[1.0, -1.0]]), jnp.eye(2)).tolist()
    [[True, False]]
    """
    check_shape("W", W, (None, None))
    check_shape("X", X, (None, jnp.shape(W)[-1]))
    return (check_finite("W", W) @ check_finite("X", X).T) > 0


def all_activated(W, a, X, y) -> Bool[Array, ""]:
    """Whether a_j y_i <x_i, w_j> > 0 for every neuron j and sample i.

    **Arguments:**

    - `W` (m, d): the first layer, real and finite.
    - `a` (m,): the second layer, real and finite.
    - `X` (n, d): the inputs, real and finite.
    - `y` (n,): the labels, real and finite (their signs count; they need not be +-1).

    **Returns:** a boolean scalar array.

    **Raises:** `ValueError` on shapes that do not match, or on complex, boolean or non-finite
    entries.

    >>> bool(all_activated(jnp.array([[1.0, -1.0]]), jnp.ones(1), jnp.eye(2), jnp.array([1.0, -1.0])))
    True
    """  # noqa: E501
    check_shape("W", W, (None, None))
    m, d = jnp.shape(W)
    check_shape("a", a, (m,))
    check_shape("X", X, (None, d))
    check_shape("y", y, (jnp.shape(X)[0],))
    W, a = check_finite("W", inexact(W, name="W")), check_finite("a", inexact(a, name="a"))
    X, y = check_finite("X", inexact(X, name="X")), check_finite("y", inexact(y, name="y"))
    return jnp.all(a[:, None] * y[None, :] * (W @ X.T) > 0)


def _check(X, y, a, gamma, pattern):
    check_shape("X", X, (None, None))
    n = jnp.shape(X)[0]
    check_shape("y", y, (n,))
    check_shape("a", a, (None,))
    if pattern is not None:
        check_shape("pattern", pattern, (jnp.shape(a)[0], n))
    return check_plus_minus_one("y", y), check_gamma(gamma)


def max_margin(
    X: Float[Array, "n d"],
    y: Float[Array, " n"],
    a: Float[Array, " m"],
    gamma: float,
    *,
    pattern: Bool[Array, "m n"] | None = None,
    tol: float | None = None,
    throw: bool = False,
) -> MaxMarginSolution:
    """The limit direction of GD on the exponential loss: min ||W||_F^2 s.t. y_i f(x_i; W) >= 1.

    phi is fixed by the activation `pattern`. Solved exactly through its dual by an
    active-set method (module docstring) until the KKT conditions hold to `tol`; the result
    carries the duality gap and the KKT residual as its certificate. Data of any scale are
    exact: the program is solved with X and a scaled by powers of 2 to max |.| in [1, 2), and
    `tol` and the KKT residual refer to that scaled program. Jit-compiled and `jax.vmap`-able.

    An infeasible program (non-separable data for this pattern) returns
    `result = RESULTS.infeasible` with W = 0, never NaN and never a hang (the loop is bounded
    by 10 n iterations).

    **Arguments:**

    - `X` (n, d): the inputs, real (not checked for finiteness: a non-finite Gram matrix
      gives `RESULTS.nonfinite`).
    - `y` (n,): the labels, in {-1, +1}.
    - `a` (m,): the fixed second layer (likewise).
    - `gamma`: the leaky-ReLU slope, one number in (0, 1).
    - `pattern` (m, n), boolean: the activation pattern solved for, True where
      <w_j, x_i> > 0; default (None) the all-activated pattern s_ji = [a_j y_i > 0] of the
      strong-signal case.
    - `tol`: the KKT tolerance, one finite number > 0 (default None: 1e3 x machine epsilon x
      max G_ii).
    - `throw`: True raises instead of returning a failed result (default False).

    **Returns:** a `MaxMarginSolution`: `W` (m, d) of unit Frobenius norm, `dual` (n,),
    `norm`, `margins` (n,), the certificate (`duality_gap`, `relative_gap`, `kkt_residual`),
    `pattern` (m, n), `pattern_consistent`, `result` and `stats`.

    **Raises:** `ValueError` on shapes that do not match, `gamma` outside (0, 1), labels
    outside {-1, +1}, a non-boolean `pattern`, a `tol` that is not one finite number > 0, or a
    `throw` that is not True or False; with `throw=True`, `eqx.EquinoxRuntimeError` carrying
    `result`'s message where the solve did not succeed.

    >>> X = jnp.array([[2.0, 0.0], [0.0, 1.0]]); y = jnp.array([1.0, -1.0])
    >>> mm = max_margin(X, y, jnp.array([1.0, -1.0]), 0.5)
    >>> bool(mm.ok), round(float(mm.norm), 6), bool(mm.relative_gap < 1e-12)
    (True, 1.0, True)
    """
    y, gamma = _check(X, y, a, gamma, pattern)
    X = inexact(X, name="X")
    if pattern is not None and jnp.asarray(pattern).dtype != bool:
        raise ValueError(f"`pattern` must be boolean, got {jnp.asarray(pattern).dtype}")
    if tol is not None:
        tol = check_positive("tol", tol, scalar=True)
    if pattern is None:
        pattern = (a[:, None] * y[None, :]) > 0
    return _max_margin(X, y, a, jnp.asarray(gamma, X.dtype), pattern, tol).raise_if_failed(throw)


@eqx.filter_jit
def _max_margin(X, y, a, gamma, pattern, tol):
    # The program is solved for X and a scaled by powers of 2 to max |.| in [1, 2) (exact):
    # W_mm(s X, t a) = W_mm(X, a) / (s t), so the Gram matrix neither under- nor overflows
    # for data of any scale; lam, the norm and the gap are scaled back at the end.
    ex, ea = binary_exponent(X), binary_exponent(a)
    X, a = times_power_of_two(X, -ex), times_power_of_two(a, -ea)
    k = ex + ea  # W_mm of the data = W_mm of the scaled data x 2^-k
    n = X.shape[0]
    c = jnp.where(pattern, 1.0, gamma)  # (m, n): phi's slope on each (neuron, sample)
    K = (y[:, None] * y[None, :]) * (X @ X.T)
    G = K * ((a[:, None] ** 2 * c).T @ c)
    gram_finite = jnp.all(jnp.isfinite(G))
    G = jnp.where(gram_finite, G, 0.0)
    scale = jnp.max(jnp.diagonal(G))
    scale = jnp.where(scale > 0, scale, 1.0)
    eps = jnp.finfo(X.dtype).eps
    tol = 1e3 * eps * scale if tol is None else tol
    qp = _nnqp(G, jnp.ones((n,), X.dtype), tol, 10 * n)
    lam, it = qp.lam, qp.stats["num_steps"]
    finite = jnp.all(jnp.isfinite(lam)) & (jnp.max(jnp.abs(lam)) < 1e12 / scale)
    # Farkas: the margins are infeasible iff some lam >= 0, lam != 0 has G lam = 0 (then
    # sum_i lam_i z_i = 0 for the lifted features z_i, and no W has every <W, z_i> >= 1).
    # Where the active set breaks down on a singular G, the dual regularized by delta I
    # finds such a lam: it stays bounded for feasible data and grows like 1 / delta otherwise.
    reg = _nnqp(G + 1e-12 * scale * jnp.eye(n, dtype=G.dtype), jnp.ones((n,), X.dtype), tol, 10 * n)
    lam_r = jnp.where(jnp.isfinite(reg.lam), reg.lam, 0.0)
    total = jnp.sum(lam_r)
    farkas = (total > 0) & (jnp.max(jnp.abs(G @ lam_r)) <= 1e-8 * scale * total)
    finite = finite & ~farkas & gram_finite
    lam = jnp.where(finite, lam, 0.0)
    margins = G @ lam
    W = (a[:, None] * c * y[None, :] * lam[None, :]) @ X  # w_j = a_j sum_i lam_i c_ji y_i x_i
    quad = lam @ margins
    norm = jnp.sqrt(quad)
    worst = jnp.min(margins)
    primal = 0.5 * quad / jnp.minimum(1.0, jnp.where(worst > 0, worst, 1.0)) ** 2
    gap = primal - (jnp.sum(lam) - 0.5 * quad)
    w = 1.0 - margins
    kkt = jnp.max(
        jnp.concatenate([-jnp.minimum(lam, 0.0), jnp.maximum(w, 0.0), jnp.abs(lam * w) / scale])
    )
    consistent = jnp.all(((W @ X.T) > 0) == pattern)
    certified = (kkt <= 10 * tol) & (worst >= 1.0 - 1e-9)  # KKT and every margin >= 1
    result = RESULTS.where(
        gram_finite,
        RESULTS.where(
            finite,
            RESULTS.where(certified, RESULTS.successful, RESULTS.max_steps_reached),
            RESULTS.infeasible,
        ),
        RESULTS.nonfinite,
    )
    return MaxMarginSolution(
        W=jnp.where(finite, W / jnp.where(norm > 0, norm, 1.0), 0.0),
        dual=times_power_of_two(times_power_of_two(lam, -k), -k),
        norm=jnp.where(finite, times_power_of_two(norm, -k), jnp.inf),
        margins=margins,
        duality_gap=times_power_of_two(times_power_of_two(gap, -k), -k),
        relative_gap=gap / jnp.where(primal > 0, primal, 1.0),
        kkt_residual=kkt,
        pattern=pattern,
        pattern_consistent=consistent & finite,
        result=result,
        stats={"num_steps": it},
    )


def effective_direction(W: Float[Array, "m d"], a: Float[Array, " m"]) -> Float[Array, " d"]:
    """v = sum_j a_j w_j. When the neurons of each sign of a are parallel (as at the max-margin
    direction of the all-activated pattern), f(x) > 0 exactly when <v, x> > 0: phi is
    increasing and positively homogeneous, so A_+ phi(<u_+, x>) > A_- phi(<u_-, x>) iff
    <A_+ u_+ - A_- u_-, x> > 0.

    **Arguments:**

    - `W` (m, d): the first layer, finite.
    - `a` (m,): the second layer, finite.

    **Returns:** v, an array of shape (d,).

    **Raises:** `ValueError` where `W` is not 2-D, `a` is not (m,), or either holds a
    non-finite entry.

    >>> effective_direction(jnp.array([[1.0, 0.0], [0.0, 1.0]]), jnp.array([1.0, -1.0])).tolist()
    [1.0, -1.0]
    """
    check_shape("W", W, (None, None))
    check_shape("a", a, (jnp.shape(W)[0],))
    return check_finite("a", a) @ check_finite("W", W)


def one_minus_cos(W: Float[Array, "... m d"], W_star: Float[Array, "m d"]) -> Float[Array, "..."]:
    """1 - cos(W, W*) = ||W/||W|| - W*/||W*|| ||^2 / 2, accurate down to 1e-32 (no
    cancellation).

    **Arguments:**

    - `W` (..., m, d): the matrix, or a stack of them along leading axes (checkpoints);
      finite and nonzero.
    - `W_star` (m, d): the reference matrix, finite and nonzero.

    **Returns:** 1 - cos(W, W*), an array of `W`'s leading shape (a scalar for one matrix).

    **Raises:** `ValueError` where `W_star` is not 2-D, `W` does not end in `W_star`'s shape,
    either holds a non-finite entry, or either is zero (the cosine is undefined).

    >>> float(one_minus_cos(jnp.array([[1.0, 1e-8]]), jnp.array([[1.0, 0.0]]))) / 5e-17
    1.0000000000000002
    """
    check_shape("W_star", W_star, (None, None))
    check_shape("W", W, (*(None,) * (jnp.ndim(W) - 2), *jnp.shape(W_star)))
    W, W_star = check_finite("W", W), check_finite("W_star", W_star)
    # scale-free: each matrix divided by its largest entry first, so that ||W|| neither
    # overflows (entries ~ 1e200) nor underflows (~ 1e-200) before the cosine is formed
    top = jnp.max(jnp.abs(W), axis=(-2, -1), keepdims=True)
    W = W / jnp.where(top > 0, top, 1.0)
    top_star = jnp.max(jnp.abs(W_star))
    W_star = W_star / jnp.where(top_star > 0, top_star, 1.0)
    norm_w = jnp.linalg.norm(W, axis=(-2, -1), keepdims=True)
    norm_star = jnp.linalg.norm(W_star)
    message = "`W` and `W_star` must be nonzero: the cosine of a zero matrix is undefined"
    norm_w = check_value(norm_w, jnp.all(norm_w > 0) & (norm_star > 0), message)
    u = W / norm_w
    v = W_star / norm_star
    return 0.5 * jnp.sum((u - v) ** 2, axis=(-2, -1))


def with_flips(clean, label_noise):
    """The error eta + (1 - 2 eta) p against labels flipped with probability eta, from the
    error p against clean labels."""
    return label_noise + (1.0 - 2.0 * label_noise) * clean


def mixture_test_error(
    W: Float[Array, "m d"],
    a: Float[Array, " m"],
    mu: Float[Array, " d"],
    *,
    noise_scale=1.0,
    cov: Float[Array, "d d"] | None = None,
    label_noise=0.0,
) -> Float[Array, ""]:
    """Closed-form test error P(y f(x) < 0) on x = y~ mu + z, z ~ N(0, Sigma), for a network
    whose decision boundary is the hyperplane <v, x> = 0, v = `effective_direction(W, a)`:

        err = eta + (1 - 2 eta) Phi(-<v, mu> / ||Sigma^(1/2) v||),

    Sigma = `cov` or noise_scale^2 I, eta = `label_noise`. Exact for Gaussian noise when the
    boundary is linear; for other noise it is the Gaussian approximation of the margin's
    distribution.

    **Arguments:**

    - `W` (m, d), `a` (m,): the net's first and second layer, finite, with
      v = sum_j a_j w_j nonzero.
    - `mu` (d,): the class mean, finite.
    - `noise_scale`: sigma, finite and > 0 (default 1); used only without `cov`.
    - `cov` (d, d): the noise covariance Sigma, finite (default None: sigma^2 I).
    - `label_noise`: eta, the probability that a test label is flipped, in [0, 1/2)
      (default 0).

    **Returns:** the test error, a scalar array (broadcast against an array-valued
    `noise_scale` or `label_noise`).

    **Raises:** `ValueError` on shapes that do not match, non-finite `W`, `a`, `mu` or `cov`,
    a `noise_scale` that is not finite and > 0, a `label_noise` outside [0, 1/2), or
    v^T Sigma v <= 0 (a zero effective direction, or a `cov` that is not positive there).

    >>> W = jnp.array([[1.0, 0.0], [0.0, 0.0]]); a = jnp.array([1.0, -1.0])
    >>> round(float(mixture_test_error(W, a, jnp.array([1.0, 0.0]))), 4)  # Phi(-1)
    0.1587
    """
    label_noise = check_label_noise(label_noise)
    noise_scale = check_positive("noise_scale", noise_scale)
    v = effective_direction(W, a)
    check_shape("mu", mu, (jnp.shape(W)[-1],))
    mu = check_finite("mu", mu)
    if cov is not None:
        check_shape("cov", cov, (jnp.shape(W)[-1], jnp.shape(W)[-1]))
        cov = check_finite("cov", cov)
    top = jnp.max(jnp.abs(v))  # the error is scale-free in v: no overflow at |W| ~ 1e200
    v = v / jnp.where(top > 0, top, 1.0)
    spread = noise_scale * jnp.linalg.norm(v) if cov is None else jnp.sqrt(v @ cov @ v)
    message = "the net's effective direction sum_j a_j w_j must be nonzero (with `cov` PSD)"
    spread = check_value(spread, spread > 0, message)
    clean = _normal.cdf(-(v @ mu) / spread)
    return with_flips(clean, label_noise)


def signal_regime(n, signal, d, noise_scale=1.0) -> Float[Array, ""]:
    """The phase-transition indicator n ||mu||^2 / R with R = E||z||^2 = tr(Sigma) = d sigma^2.

    For the max-margin direction v ~ n mu + sum_i y_i z_i of nearly equal multipliers,
    <v, mu> ~ n ||mu||^2 and ||v||^2 ~ n^2 ||mu||^2 + n R: below 1 (weak signal) the noise
    term dominates and err ~ Phi(-sqrt(n) ||mu||^2 / sqrt(R)); above 1 (strong signal) the
    signal dominates and err ~ Phi(-||mu|| / sigma), the Bayes error.

    **Arguments:**

    - `n`: the number of training samples, an integer >= 1.
    - `signal`: ||mu||, finite and >= 0 (a number or an array).
    - `d`: the input dimension, an integer >= 1.
    - `noise_scale`: sigma, the noise's per-coordinate standard deviation, finite and > 0
      (default 1).

    **Returns:** n ||mu||^2 / (d sigma^2), an array of the broadcast shape of `signal` and
    `noise_scale`.

    **Raises:** `ValueError` where `n` or `d` is not an integer >= 1, `signal` is not finite
    and >= 0, or `noise_scale` is not finite and > 0.

    >>> float(signal_regime(20, 10.0, 400))
    5.0
    """
    n, d = check_positive_int("n", n), check_positive_int("d", d)
    noise_scale = check_positive("noise_scale", noise_scale)
    signal = check_positive("signal", signal, allow_zero=True)  # ||mu||: finite, >= 0
    ratio = jnp.asarray(signal) / jnp.asarray(noise_scale)  # no overflow of signal^2
    return n * ratio**2 / d


def bayes_error(signal, noise_scale=1.0, label_noise=0.0, *, dof=None):
    """The Bayes error of the mixture x = y mu + z, z ~ N(0, sigma^2 I), with the labels
    flipped with probability eta: eta + (1 - 2 eta) Phi(-||mu|| / sigma), attained by the
    direction mu itself.

    With `dof`, the noise entries are Student-t with `dof` degrees of freedom scaled to
    variance sigma^2, as `dynamics.gaussian_mixture(noise="student_t")` draws them, with mu
    along a coordinate axis: only that coordinate carries the label, its density
    f(x_1 - y ||mu||) is symmetric and decreasing in |x_1 - y ||mu|||, so the Bayes rule is
    sign(x_1) and the error is eta + (1 - 2 eta) F_t(-||mu|| / (sigma sqrt((dof - 2) / dof))),
    F_t(-x) = I_{dof / (dof + x^2)}(dof / 2, 1 / 2) / 2.

    **Arguments:**

    - `signal`: ||mu||, finite and >= 0 (a number or an array).
    - `noise_scale`: sigma, finite and > 0 (default 1).
    - `label_noise`: eta, the probability of a flipped label, in [0, 1/2) (default 0).
    - `dof`: None (default) for Gaussian noise, or the Student-t degrees of freedom: one
      finite number > 2, known outside `jit` (it selects the formula); from 1e6 on the
      Gaussian formula is used.

    **Returns:** the Bayes error: a Python float where `signal`, `noise_scale` and
    `label_noise` are Python numbers, else an array of the inputs' broadcast shape.

    **Raises:** `ValueError` where `signal` is not finite and >= 0, `noise_scale` is not
    finite and > 0, `label_noise` is outside [0, 1/2), or `dof` is traced, not a real number,
    or not finite and > 2.

    >>> round(bayes_error(1.0), 6)
    0.158655
    >>> round(bayes_error(3.0, dof=3.0), 4) > round(bayes_error(3.0), 4)  # heavier tails
    True
    """
    label_noise = check_label_noise(label_noise)
    noise_scale = check_positive("noise_scale", noise_scale)
    signal = check_positive("signal", signal, allow_zero=True)  # ||mu||, a norm
    python = isinstance(signal, float | int) and isinstance(noise_scale, float | int)
    if dof is not None:
        if is_concrete(dof) and np.ndim(dof) == 0 and np.asarray(dof).dtype.kind in "iuf":
            dof = float(np.asarray(dof))  # a 0-d array (it selects the formula: concrete)
        elif not is_concrete(dof):
            raise ValueError(
                "`dof` must be a number known outside `jit` (it selects the formula), got a "
                "traced value"
            )
        real = isinstance(dof, int | float | np.integer | np.floating) and not isinstance(dof, bool)
        if not (real and math.isfinite(dof) and dof > 2):
            raise ValueError(f"`dof` must be a finite number > 2 (finite variance), got {dof!r}")
        if dof < 1e6:  # beyond, the t law is the Gaussian one to ~1e-7
            with jax.enable_x64(True) if python else contextlib.nullcontext():  # Python: f64
                x = jnp.asarray(signal, float) / (noise_scale * math.sqrt((dof - 2.0) / dof))
                clean = 0.5 * betainc(0.5 * dof, 0.5, dof / (dof + x**2))
                out = with_flips(clean, label_noise)
                return float(out) if python and not isinstance(label_noise, jnp.ndarray) else out
    if python:
        clean = 0.5 * math.erfc(signal / noise_scale / math.sqrt(2.0))
        return with_flips(clean, label_noise)
    clean = _normal.cdf(-jnp.asarray(signal) / noise_scale)
    return with_flips(clean, label_noise)
