"""The multi-index paper's stage ODEs: mass, subspace Lotka-Volterra, tensor-power alignment.

Conventions as in `theory._hermite`. Write alpha~ = (1/m) sum_i ||w_i||^2,
beta_1 = (1/r) sum_{k<=r} (1/m) sum_i w_ik^2 and beta_2 = the same average over the d - r
irrelevant coordinates, so alpha~ = r beta_1 + (d - r) beta_2.

**Derivation.** Hermite components are orthogonal under N(0, I), so L = sum_k L_k. Degree 0:
the model's mean is c_0 alpha~, the target's r c_0, so L_0 = c_0^2 (alpha~ - r)^2 / 2 and
-m grad_{w_i} L_0 = -2 c_0^2 (alpha~ - r) w_i. Degree 2: with M = (1/m) sum_i w_i w_i^T and
P the projector on the target subspace, f_2(x) = (c_2/sqrt 2) (x^T M x - tr M), so
L_2 = c_2^2 ||M - P||_F^2 / 2 and -m grad_{w_i} L_2 = -2 c_2^2 (M - P) w_i. With M diagonal,
beta_1 on the first r coordinates and beta_2 on the rest (the symmetric, isotropic case),

    d beta_1/dt = 2 beta_1 (-lambda + 2 c_0^2 (r - alpha~) + 2 c_2^2 (1 - beta_1)),
    d beta_2/dt = 2 beta_2 (-lambda + 2 c_0^2 (r - alpha~) - 2 c_2^2 beta_2),

and summing, d alpha~/dt = 4 c_0^2 alpha~ (r - lambda / (2 c_0^2) - alpha~) + O(c_2^2). The
first equation is the paper's. **Its beta_2 equation lacks the -2 c_2^2 beta_2 term**, which
comes from the irrelevant coordinates' own degree-2 mass (M_kk^2 in ||M - P||_F^2); it is small
while beta_2 ~ 1/d but it is what makes beta_2 decay like 1/t when lambda = 0. Degree >= 4
terms are left out (the paper's "approximately"). `corrected=False` gives the paper's system.

Paper: *Learning Orthogonal Multi-Index Models Beyond Small Initialization: Incremental
Learning, Competitive Dynamics and Symmetry* (NeurIPS 2026, arXiv:2609.10879).
"""

import diffrax
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._diffeqsolve import diffeqsolve
from ._equilibria import mass_equilibrium
from ._hermite import hermite_coefficients
from ._solution import RESULTS, AbstractSolution, diffrax_stats, name_nonfinite
from .checks import (
    check_activation,
    check_finite,
    check_flag,
    check_orthonormal_rows,
    check_positive,
    check_positive_int,
    check_shape,
    check_time_grid,
    check_value,
    inexact,
)


class ODESolution(AbstractSolution):
    """Result of the stage ODEs (`lotka_volterra`, `tensor_power`): the solution `ys` at the
    times `ts`, diffrax's `result` (as a `RESULTS` item) and `stats` (steps, accepted and
    rejected steps). After a failure the remaining values are `inf`, never silent NaNs.

    >>> sol = tensor_power(0.5, jnp.array([0.0, 1.0]), activation="abs")
    >>> sol.ys.shape, sorted(sol.stats)
    ((2,), ['num_accepted_steps', 'num_rejected_steps', 'num_steps'])
    """

    result: RESULTS
    stats: dict
    ts: Float[Array, " T"]
    ys: Float[Array, "T ..."]


def _solve(field, y0, ts, args, rtol, atol, throw) -> ODESolution:
    sol = diffeqsolve(
        diffrax.ODETerm(field),
        diffrax.Tsit5(),
        t0=0.0,
        t1=ts[-1],
        dt0=None,
        y0=y0,
        args=args,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=100_000,
        throw=False,
        grid_checked=True,
    )
    result = RESULTS.promote(sol.result)
    # a budget spent on a non-finite field (NaN or overflowing coefficients) says so
    result = name_nonfinite(result, field(ts[0], y0, args))
    out = ODESolution(ts=ts, ys=sol.ys, result=result, stats=diffrax_stats(sol))
    return out.raise_if_failed(throw)


def mass_ode(alpha0, ts: Float[Array, " T"], *, c0, r, weight_decay) -> Float[Array, " T"]:
    """The solution of d alpha~/dt = 4 c_0^2 alpha~ (K - alpha~), K = r - lambda / (2 c_0^2):
    the logistic curve alpha~(t) = K / (1 + (K / alpha0 - 1) exp(-4 c_0^2 K t)).

    **Arguments:**

    - `alpha0`: alpha~(0), one finite number > 0, at least the dtype's smallest normal number.
    - `ts` (T,): the times, finite; negative ones run the curve backwards.
    - `c0`: the Hermite coefficient c_0, one finite number > 0.
    - `r`: the number of target directions, an integer >= 1.
    - `weight_decay`: lambda, one finite number >= 0 with K > 0.

    **Returns:** alpha~ at `ts`, an array of `ts`' shape.

    **Raises:** `ValueError` where `alpha0` is not one finite number > 0 or is subnormal,
    `ts` holds a non-finite entry, `mass_equilibrium` refuses `c0`, `r` or `weight_decay`
    (K <= 0 among them), or, from `alpha0` above K, `ts` reach back past the curve's pole.

    >>> [round(v, 4) for v in mass_ode(1.0, jnp.array([0.0, 10.0]), c0=1.0, r=4, weight_decay=2.0).tolist()]
    [1.0, 3.0]
    """  # noqa: E501
    alpha0 = check_positive("alpha0", alpha0, scalar=True)
    tiny = float(jnp.finfo(jnp.result_type(alpha0, float)).tiny)
    alpha0 = check_value(
        alpha0,
        alpha0 >= tiny,
        f"`alpha0` must be at least {tiny:.3g} (a subnormal one is 0 in XLA)",
    )
    ts = check_finite("ts", ts)
    K = mass_equilibrium(c0=c0, r=r, weight_decay=weight_decay)
    rate = (c0 * c0) * K  # inf at c0 = 1e200: then exp(-inf * 0) must read 1 at t = 0
    x = jnp.where(ts != 0, 4.0 * rate * jnp.where(ts != 0, ts, 1.0), 0.0)  # t < 0: backwards
    # forwards, K / (1 - e^-x + (K / alpha0) e^-x): no cancellation for alpha0 >> K (1e200
    # gave inf at t = 0 from 1 + (K / alpha0 - 1)), and a vanished e^-x never meets an
    # infinite K / alpha0; backwards (x < 0), K e^x / (e^x - 1 + K / alpha0): e^-x overflowed
    # (inf - inf: NaN at t = -100)
    ahead = x >= 0
    decay = jnp.exp(-jnp.where(ahead, x, 0.0))
    rise = jnp.where(decay > 0, (K / alpha0) * decay, 0.0)
    forward = K / (-jnp.expm1(-jnp.where(ahead, x, 0.0)) + rise)
    back_x = jnp.where(ahead, 0.0, x)
    below = jnp.expm1(back_x) + K / alpha0
    # from above the equilibrium the curve has a pole backwards in time (K / alpha0 < 1)
    backward = K * jnp.exp(back_x) / jnp.where(below > 0, below, 1.0)
    return check_value(
        jnp.where(ahead, forward, backward),
        jnp.all(ahead | (below > 0)),
        "`ts` reach back past the pole of the logistic curve (from alpha0 above the "
        "equilibrium K it blows up backwards at t = log(1 - K / alpha0) / (4 c0^2 K)): "
        "start the times later",
    )


def _lv_field(t, beta, args):
    c0, c2, r, d, lam, corrected = args
    b1, b2 = beta
    alpha = r * b1 + (d - r) * b2
    common = -lam + 2.0 * c0**2 * (r - alpha)
    return jnp.stack(
        [
            2.0 * b1 * (common + 2.0 * c2**2 * (1.0 - b1)),
            2.0 * b2 * (common - corrected * 2.0 * c2**2 * b2),
        ]
    )


def lotka_volterra(
    beta0: Float[Array, " 2"],
    ts: Float[Array, " T"],
    *,
    c0,
    c2,
    r: int,
    d: int,
    weight_decay,
    corrected: bool = True,
    throw: bool = False,
) -> ODESolution:
    """(beta_1, beta_2) at the times `ts` (from t = 0) under the module docstring's ODEs, solved
    with diffrax (Tsit5, rtol = atol = 1e-10). Jit- and vmap-able.

    **Arguments:**

    - `beta0` (2,): (beta_1, beta_2) at t = 0, finite and >= 0.
    - `ts` (T,): the save times, finite, >= 0 and nondecreasing.
    - `c0`: the Hermite coefficient c_0, one finite number > 0.
    - `c2`: the Hermite coefficient c_2, one finite number >= 0.
    - `r`: the number of target directions, an integer >= 1.
    - `d`: the input dimension, an integer >= r.
    - `weight_decay`: lambda, one finite number >= 0 (may be a JAX array).
    - `corrected`: True (default) keeps the -2 c_2^2 beta_2 term; False drops it, as the
      paper writes it.
    - `throw`: True raises where the solve fails instead of returning a failed `result`
      (default False).

    **Returns:** an `ODESolution`: `ts`, `ys` (T, 2) holding (beta_1, beta_2), `result` and
    `stats`.

    **Raises:** `ValueError` where `r` or `d` is not an integer >= 1 (`d` >= r),
    `weight_decay`, `c0` or `c2` is not one finite number of its range, `ts` is not a
    non-empty, finite, nondecreasing grid from t >= 0, `beta0` is not (2,), finite and >= 0,
    or `corrected` or `throw` is not True or False; with `throw=True`,
    `eqx.EquinoxRuntimeError` where the solve failed.

    At lambda = 0 the relevant mass beta_1 goes to 1 and beta_2 to 0:

    >>> sol = lotka_volterra(jnp.array([0.01, 0.01]), jnp.array([0.0, 1000.0]), c0=0.5, c2=0.5,
    ...                      r=2, d=4, weight_decay=0.0)
    >>> bool(sol.ok), [round(v, 2) for v in sol.ys[-1].tolist()]
    (True, [1.0, 0.0])
    """
    r = check_positive_int("r", r)
    d = check_positive_int("d", d, minimum=r)
    weight_decay = check_positive("weight_decay", weight_decay, allow_zero=True, scalar=True)
    ts = check_time_grid("ts", ts)
    c0 = check_positive("c0", c0, scalar=True)
    c2 = check_positive("c2", c2, allow_zero=True, scalar=True)
    corrected = check_flag("corrected", corrected)
    check_shape("beta0", beta0, (2,))
    beta0 = check_positive("beta0", inexact(beta0, ts.dtype, name="beta0"), allow_zero=True)
    return _lotka_volterra(beta0, ts, c0, c2, r, d, weight_decay, corrected, throw)


def _lotka_volterra(beta0, ts, c0, c2, r, d, weight_decay, corrected=True, throw=False):
    """`lotka_volterra` without its checks, for callers whose inputs are checked already."""
    dtype = ts.dtype
    corrected = jnp.asarray(1.0 if corrected else 0.0)
    args = (jnp.asarray(c0, dtype), jnp.asarray(c2, dtype), r, d, weight_decay, corrected)
    return _solve(_lv_field, beta0, ts, args, 1e-10, 1e-10, throw)


def mass_ratio(beta, *, c0, c2, r: int, d: int):
    """q(t) = c_0^2 (d - r) beta_2 / ((c_0^2 r + c_2^2) beta_1): irrelevant against relevant
    mass, weighted by their degree-0 and degree-2 pull; the paper bounds it by (d/r) e^(-rho t).

    **Arguments:**

    - `beta` (..., 2): (beta_1, beta_2) along the last axis (e.g. `lotka_volterra`'s `ys`),
      finite and >= 0.
    - `c0`: the Hermite coefficient c_0, finite and > 0.
    - `c2`: the Hermite coefficient c_2, finite and >= 0.
    - `r`: the number of target directions, an integer >= 1.
    - `d`: the input dimension, an integer >= r.

    **Returns:** q, an array of `beta`'s leading shape (inf or NaN where beta_1 = 0).

    **Raises:** `ValueError` where `beta` does not end in an axis of 2 or is not finite and
    >= 0, `r` or `d` is not an integer >= 1, `d` < r, `c0` is not finite and > 0, or `c2` is
    not finite and >= 0.

    >>> float(mass_ratio(jnp.array([1.0, 0.5]), c0=1.0, c2=1.0, r=1, d=3))
    0.5
    """
    if jnp.shape(beta)[-1:] != (2,):
        raise ValueError(f"`beta` must have shape (..., 2), got {jnp.shape(beta)}")
    r, d = check_positive_int("r", r), check_positive_int("d", d)
    if d < r:
        raise ValueError(f"`d` must be at least `r` = {r} (r directions in R^d), got {d}")
    c0 = check_positive("c0", c0)
    c2 = check_positive("c2", c2, allow_zero=True)
    beta = check_positive("beta", beta, allow_zero=True)  # masses: finite and >= 0
    q = c2 / c0  # divided through by c0^2: no overflow at c0 = 1e200
    return (d - r) * beta[..., 1] / ((r + q * q) * beta[..., 0])


def tensor_power(
    p0, ts, *, activation: str, max_degree: int = 40, throw: bool = False
) -> ODESolution:
    """p(t) under dp/dt = 2 (1 - p) sum_{j>=2} 2j c_{2j}^2 p^j, the alignment of a neuron with
    one target direction (p = squared coordinate of its direction in the target subspace),
    truncated at degree `max_degree`.

    **Arguments:**

    - `p0`: the start p(0), one number in [0, 1], e.g. the best initial neuron's
      2 log(m) / r (`stage_times` starts from `initial_alignment` or `typical_alignment`).
    - `ts` (T,): the save times, finite, >= 0 and nondecreasing (the solve starts at t = 0).
    - `activation`: an even activation, a name of `EVEN_ACTIVATIONS`.
    - `max_degree`: the truncation degree, an integer >= 0 (at most 300 for the GeLU and
      Swish even parts); default 40.
    - `throw`: True raises where the solve fails instead of returning a failed `result`
      (default False).

    **Returns:** an `ODESolution`: `ts`, `ys` (T,) holding p, `result` and `stats`.

    **Raises:** `ValueError` where `activation` is not even, `max_degree` is not a
    non-negative integer (or above 300 for a quadrature activation), `ts` is not a non-empty,
    finite, nondecreasing grid from t >= 0, `p0` is outside [0, 1], or `throw` is not True or
    False; with `throw=True`, `eqx.EquinoxRuntimeError` where the solve failed.

    p = 1 is the fixed point, and p rises monotonically towards it:

    >>> sol = tensor_power(0.5, jnp.array([0.0, 1.0, 100.0]), activation="abs")
    >>> bool(sol.ok), bool(sol.ys[1] > 0.5), round(float(sol.ys[-1]), 3)
    (True, True, 1.0)
    """
    check_activation(activation, even=True)
    c = hermite_coefficients(activation, max_degree)
    js = jnp.arange(2, max_degree // 2 + 1)
    weights = 2.0 * js * c[2 * js] ** 2

    def field(t, p, args):
        return 2.0 * (1.0 - p) * jnp.sum(weights * p**js)

    ts = check_time_grid("ts", ts)
    p0 = check_value(
        inexact(p0, ts.dtype, "p0"),
        (jnp.asarray(p0) >= 0) & (jnp.asarray(p0) <= 1),
        f"`p0` must lie in [0, 1] (a squared coordinate), got {p0}",
    )
    return _solve(field, p0, ts, None, 1e-10, 1e-12, throw)


def initial_alignment(
    W: Float[Array, "m d"], directions: Float[Array, "r d"]
) -> Float[Array, " r"]:
    """The alignment the tensor-power stage starts from: for each target direction e_k, the
    best neuron's max_i (w_i . e_k)^2 / sum_l (w_i . e_l)^2, its direction projected on the
    target subspace (the degree-2 stage removes the rest and keeps the projected direction).

    **Arguments:**

    - `W` (m, d): the first layer at initialization, one neuron per row, finite.
    - `directions` (r, d): the target directions e_1..e_r, orthonormal rows (to 1e-6),
      finite.

    **Returns:** the alignments, an array of shape (r,) with entries in [0, 1].

    **Raises:** `ValueError` where `W` is not 2-D, `directions` is not (r, d) with `W`'s d
    and r >= 1, either holds a non-finite entry, or the rows of `directions` are not
    orthonormal.

    >>> initial_alignment(jnp.array([[3.0, 4.0, 5.0]]), jnp.eye(3)[:2]).tolist()
    [0.36, 0.64]
    """
    check_shape("W", W, (None, None))
    check_shape("directions", directions, (None, jnp.shape(W)[1]))
    W = check_finite("W", inexact(W, name="W"))
    directions = check_orthonormal_rows(
        "directions", check_finite("directions", inexact(directions, W.dtype, name="directions"))
    )
    rel = W @ directions.T
    top = jnp.max(jnp.abs(rel), axis=1, keepdims=True)  # scale-free per row: no over/underflow
    rel = rel / jnp.where(top > 0, top, 1.0)
    norm = jnp.sum(rel * rel, axis=1, keepdims=True)
    return jnp.max(rel * rel / jnp.where(norm > 0, norm, 1.0), axis=0)


def typical_alignment(*, r: int, m: int) -> Float[Array, ""]:
    """The median of the best of m random neurons' squared coordinate along one target
    direction after projection on the r-dimensional target subspace: u uniform on S^(r-1)
    has u_k^2 ~ Beta(1/2, (r - 1)/2), so the median p solves I_p(1/2, (r-1)/2) = 2^(-1/m).
    It replaces the heuristic 2 log(m) / r, which is >= 1 for small r (e.g. r = 4, m = 64)
    and, at the paper's size (r = 20, m = 250), 0.552 against the actual 0.383: a start too
    close to alignment, which made t_4 early.

    **Arguments:**

    - `r`: the number of target directions, an integer >= 1.
    - `m`: the number of neurons, an integer >= 1.

    **Returns:** the median p, a scalar array in (0, 1] (1 for r = 1).

    **Raises:** `ValueError` where `r` or `m` is not an integer >= 1.

    >>> [round(float(typical_alignment(r=r, m=m)), 3) for r, m in [(20, 250), (4, 64)]]
    [0.383, 0.915]
    """
    r = check_positive_int("r", r)
    m = check_positive_int("m", m)
    if r == 1:
        return jnp.asarray(1.0)
    level = 0.5 ** (1.0 / m)
    lo, hi = jnp.asarray(0.0), jnp.asarray(1.0)

    def bisect(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        below = jax.scipy.special.betainc(0.5, 0.5 * (r - 1), mid) < level
        return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

    lo, hi = jax.lax.fori_loop(0, 60, bisect, (lo, hi))
    return 0.5 * (lo + hi)
