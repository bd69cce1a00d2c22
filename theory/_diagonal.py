"""The saddle-to-saddle jump process of diagonal linear networks (the alpha -> 0 limit).

Pesme and Flammarion, "Saddle-to-Saddle Dynamics in Diagonal Linear Networks", NeurIPS 2023
(arXiv 2304.00488). The derivation below is written out here in this engine's conventions
(the time scale and the box [-2, 2] follow from them, not from the paper's normalization).

Model and flow. beta = u * u - v * v with u, v in R^d, the loss
L(beta) = 1/(2n) ||X beta - y||^2 and the gradient flow of F(u, v) = L(u*u - v*v) from
u = v = alpha 1. With g = grad L(beta) = X^T (X beta - y) / n,

    du/dt = -2 u * g,   dv/dt = 2 v * g,

so u = alpha e^{xi}, v = alpha e^{-xi} with xi(t) = -2 int_0^t g, and u v = alpha^2 stays
fixed: beta = 2 alpha^2 sinh(2 xi) exactly. In the rescaled clock t = log(1/alpha) t~ and
with S = 2 xi / log(1/alpha),

    dS/dt~ = -4 g(beta),   beta_i = 2 alpha^2 sinh(log(1/alpha) S_i)
                                  = sign(S_i) alpha^(2 - |S_i|) (1 - alpha^(2 |S_i|)).

This is exact at every alpha (`diagonal_flow` in the benchmarks integrates it in this log
form down to alpha = 10^-1000). As alpha -> 0, beta_i vanishes while |S_i| < 2 and cannot
stay finite past |S_i| = 2: S lives in the box [-2, 2]^d, and beta is piecewise constant.

The limit (Algorithm 1 of the paper, in these units). With the active set A = {i : |S_i| = 2}
and its signs s_i = sign(S_i), the saddle after a jump is the sign-constrained least squares

    beta^k = argmin L(beta)  s.t.  beta_i = 0 (i not in A),  s_i beta_i >= 0 (i in A),

(a nonnegative quadratic program in z_i = s_i beta_i, solved with `theory.numerics.nnqp`),
and until the next jump S moves on a straight line, S(t~) = S(t_k) - 4 (t~ - t_k) g(beta^k):
the active coordinates with beta_i != 0 have g_i = 0 (KKT) and stay on the boundary; an
active one with beta_i = 0 whose gradient points inward leaves A. The next jump is the first
time an inactive |S_i| reaches 2; the process stops when no inactive coordinate moves
(g = 0 off A): for d > n and X of full row rank, at an interpolator, which as alpha -> 0 is
the minimum-l1-norm interpolator. Before the first jump S = 4 t~ X^T y / n, so the first jump
is at t_1 = 1 / (2 ||X^T y / n||_inf).

Finite alpha (derived here for the first jump). Until the first coordinate i grows, the
others stay at alpha^(2 - |S_j|), exponentially small in log(1/alpha); coordinate i alone
follows the logistic law d|beta_i|/dt~ = 4 log(1/alpha) |beta_i| (|r_i| - G_ii |beta_i|)
(r = X^T y / n, G = X^T X / n) from 2 alpha^2 sinh(...), whose loss crosses the midpoint of
its two plateaus (beta_i = (1 - 1/sqrt 2) r_i / G_ii) at

    t~_1(alpha) = t_1 + (log(|r_i| / G_ii) - log(1 + sqrt 2)) / (4 |r_i| log(1/alpha)),

up to terms exponentially small in log(1/alpha). Later jumps shift by O(1 / log(1/alpha)) as
well; their correction is not derived here.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from ._nnqp import _nnqp
from ._solution import RESULTS, AbstractSolution
from .checks import (
    check_positive,
    check_positive_int,
    check_regression,
    check_shape,
    check_value,
    is_concrete,
)


class DiagonalJumpsSolution(AbstractSolution):
    """The jump process predicted by `diagonal_jumps` (alpha -> 0 limit, rescaled time).

    Per-jump fields are padded to `max_jumps` rows: `times` with `+inf`, `betas` and `duals`
    with the last saddle, `losses` with the last loss, `active` with the last set, `joined`
    with `-1`.

    - `times` (K,): t_1 < t_2 < ...: jump times in t~ = t / log(1/alpha).
    - `betas` (K, d): the saddle beta^k reached at jump k (held until jump k + 1).
    - `losses` (K,): L(beta^k); `initial_loss`: L(0) = mean(y^2) / 2.
    - `duals` (K, d): S(t_k), the rescaled dual variable in [-2, 2] at each jump.
    - `active` (K, d): the active set after jump k; `joined` (K,): the coordinate that
      reached the boundary at t_k (the lowest index among ties).
    - `num_jumps`: real (unpadded) jumps; `final_beta` (d,): the last saddle; `l1_norm`: its
      l1 norm; `final_loss`: its loss.
    - `first_time_finite_alpha(alpha)`: the first jump's time at finite alpha (the loss
      midpoint crossing; module docstring).
    - `result`: `successful` when the process stopped (no inactive coordinate moves),
      `max_jumps_reached` when `max_jumps` jumps did not reach the end, `nonfinite` when a
      constrained fit failed (a singular active set); `stats`: jumps and NNQP steps.
    """

    result: RESULTS
    stats: dict
    times: Float[Array, " K"]
    betas: Float[Array, "K d"]
    losses: Float[Array, " K"]
    duals: Float[Array, "K d"]
    active: Bool[Array, "K d"]
    joined: Int[Array, " K"]
    initial_loss: Float[Array, ""]
    num_jumps: Int[Array, ""]
    final_beta: Float[Array, " d"]
    final_loss: Float[Array, ""]
    l1_norm: Float[Array, ""]
    first_rate: Float[Array, ""]
    first_capacity: Float[Array, ""]

    def first_time_finite_alpha(self, alpha) -> Float[Array, ""]:
        """t~_1(alpha) = t_1 + (log(|r_i| / G_ii) - log(1 + sqrt 2)) / (4 |r_i| log(1/alpha))
        for the first coordinate i to jump (module docstring); `inf` where nothing jumps
        (X^T y = 0). `alpha` in (0, 1); a known alpha's log is taken on the host (a
        subnormal alpha, 1e-320, is flushed to 0 inside XLA), a traced one must be normal.

        >>> sol = diagonal_jumps(jnp.eye(2), jnp.array([2.0, -1.0]))
        >>> round(float(sol.first_time_finite_alpha(1e-6)), 4)
        0.4966
        """
        if isinstance(alpha, str | bool | np.bool_) or np.iscomplexobj(alpha):
            raise ValueError(f"`alpha` must be a real number in (0, 1), got {alpha!r}")
        check_shape("alpha", alpha, ())
        if jnp.ndim(self.times) != 1:
            raise ValueError(
                "first_time_finite_alpha takes one solution: call it inside the vmap that "
                f"batched this one (its `times` have shape {jnp.shape(self.times)})"
            )
        if is_concrete(alpha):
            a = float(np.asarray(alpha))
            if not 0.0 < a < 1.0:
                raise ValueError(f"`alpha` must lie in (0, 1), got {a}")
            tau = jnp.asarray(-np.log(a), self.times.dtype)
        else:
            a = jnp.asarray(alpha)
            tiny = float(jnp.finfo(a.dtype).tiny)
            ok = (a > 0) & (a < 1) & (a >= tiny)
            a = check_value(a, ok, f"`alpha` must lie in (0, 1) and be >= {tiny:g} under jit")
            tau = -jnp.log(a)
        jumps = self.first_rate > 0
        rate = jnp.where(jumps, self.first_rate, 1.0)
        shift = jnp.log(jnp.where(jumps, self.first_capacity, 1.0)) - jnp.log1p(jnp.sqrt(2.0))
        t = jnp.where(jumps, self.times[0] + shift / (4.0 * rate * tau), jnp.inf)
        # the correction is a first-order one in 1 / log(1/alpha): where it exceeds the time
        # itself (alpha near 1: 1 - 1e-16 gave -4.2e14) it says nothing
        return check_value(
            t,
            ~jumps | (jnp.abs(t - self.times[0]) < self.times[0]),
            "`alpha` is too close to 1 for the finite-alpha correction (it exceeds the "
            "alpha -> 0 time itself): use a smaller alpha",
        )


def diagonal_jumps(
    X: Float[Array, "n d"],
    y: Float[Array, " n"],
    *,
    max_jumps: int | None = None,
    tol: float | None = None,
    throw: bool = False,
) -> DiagonalJumpsSolution:
    """The alpha -> 0 jump process of the diagonal network beta = u*u - v*v (module docstring).

    Jit-compiled and `jax.vmap`-able over datasets.

    **Arguments:**

    - `X` (n, d), `y` (n,): any real, finite data (no orthogonality needed; the active sets'
      columns must be linearly independent for the saddles to be unique, as for data in
      general position), with X^T X and X^T y within the float range.
    - `max_jumps`: the rows of the padded outputs, an integer >= 1 (default None: 2 d).
    - `tol`: the relative size below which a gradient counts as zero, one finite number > 0
      (default None: 1e3 eps).
    - `throw`: True raises where the process fails instead of returning a failed `result`
      (default False).

    **Returns:** a `DiagonalJumpsSolution`: per-jump `times` (K,), `betas` (K, d), `losses`
    (K,), `duals` (K, d), `active` (K, d), `joined` (K,) padded to K = `max_jumps` rows, and
    `num_jumps`, `final_beta` (d,), `final_loss`, `l1_norm`, `result`, `stats`.

    **Raises:** `ValueError` where `X` is not (n, d) with n, d >= 1, `y` is not (n,), either
    is not real and finite, X^T X or X^T y leaves the float range, `max_jumps` is not an
    integer >= 1, `tol` is not one finite number > 0, or `throw` is not True or False; with
    `throw=True`, `eqx.EquinoxRuntimeError` where `result` is not successful
    (`max_jumps_reached` or `nonfinite`).

    Two uncorrelated coordinates: each jumps once, the stronger first, at
    t_k = 1 / (2 |X^T y / n|_k).

    >>> X = jnp.eye(2); y = jnp.array([2.0, -1.0])
    >>> sol = diagonal_jumps(X, y)
    >>> sol.times[:2].tolist(), sol.final_beta.round(12).tolist(), int(sol.num_jumps)
    ([0.5, 1.0], [2.0, -1.0], 2)
    >>> bool(sol.ok), bool(sol.final_loss < 1e-30)
    (True, True)
    """
    X, y = check_regression("X", X, "y", y)
    dtype, d = X.dtype, X.shape[1]
    # X^T X / n and X^T y / n must stay in float's range (X, y x 1e160 overflowed them, and
    # the process ended at once with no jump, ok); the jumps are scale-free, so scale instead
    tiny, huge = float(jnp.finfo(dtype).tiny), float(jnp.finfo(dtype).max)
    floor = jnp.log(tiny / jnp.finfo(dtype).eps)
    G_max = jnp.max(jnp.abs(X.T @ X))
    r_max = jnp.max(jnp.abs(X.T @ y))
    # the scales X^T X and X^T y would have, in logs (their products underflow to 0, and
    # X = 0, no signal and no jump, is valid)
    x_log, y_log = jnp.log(jnp.max(jnp.abs(X))), jnp.log(jnp.max(jnp.abs(y)))
    ok = jnp.isfinite(G_max) & jnp.isfinite(r_max)
    ok &= jnp.isneginf(x_log) | (2 * x_log > floor)
    ok &= jnp.isneginf(x_log) | jnp.isneginf(y_log) | (x_log + y_log > floor)
    X = check_value(
        X,
        ok,
        f"`X`^T `X` or `X`^T `y` leaves float's range (entries above {huge:.0e} or, for nonzero "
        "ones, below 1e-292: inputs or labels near 1e154 or 1e-146): scale `X` and `y`",
    )
    max_jumps = 2 * d if max_jumps is None else check_positive_int("max_jumps", max_jumps)
    eps = float(jnp.finfo(dtype).eps)
    tol = 1e3 * eps if tol is None else check_positive("tol", tol, scalar=True)
    out = _jumps(X, y, max_jumps, tol)
    return out.raise_if_failed(throw)


@functools.partial(jax.jit, static_argnums=2)
def _jumps(X, y, max_jumps: int, tol):
    n, d = X.shape
    G = X.T @ X / n
    r = X.T @ y / n
    scale = jnp.maximum(jnp.max(jnp.abs(r)), jnp.finfo(X.dtype).tiny)
    grad_tol = tol * scale * d
    t_unit = 1.0 / scale

    def loss(beta):
        res = X @ beta - y
        return 0.5 * jnp.mean(res * res)

    def fit(active, signs):
        """The sign-constrained least squares on the active set (z = s beta >= 0)."""
        Gs = G * signs[:, None] * signs[None, :]
        mask = active[:, None] & active[None, :]
        Ga = jnp.where(mask, Gs, jnp.eye(d, dtype=G.dtype))
        ba = jnp.where(active, signs * r, 0.0)
        sol = _nnqp(Ga, ba, grad_tol, 10 * d + 10)
        z = jnp.where(active, sol.lam, 0.0)
        return signs * z, sol.ok, sol.stats["num_steps"]

    K = max_jumps
    init = dict(
        k=jnp.asarray(0),
        t=jnp.asarray(0.0, X.dtype),
        S=jnp.zeros(d, X.dtype),
        active=jnp.zeros(d, bool),
        beta=jnp.zeros(d, X.dtype),
        done=jnp.asarray(False),
        failed=jnp.asarray(False),
        qp_steps=jnp.asarray(0),
        times=jnp.full(K, jnp.inf, X.dtype),
        betas=jnp.zeros((K, d), X.dtype),
        losses=jnp.zeros(K, X.dtype),
        duals=jnp.zeros((K, d), X.dtype),
        actives=jnp.zeros((K, d), bool),
        joined=jnp.full(K, -1),
    )

    def cond(c):
        return (c["k"] < K) & ~c["done"] & ~c["failed"]

    def body(c):
        S, active, beta = c["S"], c["active"], c["beta"]
        slope = -4.0 * (G @ beta - r)
        signs = jnp.where(S != 0, jnp.sign(S), jnp.sign(slope))
        # active coordinates: held (beta != 0, or the gradient pushes outward: KKT), or left
        leaving = active & (beta == 0) & (slope * signs < -grad_tol)
        held = active & ~leaving
        slope = jnp.where(held, 0.0, slope)
        moving = ~held & (jnp.abs(slope) > grad_tol)
        target = 2.0 * jnp.sign(slope)
        hit = jnp.where(moving, (target - S) / jnp.where(moving, slope, 1.0), jnp.inf)
        hit = jnp.maximum(hit, 0.0)
        dt = jnp.min(hit)
        done = ~jnp.isfinite(dt)
        # ties to 1e-12 of the jump's time scale, t_unit = 1 / max |r| (times scale as 1 / r:
        # an absolute 1e-12 merged every jump of labels x 1e20, the l1 norm 31% above the LP's)
        joins = moving & (hit <= dt + 1e-12 * (dt + t_unit))
        S_new = jnp.where(joins, target, jnp.clip(S + slope * jnp.where(done, 0.0, dt), -2, 2))
        active_new = held | joins
        beta_new, ok, steps = fit(active_new, jnp.sign(S_new))
        ok = ok & jnp.all(jnp.isfinite(beta_new))
        k, t = c["k"], c["t"] + dt
        write = ~done
        first = jnp.argmax(joins)

        def put(arr, val):
            return jnp.where(write, arr.at[k].set(val), arr)

        return dict(
            k=jnp.where(write, k + 1, k),
            t=jnp.where(write, t, c["t"]),
            S=jnp.where(write, S_new, S),
            active=jnp.where(write, active_new, active),
            beta=jnp.where(write & ok, beta_new, beta),
            done=done,
            failed=write & ~ok,
            qp_steps=c["qp_steps"] + steps,
            times=put(c["times"], t),
            betas=put(c["betas"], beta_new),
            losses=put(c["losses"], loss(beta_new)),
            duals=put(c["duals"], S_new),
            actives=put(c["actives"], active_new),
            joined=put(c["joined"], first),
        )

    return _solution(jax.lax.while_loop(cond, body, init), G, r, loss, K, d, X.dtype)


def _solution(c, G, r, loss, K, d, dtype) -> DiagonalJumpsSolution:
    """The jump loop's final carry `c` as a `DiagonalJumpsSolution`, its per-jump fields
    padded to `K` rows (the class docstring says with what)."""
    num = c["k"]
    rows = jnp.arange(K)[:, None] < num
    last = jnp.maximum(num - 1, 0)
    pad_beta = jnp.where(num > 0, c["betas"][last], jnp.zeros(d, dtype))
    betas = jnp.where(rows, c["betas"], pad_beta)
    final_loss = loss(c["beta"])
    losses = jnp.where(rows[:, 0], c["losses"], final_loss)
    duals = jnp.where(rows, c["duals"], c["S"])
    actives = jnp.where(rows, c["actives"], c["active"])
    # the first jump's coordinate, for the finite-alpha correction
    i = jnp.argmax(jnp.abs(r))
    result = RESULTS.where(
        c["failed"],
        RESULTS.nonfinite,
        RESULTS.where(c["done"], RESULTS.successful, RESULTS.max_jumps_reached),
    )
    return DiagonalJumpsSolution(
        result=result,
        stats={"num_jumps": num, "num_qp_steps": c["qp_steps"]},
        times=c["times"],
        betas=betas,
        losses=losses,
        duals=duals,
        active=actives,
        joined=c["joined"],
        initial_loss=loss(jnp.zeros(d, dtype)),
        num_jumps=num,
        final_beta=c["beta"],
        final_loss=final_loss,
        l1_norm=jnp.sum(jnp.abs(c["beta"])),
        first_rate=jnp.abs(r[i]),
        first_capacity=jnp.abs(r[i]) / G[i, i],
    )
