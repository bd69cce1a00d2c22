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
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.scipy.stats import norm as _normal
from jaxtyping import Array, Bool, Float, Int


class MaxMargin(eqx.Module):
    """Result of `max_margin`.

    - `W` (m, d): the limit direction, unit Frobenius norm; `dual` (n,): multipliers lam.
    - `norm`: ||W_mm||_F of the min-norm solution with margins >= 1 (the normalized margin
      of `W` is 1 / `norm`); `margins` (n,): y_i f(x_i; W_mm), >= 1 with equality on support.
    - `duality_gap`: P - D >= 0 with P the primal value of W_mm scaled to feasibility and D the
      dual value of lam; `relative_gap` = gap / P. `kkt_residual`: max violation of
      lam >= 0, 1 - G lam <= 0 off the support, complementary slackness.
    - `pattern`: the pattern s_ji > 0 solved for; `pattern_consistent`: whether W_mm realizes
      it (sign <w_j, x_i> = s_ji for every j, i: for the default pattern, every neuron stays
      activated). `feasible`: False when the program has no solution (the dual is unbounded:
      the data are not separable with this pattern); W and lam are then 0, never NaN.
    - `iterations`, `converged`: active-set iterations and whether the KKT test passed.
    """

    W: Float[Array, "m d"]
    dual: Float[Array, " n"]
    norm: Float[Array, ""]
    margins: Float[Array, " n"]
    duality_gap: Float[Array, ""]
    relative_gap: Float[Array, ""]
    kkt_residual: Float[Array, ""]
    pattern: Bool[Array, "m n"]
    pattern_consistent: Bool[Array, ""]
    feasible: Bool[Array, ""]
    iterations: Int[Array, ""]
    converged: Bool[Array, ""]


def activation_pattern(W: Float[Array, "m d"], X: Float[Array, "n d"]) -> Bool[Array, "m n"]:
    """s_ji = [<w_j, x_i> > 0]: the neurons' activation pattern on the samples."""
    return (W @ X.T) > 0


def all_activated(W, a, X, y) -> Bool[Array, ""]:
    """Whether a_j y_i <x_i, w_j> > 0 for every neuron j and sample i."""
    return jnp.all(a[:, None] * y[None, :] * (W @ X.T) > 0)


def check_gamma(gamma) -> None:
    """The leaky slope must lie in (0, 1) (`ValueError`; arrays are not checked)."""
    if isinstance(gamma, float | int) and not 0.0 < gamma < 1.0:
        raise ValueError(f"`gamma` must lie in (0, 1), got {gamma}")


def _check(X, y, a, gamma, pattern):
    if jnp.ndim(X) != 2:
        raise ValueError(f"`X` must have shape (n, d), got {jnp.shape(X)}")
    n = jnp.shape(X)[0]
    if jnp.shape(y) != (n,):
        raise ValueError(f"`y` must have shape (n,) = ({n},) to match `X`, got {jnp.shape(y)}")
    if jnp.ndim(a) != 1:
        raise ValueError(f"`a` must have shape (m,), got {jnp.shape(a)}")
    if pattern is not None and jnp.shape(pattern) != (jnp.shape(a)[0], n):
        raise ValueError(
            f"`pattern` must have shape (m, n) = ({jnp.shape(a)[0]}, {n}), got {jnp.shape(pattern)}"
        )
    check_gamma(gamma)
    if not isinstance(y, jax.core.Tracer) and not bool(jnp.all(jnp.abs(y) == 1)):
        raise ValueError("labels `y` must take values in {-1, +1}")


def _spd_solve(M, b):
    """M^{-1} b for symmetric positive definite M by Cholesky, in plain XLA operations.

    Deliberately not `jnp.linalg.solve`: LAPACK custom calls inside a sharded program that
    also runs a long loop were seen to deadlock on XLA:CPU (see `integrators.sweep`), and this
    solver runs inside such programs. NaN where M is not positive definite.
    """
    n = b.shape[0]
    idx = jnp.arange(n)

    def column(j, L):
        v = M[:, j] - L @ L[j, :]
        diag = jnp.sqrt(v[j])
        return L.at[:, j].set(jnp.where(idx > j, v / diag, jnp.where(idx == j, diag, 0.0)))

    L = jax.lax.fori_loop(0, n, column, jnp.zeros_like(M))

    def forward(i, z):
        return z.at[i].set((b[i] - L[i, :] @ z) / L[i, i])

    def backward(k, x):
        i = n - 1 - k
        return x.at[i].set((z[i] - L[:, i] @ x) / L[i, i])

    z = jax.lax.fori_loop(0, n, forward, jnp.zeros_like(b))
    return jax.lax.fori_loop(0, n, backward, jnp.zeros_like(b))


def _nnqp(G, b, tol, max_iter):
    """Lawson-Hanson active set for min 1/2 lam^T G lam - b^T lam, lam >= 0 (G PSD)."""
    n = b.shape[0]
    eye = jnp.eye(n, dtype=G.dtype)

    def solve_on(passive):
        both = passive[:, None] & passive[None, :]
        M = jnp.where(both, G, eye)
        return jnp.where(passive, _spd_solve(M, jnp.where(passive, b, 0.0)), 0.0)

    def inner(state):
        lam, passive, it, _ = state
        s = solve_on(passive)
        bad = passive & (s <= 0)
        ratio = jnp.where(bad, lam / jnp.where(bad, lam - s, 1.0), jnp.inf)
        block = jnp.argmin(ratio)
        step = jnp.minimum(1.0, ratio[block])
        lam = jnp.where(jnp.any(bad), (lam + step * (s - lam)).at[block].set(0.0), s)
        passive = passive & (lam > 0)
        return jnp.where(passive, lam, 0.0), passive, it + 1, jnp.any(bad)

    def outer_cond(state):
        lam, passive, it = state
        w = b - G @ lam
        return (it < max_iter) & jnp.any(~passive & (w > tol)) & jnp.all(jnp.isfinite(lam))

    def outer(state):
        lam, passive, it = state
        w = b - G @ lam
        j = jnp.argmax(jnp.where(passive, -jnp.inf, w))
        passive = passive.at[j].set(True)
        lam, passive, it, _ = jax.lax.while_loop(
            lambda s: s[3] & (s[2] < max_iter) & jnp.all(jnp.isfinite(s[0])),
            inner,
            inner((lam, passive, it, True)),
        )
        return lam, passive, it

    init = (jnp.zeros((n,), G.dtype), jnp.zeros((n,), bool), jnp.zeros((), jnp.int32))
    return jax.lax.while_loop(outer_cond, outer, init)


def max_margin(
    X: Float[Array, "n d"],
    y: Float[Array, " n"],
    a: Float[Array, " m"],
    gamma: float,
    pattern: Bool[Array, "m n"] | None = None,
    *,
    tol: float | None = None,
) -> MaxMargin:
    """The limit direction of GD on the exponential loss: min ||W||_F^2 s.t. y_i f(x_i; W) >= 1.

    phi is fixed by the activation `pattern` (m, n) (True where <w_j, x_i> > 0); the default
    is the all-activated pattern s_ji = [a_j y_i > 0] of the strong-signal case. Solved exactly
    through its dual by an active-set method (module docstring) until the KKT conditions hold
    to `tol` (default 1e3 x machine epsilon x max G_ii); the result carries the duality gap
    and the KKT residual as its certificate. Jit-compiled and `jax.vmap`-able.

    Bad shapes, gamma outside (0, 1) or labels outside {-1, +1} raise `ValueError`; an
    infeasible program (non-separable data for this pattern) returns `feasible=False` with
    W = 0, never NaN and never a hang (the loop is bounded by 10 n iterations).

    ```python
    mm = max_margin(X, y, fixed_second_layer(10), 0.1)
    assert mm.converged and mm.relative_gap < 1e-12
    ```
    """
    _check(X, y, a, gamma, pattern)
    if pattern is None:
        pattern = (a[:, None] * y[None, :]) > 0
    return _max_margin(X, y, a, jnp.asarray(gamma, X.dtype), pattern, tol)


@eqx.filter_jit
def _max_margin(X, y, a, gamma, pattern, tol):
    n = X.shape[0]
    c = jnp.where(pattern, 1.0, gamma)  # (m, n): phi's slope on each (neuron, sample)
    K = (y[:, None] * y[None, :]) * (X @ X.T)
    G = K * ((a[:, None] ** 2 * c).T @ c)
    scale = jnp.max(jnp.diagonal(G))
    eps = jnp.finfo(X.dtype).eps
    tol = 1e3 * eps * scale if tol is None else tol
    lam, passive, it = _nnqp(G, jnp.ones((n,), X.dtype), tol, 10 * n)
    finite = jnp.all(jnp.isfinite(lam)) & (jnp.max(jnp.abs(lam)) < 1e12 / scale)
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
    converged = finite & (kkt <= 10 * tol) & (it < 10 * n)
    return MaxMargin(
        W=jnp.where(finite, W / jnp.where(norm > 0, norm, 1.0), 0.0),
        dual=lam,
        norm=jnp.where(finite, norm, jnp.inf),
        margins=margins,
        duality_gap=gap,
        relative_gap=gap / jnp.where(primal > 0, primal, 1.0),
        kkt_residual=kkt,
        pattern=pattern,
        pattern_consistent=consistent & finite,
        feasible=finite,
        iterations=it,
        converged=converged,
    )


def effective_direction(W: Float[Array, "m d"], a: Float[Array, " m"]) -> Float[Array, " d"]:
    """v = sum_j a_j w_j. When the neurons of each sign of a are parallel (as at the max-margin
    direction of the all-activated pattern), f(x) > 0 exactly when <v, x> > 0: phi is
    increasing and positively homogeneous, so A_+ phi(<u_+, x>) > A_- phi(<u_-, x>) iff
    <A_+ u_+ - A_- u_-, x> > 0."""
    return a @ W


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

    Sigma = `cov` or noise_scale^2 I, eta = `label_noise` (the test labels flipped with
    probability eta). Exact for Gaussian noise when the boundary is linear; for other noise it
    is the Gaussian approximation of the margin's distribution.
    """
    v = effective_direction(W, a)
    spread = noise_scale * jnp.linalg.norm(v) if cov is None else jnp.sqrt(v @ cov @ v)
    clean = _normal.cdf(-(v @ mu) / spread)
    return label_noise + (1.0 - 2.0 * label_noise) * clean


def signal_regime(n, signal, d, noise_scale=1.0) -> Float[Array, ""]:
    """The phase-transition indicator n ||mu||^2 / R with R = E||z||^2 = tr(Sigma) = d sigma^2.

    For the max-margin direction v ~ n mu + sum_i y_i z_i of nearly equal multipliers,
    <v, mu> ~ n ||mu||^2 and ||v||^2 ~ n^2 ||mu||^2 + n R: below 1 (weak signal) the noise
    term dominates and err ~ Phi(-sqrt(n) ||mu||^2 / sqrt(R)); above 1 (strong signal) the
    signal dominates and err ~ Phi(-||mu|| / sigma), the Bayes error.
    """
    return n * jnp.asarray(signal) ** 2 / (d * jnp.asarray(noise_scale) ** 2)
