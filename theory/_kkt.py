"""A KKT certificate for the limit direction of GD on leaky-ReLU nets, for any activation pattern.

For f(x; W) = sum_j a_j phi(<w_j, x>), phi(z) = max(z, gamma z), with a fixed, the normalized
margin is 1-homogeneous in W, and GD on the exponential loss converges in direction to a KKT
point of margin maximization (Lyu and Li, 2020):

    min 1/2 ||W||_F^2   subject to   q_i(W) = y_i f(x_i; W) >= 1.

With W scaled so that min_i q_i = 1 (W~ = W / min_i q_i), the KKT conditions with Clarke's
subdifferential read: there are lam >= 0 and slopes c_ji in d phi(<w~_j, x_i>) (1 where the
pre-activation is positive, gamma where negative, anything in [gamma, 1] on the kink) with

    w~_j = a_j sum_i lam_i c_ji y_i x_i          (stationarity)
    lam_i (q_i(W~) - 1) = 0                      (complementary slackness).

`kkt_residual` finds the multipliers and the kink slopes that fit stationarity best (the
least-squares residual, relative to ||W~||) and reports it beside the complementarity
sum_i lam_i (q_i - 1) / sum_i lam_i: an (eps, delta)-KKT point in Lyu and Li's sense. Unlike
`max_margin`'s program (5) it needs no all-activated pattern: W's own pattern is used, neurons
on a kink included. Fitting alternates two convex problems (the multipliers by the active-set
NNQP with the slopes fixed, then the kink slopes by projected gradient with the multipliers
fixed), so a small residual certifies a KKT point and a large one is an upper bound on the
best fit (the joint problem is bilinear).

Paper: *Directional Convergence, Benign Overfitting of Gradient Descent in leaky ReLU two-layer
Neural Networks* (ICLR 2026, arXiv:2505.16204).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from ._nnqp import _nnqp
from ._solution import RESULTS, AbstractSolution
from .checks import (
    check_finite,
    check_gamma,
    check_plus_minus_one,
    check_positive,
    check_positive_int,
    check_shape,
    inexact,
)


class KKTResidualSolution(AbstractSolution):
    """Result of `kkt_residual`.

    - `residual`: max(`stationarity`, `complementarity`), 0 at an exact KKT point.
    - `stationarity`: ||W~ - sum_i lam_i y_i (a_j c_ji x_i)_j||_F / ||W~||_F.
    - `complementarity`: sum_i lam_i (q_i - 1) / sum_i lam_i (0 when lam = 0).
    - `multipliers` (n,): lam >= 0; `slopes` (m, n): c_ji in [gamma, 1]; `on_kink` (m, n):
      the entries treated as on the kink (|<w_j, x_i>| <= `kink_tol` ||w_j|| ||x_i||).
    - `min_margin`: min_i y_i f(x_i; W) of the W given (the scale removed); `margins` (n,):
      q_i(W~) >= 1.
    - `result`: `successful`, or `infeasible` where W does not separate the data
      (min margin <= 0: no scaling of W is feasible); `stats`: NNQP steps.

    >>> r = kkt_residual(jnp.array([[1.0, 0.0]]), jnp.array([1.0]), jnp.eye(2),
    ...                  jnp.array([1.0, 1.0]), 0.5)
    >>> r.result == RESULTS.infeasible, float(r.min_margin)  # sample 2 is on the kink
    (Array(True, dtype=bool), 0.0)
    """

    result: RESULTS
    stats: dict
    residual: Float[Array, ""]
    stationarity: Float[Array, ""]
    complementarity: Float[Array, ""]
    multipliers: Float[Array, " n"]
    slopes: Float[Array, "m n"]
    on_kink: Bool[Array, "m n"]
    min_margin: Float[Array, ""]
    margins: Float[Array, " n"]


def kkt_residual(
    W: Float[Array, "m d"],
    a: Float[Array, " m"],
    X: Float[Array, "n d"],
    y: Float[Array, " n"],
    gamma: float,
    *,
    kink_tol: float = 1e-9,
    rounds: int = 20,
) -> KKTResidualSolution:
    """The KKT residual of margin maximization at W, for W's own activation pattern.

    See the module docstring for the conditions. Jit-compiled and `jax.vmap`-able (over GD
    checkpoints).

    **Arguments:**

    - `W` (m, d): the first layer (any scale), real and finite, m >= 1.
    - `a` (m,): the fixed second layer, real and finite.
    - `X` (n, d): the inputs, real and finite, n >= 1.
    - `y` (n,): the labels, in {-1, +1}.
    - `gamma`: the leaky-ReLU slope, one number in (0, 1).
    - `kink_tol`: the relative size of a pre-activation counted as on the kink
      (|<w_j, x_i>| <= `kink_tol` ||w_j|| ||x_i||), one finite number >= 0 (default 1e-9).
    - `rounds`: the alternations of the two fits, an integer >= 1 (default 20).

    **Returns:** a `KKTResidualSolution`: `residual`, `stationarity`, `complementarity`
    (`inf` where W does not separate the data), `multipliers` (n,), `slopes` (m, n),
    `on_kink` (m, n), `min_margin`, `margins` (n,), `result` (`successful` or `infeasible`)
    and `stats`.

    **Raises:** `ValueError` on shapes that do not match, no sample or no neuron, `gamma`
    outside (0, 1), a `kink_tol` that is not one finite number >= 0, `rounds` not an integer
    >= 1, non-finite `W`, `X` or `a`, or labels outside {-1, +1}.

    At `max_margin`'s solution the residual is at rounding level; at a separating W that is
    not the limit direction it is O(1):

    >>> from theory import max_margin
    >>> X = jnp.array([[2.0, 0.0], [0.0, 1.0]]); y = jnp.array([1.0, -1.0])
    >>> a = jnp.array([1.0, -1.0])
    >>> mm = max_margin(X, y, a, 0.5)
    >>> bool(kkt_residual(mm.W, a, X, y, 0.5).residual < 1e-10)
    True
    >>> other = kkt_residual(jnp.array([[1.0, 0.0], [0.0, 1.0]]), a, X, y, 0.5)
    >>> bool(other.ok), round(float(other.residual), 4), other.on_kink.tolist()
    (True, 0.4472, [[False, True], [True, False]])
    """
    check_shape("W", W, (None, None))
    m, d = jnp.shape(W)
    check_shape("X", X, (None, d))
    n = jnp.shape(X)[0]
    if n == 0 or m == 0:
        raise ValueError(f"need at least one sample and one neuron, got n = {n}, m = {m}")
    check_shape("y", y, (n,))
    check_shape("a", a, (m,))
    gamma = check_gamma(gamma)
    kink_tol = check_positive("kink_tol", kink_tol, allow_zero=True, scalar=True)
    rounds = check_positive_int("rounds", rounds)  # 2.5, True or '3' refused, not truncated
    dtype = jnp.result_type(jnp.asarray(W), jnp.asarray(X), float)
    W = check_finite("W", inexact(W, dtype, name="W"))
    X = check_finite("X", inexact(X, dtype, name="X"))
    a = check_finite("a", inexact(a, dtype, name="a"))
    y = jnp.asarray(check_plus_minus_one("y", y), dtype)
    return _kkt(W, X, y, a, jnp.asarray(gamma, dtype), jnp.asarray(kink_tol, dtype), rounds)


@eqx.filter_jit
def _kkt(W, X, y, a, gamma, kink_tol, rounds):
    Z = W @ X.T  # (m, n) pre-activations
    scale_z = jnp.linalg.norm(W, axis=1)[:, None] * jnp.linalg.norm(X, axis=1)[None, :]
    on_kink = jnp.abs(Z) <= kink_tol * scale_z
    fixed = jnp.where(Z > 0, 1.0, gamma)
    q = y * (jnp.where(Z > 0, Z, gamma * Z).T @ a)  # margins of W
    q_min = jnp.min(q)
    separating = q_min > 0
    s = jnp.where(separating, q_min, 1.0)
    Wt, margins = W / s, q / s
    K = (y[:, None] * y[None, :]) * (X @ X.T)
    P = Wt @ X.T  # <w~_j, x_i>
    norm_w = jnp.linalg.norm(Wt)
    norm_w = jnp.where(norm_w > 0, norm_w, 1.0)

    def fit_multipliers(c):
        # min_lam ||W~ - sum_i lam_i v_i||^2, v_i = (a_j c_ji y_i x_i)_j: an NNQP
        G = K * ((a[:, None] ** 2 * c).T @ c)
        b = y * jnp.sum(a[:, None] * c * P, axis=0)
        scale = jnp.maximum(jnp.max(jnp.diagonal(G)), jnp.finfo(G.dtype).tiny)
        qp = _nnqp(G, b, 1e3 * jnp.finfo(G.dtype).eps * scale, 10 * b.shape[0])
        return jnp.where(jnp.isfinite(qp.lam), qp.lam, 0.0), qp.stats["num_steps"]

    def fit_slopes(c, lam):
        # per neuron, min over the kink slopes in [gamma, 1] of ||w~_j - a_j B_j c_j||^2,
        # B_j = (lam_i y_i x_i)_i, by projected gradient (step 1 / its Lipschitz constant)
        B = (lam * y)[:, None] * X  # (n, d)
        H = (B @ B.T) * (a**2)[:, None, None]  # (m, n, n)
        g0 = a[:, None] * (B @ Wt.T).T  # (m, n): a_j <b_i, w~_j>
        lip = jnp.maximum(jnp.linalg.norm(H, axis=(1, 2)), jnp.finfo(H.dtype).tiny)

        def step(c, _):
            grad = jnp.einsum("jik,jk->ji", H, c) - g0
            c = jnp.clip(c - grad / lip[:, None], gamma, 1.0)
            return jnp.where(on_kink, c, fixed), None

        return jax.lax.scan(step, c, None, length=50)[0]

    def alternate(carry, _):
        c, _, steps = carry
        lam, it = fit_multipliers(c)
        c = fit_slopes(c, lam)
        return (c, lam, steps + it), None

    c0 = jnp.where(on_kink, 0.5 * (1.0 + gamma), fixed)
    lam0 = jnp.zeros(X.shape[0], X.dtype)
    (c, _, steps), _ = jax.lax.scan(
        alternate, (c0, lam0, jnp.zeros((), jnp.int32)), None, length=rounds
    )
    lam, it = fit_multipliers(c)
    fit = (a[:, None] * c * (lam * y)[None, :]) @ X
    stationarity = jnp.linalg.norm(Wt - fit) / norm_w
    total = jnp.sum(lam)
    complementarity = jnp.where(total > 0, jnp.sum(lam * (margins - 1.0)) / total, 0.0)
    residual = jnp.maximum(stationarity, complementarity)
    nan = jnp.asarray(jnp.inf, X.dtype)
    return KKTResidualSolution(
        residual=jnp.where(separating, residual, nan),
        stationarity=jnp.where(separating, stationarity, nan),
        complementarity=jnp.where(separating, complementarity, nan),
        multipliers=lam,
        slopes=c,
        on_kink=on_kink,
        min_margin=q_min,
        margins=margins,
        result=RESULTS.where(separating, RESULTS.successful, RESULTS.infeasible),
        stats={"num_steps": steps + it},
    )
