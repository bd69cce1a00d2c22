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
"""

import diffrax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._hermite import hermite_coefficients, hermite_energies
from ._solution import RESULTS, Solution, diffrax_stats
from .checks import (
    check_activation,
    check_positive,
    check_positive_int,
    check_shape,
    check_time_grid,
    check_value,
    inexact,
)


class ODESolution(Solution):
    """Result of the stage ODEs (`lotka_volterra`, `tensor_power`): the solution `ys` at the
    times `ts`, diffrax's `result` (as a `RESULTS` item) and `stats` (steps, accepted and
    rejected steps). After a failure the remaining values are `inf`, never silent NaNs.

    >>> sol = tensor_power(0.5, jnp.array([0.0, 1.0]), activation="abs")
    >>> sol.ys.shape, sorted(sol.stats)
    ((2,), ['num_accepted_steps', 'num_rejected_steps', 'num_steps'])
    """

    ts: Float[Array, " T"]
    ys: Float[Array, "T ..."]


def _solve(field, y0, ts, args, rtol, atol, throw) -> ODESolution:
    sol = diffrax.diffeqsolve(
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
    )
    result = RESULTS.promote(sol.result)
    out = ODESolution(ts=ts, ys=sol.ys, result=result, stats=diffrax_stats(sol))
    return out.raise_if_failed(throw)


def mass_equilibrium(c0, r, weight_decay):
    """alpha~* = r - lambda / (2 c_0^2), the fixed point of the mass ODE.

    >>> mass_equilibrium(1.0, 4, 2.0)
    3.0
    """
    c0 = check_positive("c0", c0)
    weight_decay = check_positive("weight_decay", weight_decay, allow_zero=True)
    return r - weight_decay / (2.0 * c0**2)


def _positive_equilibrium(c0, r, weight_decay):
    K = mass_equilibrium(c0, r, weight_decay)
    message = (
        "the mass equilibrium r - weight_decay / (2 c_0^2) must be > 0 (the weight decay "
        f"outweighs the target's mean), got r = {r}, weight_decay = {weight_decay}"
    )
    return check_value(K, jnp.asarray(K) > 0, message)


def mass_ode(alpha0, ts: Float[Array, " T"], *, c0, r, weight_decay) -> Float[Array, " T"]:
    """The solution of d alpha~/dt = 4 c_0^2 alpha~ (K - alpha~), K = r - lambda / (2 c_0^2):
    the logistic curve alpha~(t) = K / (1 + (K / alpha0 - 1) exp(-4 c_0^2 K t)).

    >>> [round(v, 4) for v in mass_ode(1.0, jnp.array([0.0, 10.0]), c0=1.0, r=4, weight_decay=2.0).tolist()]
    [1.0, 3.0]
    """  # noqa: E501
    alpha0 = check_positive("alpha0", alpha0)
    K = _positive_equilibrium(c0, r, weight_decay)
    return K / (1.0 + (K / alpha0 - 1.0) * jnp.exp(-4.0 * c0**2 * K * ts))


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
    with diffrax (Tsit5, rtol = atol = 1e-10): `ys` (T, 2). `corrected=False` drops the
    -2 c_2^2 beta_2 term, as the paper writes it. `weight_decay` may be an array; jit- and
    vmap-able.

    At lambda = 0 the relevant mass beta_1 goes to 1 and beta_2 to 0:

    >>> sol = lotka_volterra(jnp.array([0.01, 0.01]), jnp.array([0.0, 1000.0]), c0=0.5, c2=0.5,
    ...                      r=2, d=4, weight_decay=0.0)
    >>> bool(sol.ok), [round(v, 2) for v in sol.ys[-1].tolist()]
    (True, [1.0, 0.0])
    """
    r = check_positive_int("r", r)
    d = check_positive_int("d", d, minimum=r)
    weight_decay = check_positive("weight_decay", weight_decay, allow_zero=True, scalar=True)
    args = (c0, c2, r, d, weight_decay, jnp.asarray(1.0 if corrected else 0.0))
    ts = check_time_grid("ts", ts)
    check_shape("beta0", beta0, (2,))
    beta0 = check_positive("beta0", inexact(beta0, ts.dtype), allow_zero=True)
    return _solve(_lv_field, beta0, ts, args, 1e-10, 1e-10, throw)


def mass_ratio(beta, *, c0, c2, r: int, d: int):
    """q(t) = c_0^2 (d - r) beta_2 / ((c_0^2 r + c_2^2) beta_1): irrelevant against relevant
    mass, weighted by their degree-0 and degree-2 pull; the paper bounds it by (d/r) e^(-rho t).

    >>> float(mass_ratio(jnp.array([1.0, 0.5]), c0=1.0, c2=1.0, r=1, d=3))
    0.5
    """
    if jnp.shape(beta)[-1:] != (2,):
        raise ValueError(f"`beta` must have shape (..., 2), got {jnp.shape(beta)}")
    return c0**2 * (d - r) * beta[..., 1] / ((c0**2 * r + c2**2) * beta[..., 0])


def tensor_power(
    p0, ts, *, activation: str, max_degree: int = 40, throw: bool = False
) -> ODESolution:
    """p(t) under dp/dt = 2 (1 - p) sum_{j>=2} 2j c_{2j}^2 p^j, the alignment of a neuron with
    one target direction (p = squared coordinate of its direction in the target subspace),
    truncated at degree `max_degree`; `ys` (T,). From p0, e.g. the best initial neuron's
    2 log(m) / r. p = 1 is the fixed point, and p rises monotonically towards it:

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
        inexact(p0, ts.dtype),
        (jnp.asarray(p0) >= 0) & (jnp.asarray(p0) <= 1),
        f"`p0` must lie in [0, 1] (a squared coordinate), got {p0}",
    )
    return _solve(field, p0, ts, None, 1e-10, 1e-12, throw)


def _first_time(ts, ok):
    return jnp.where(jnp.any(ok), ts[jnp.argmax(ok)], jnp.inf)


class StageTimes(Solution):
    """Result of `stage_times`: the predicted times `tau_0`, `tau_2`, `tau_4` (`inf` past the
    horizon), with the `result` and `stats` of the ODE solves behind them (the first failure,
    and the steps of both solves added).

    >>> st = StageTimes(tau_0=jnp.asarray(1.0), tau_2=jnp.asarray(5.0), tau_4=jnp.asarray(jnp.inf),
    ...                 result=RESULTS.successful, stats={"num_steps": jnp.asarray(10)})
    >>> bool(st.ok), float(st.tau_4)  # tau_4 past the horizon
    (True, inf)
    """

    tau_0: Float[Array, ""]
    tau_2: Float[Array, ""]
    tau_4: Float[Array, ""]


def stage_times(
    *,
    activation: str,
    r: int,
    d: int,
    m: int,
    weight_decay,
    alpha0=1.0,
    eta: float = 0.1,
    eps: float = 0.1,
    horizon: float = 1e3,
    points: int = 20_001,
    throw: bool = False,
) -> StageTimes:
    """Predicted stage times, from the ODEs above and a uniform start (beta = alpha0 / d):

    - tau_0: alpha~ covers (1 - eta) of the way to its equilibrium (closed form).
    - tau_2: q(t) <= eta under the corrected Lotka-Volterra system.
    - tau_4: tau_2 + the time the tensor-power ODE takes from p0 = 2 log(m) / r to 1 - eps.

    Times past `horizon` are `inf`.

    >>> st = stage_times(activation="abs", r=8, d=40, m=20, weight_decay=0.4)
    >>> bool(st.ok), bool(0 < st.tau_0 < st.tau_2 < st.tau_4)
    (True, True)
    """
    check_activation(activation, even=True)
    r = check_positive_int("r", r)
    d = check_positive_int("d", d, minimum=r)
    m = check_positive_int("m", m)
    c = hermite_coefficients(activation, 2)
    c0, c2 = c[0], c[2]
    K = _positive_equilibrium(c0, r, weight_decay)
    for name, value in (("eta", eta), ("eps", eps)):
        check_value(
            value,
            (np.asarray(value) > 0) & (np.asarray(value) < 1),
            f"`{name}` must lie in (0, 1), got {value}",
        )
    alpha0 = check_positive("alpha0", alpha0)
    alpha0 = check_value(
        alpha0,
        jnp.asarray(alpha0) < K,
        "stage 0 grows the mass from `alpha0` to the equilibrium r - weight_decay / (2 c_0^2): "
        f"`alpha0` must be below it, got {alpha0}",
    )
    horizon = check_positive("horizon", horizon)
    points = check_positive_int("points", points, minimum=2)
    target = alpha0 + (1.0 - eta) * (K - alpha0)
    tau0 = jnp.log((K / alpha0 - 1.0) / (K / target - 1.0)) / (4.0 * c0**2 * K)
    ts = jnp.linspace(0.0, horizon, points)
    beta0 = jnp.array([alpha0 / d, alpha0 / d])
    lv = lotka_volterra(beta0, ts, c0=c0, c2=c2, r=r, d=d, weight_decay=weight_decay)
    tau2 = _first_time(ts, mass_ratio(lv.ys, c0=c0, c2=c2, r=r, d=d) <= eta)
    tp = tensor_power(jnp.minimum(2.0 * jnp.log(m) / r, 0.99), ts, activation=activation)
    tau4 = tau2 + _first_time(ts, tp.ys >= 1.0 - eps)
    result = RESULTS.where(lv.ok, tp.result, lv.result)
    stats = {k: lv.stats[k] + tp.stats[k] for k in lv.stats}
    out = StageTimes(tau_0=tau0, tau_2=tau2, tau_4=tau4, result=result, stats=stats)
    return out.raise_if_failed(throw)


def weight_decay_plateaus(activation: str, r: int, weight_decay) -> Float[Array, " 3"]:
    """The loss plateaus after stages 0, 2 and >= 4 under weight decay lambda: the
    weight-decay-free plateaus of `hermite_energies` (1/2 (E_2 + E_>=4), 1/2 E_>=4, 0) plus
    the degree-0 loss that the mass equilibrium alpha~* = r - lambda / (2 c_0^2) leaves,
    c_0^2 (alpha~* - r)^2 / 2 = lambda^2 / (8 c_0^2).

    >>> [round(v, 4) for v in weight_decay_plateaus("abs", 1, 0.0).tolist()]
    [0.1817, 0.0225, 0.0]
    """
    check_activation(activation, even=True)
    e = hermite_energies(activation, r)
    c0 = hermite_coefficients(activation, 0)[0]
    bias = jnp.asarray(weight_decay) ** 2 / (8.0 * c0**2)
    return jnp.stack([e.plateau_0 + bias, e.plateau_2 + bias, bias * jnp.ones_like(e.E0)])


def measured_stage_times(
    ts, alpha, q, alignment, *, equilibrium, eta: float = 0.1, eps: float = 0.1
) -> np.ndarray:
    """The stage times of a simulation, measured the way `stage_times` predicts them: the
    first save time at which alpha~ is past (1 - eta) of the way from alpha~(0) to
    `equilibrium`, at which q(t) < eta, and at which the best neurons' mean alignment is
    above 1 - eps; `inf` where it never happens. NumPy in, NumPy out (a measurement).

    >>> ts = np.array([0.0, 1.0, 2.0, 3.0])
    >>> measured_stage_times(ts, np.array([1.0, 2.0, 3.0, 3.0]), np.array([1.0, 0.5, 0.05, 0.01]),
    ...                      np.array([0.1, 0.2, 0.5, 0.95]), equilibrium=3.0).tolist()
    [2.0, 2.0, 3.0]
    """
    ts, alpha = np.asarray(check_time_grid("ts", ts)), np.asarray(alpha)
    for name, x in (("alpha", alpha), ("q", q), ("alignment", alignment)):
        check_shape(name, x, ts.shape)

    def first(ok):
        hit = np.flatnonzero(ok)
        return float(ts[hit[0]]) if hit.size else float("inf")

    level = alpha[0] + (1.0 - eta) * (equilibrium - alpha[0])
    q, alignment = np.asarray(q), np.asarray(alignment)
    return np.array([first(alpha > level), first(q < eta), first(alignment > 1.0 - eps)])
