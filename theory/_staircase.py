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
from jaxtyping import Array, Float

from ._hermite import hermite_coefficients


def mass_equilibrium(c0, r, weight_decay):
    """alpha~* = r - lambda / (2 c_0^2), the fixed point of the mass ODE."""
    return r - weight_decay / (2.0 * c0**2)


def mass_ode(ts: Float[Array, " T"], alpha0, *, c0, r, weight_decay) -> Float[Array, " T"]:
    """The solution of d alpha~/dt = 4 c_0^2 alpha~ (K - alpha~), K = r - lambda / (2 c_0^2):
    the logistic curve alpha~(t) = K / (1 + (K / alpha0 - 1) exp(-4 c_0^2 K t))."""
    K = mass_equilibrium(c0, r, weight_decay)
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
    ts: Float[Array, " T"],
    beta0: Float[Array, " 2"],
    *,
    c0,
    c2,
    r: int,
    d: int,
    weight_decay,
    corrected: bool = True,
) -> Float[Array, "T 2"]:
    """(beta_1, beta_2) at the times `ts` (from t = 0) under the module docstring's ODEs, solved
    with diffrax (Tsit5, rtol = atol = 1e-10). `corrected=False` drops the -2 c_2^2 beta_2
    term, as the paper writes it. `weight_decay` may be an array; jit- and vmap-able."""
    args = (c0, c2, r, d, weight_decay, jnp.asarray(1.0 if corrected else 0.0))
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(_lv_field),
        diffrax.Tsit5(),
        t0=0.0,
        t1=ts[-1],
        dt0=None,
        y0=jnp.asarray(beta0, float),
        args=args,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10),
        max_steps=100_000,
    )
    return sol.ys


def mass_ratio(beta, *, c0, c2, r: int, d: int):
    """q(t) = c_0^2 (d - r) beta_2 / ((c_0^2 r + c_2^2) beta_1): irrelevant against relevant
    mass, weighted by their degree-0 and degree-2 pull; the paper bounds it by (d/r) e^(-rho t)."""
    return c0**2 * (d - r) * beta[..., 1] / ((c0**2 * r + c2**2) * beta[..., 0])


def tensor_power(ts, p0, *, name: str, max_degree: int = 40):
    """p(t) under dp/dt = 2 (1 - p) sum_{j>=2} 2j c_{2j}^2 p^j, the alignment of a neuron with
    one target direction (p = squared coordinate of its direction in the target subspace),
    truncated at degree `max_degree`. From p0, e.g. the best initial neuron's 2 log(m) / r."""
    c = hermite_coefficients(name, max_degree)
    js = jnp.arange(2, max_degree // 2 + 1)
    weights = 2.0 * js * c[2 * js] ** 2

    def field(t, p, args):
        return 2.0 * (1.0 - p) * jnp.sum(weights * p**js)

    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field),
        diffrax.Tsit5(),
        t0=0.0,
        t1=ts[-1],
        dt0=None,
        y0=jnp.asarray(p0, float),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-12),
        max_steps=100_000,
    )
    return sol.ys


def _first_time(ts, ok):
    return jnp.where(jnp.any(ok), ts[jnp.argmax(ok)], jnp.inf)


def stage_times(
    *,
    name: str,
    r: int,
    d: int,
    m: int,
    weight_decay,
    alpha0=1.0,
    eta: float = 0.1,
    eps: float = 0.1,
    horizon: float = 1e3,
    points: int = 20_001,
) -> dict:
    """Predicted stage times, from the ODEs above and a uniform start (beta = alpha0 / d):

    - tau_0: alpha~ covers (1 - eta) of the way to its equilibrium (closed form).
    - tau_2: q(t) <= eta under the corrected Lotka-Volterra system.
    - tau_4: tau_2 + the time the tensor-power ODE takes from p0 = 2 log(m) / r to 1 - eps.
    Times past `horizon` are `inf`.
    """
    c = hermite_coefficients(name, 2)
    c0, c2 = c[0], c[2]
    K = mass_equilibrium(c0, r, weight_decay)
    target = alpha0 + (1.0 - eta) * (K - alpha0)
    tau0 = jnp.log((K / alpha0 - 1.0) / (K / target - 1.0)) / (4.0 * c0**2 * K)
    ts = jnp.linspace(0.0, horizon, points)
    beta = lotka_volterra(
        ts, jnp.array([alpha0 / d, alpha0 / d]), c0=c0, c2=c2, r=r, d=d, weight_decay=weight_decay
    )
    tau2 = _first_time(ts, mass_ratio(beta, c0=c0, c2=c2, r=r, d=d) <= eta)
    p = tensor_power(ts, jnp.minimum(2.0 * jnp.log(m) / r, 0.99), name=name)
    tau4 = tau2 + _first_time(ts, p >= 1.0 - eps)
    return {"tau_0": tau0, "tau_2": tau2, "tau_4": tau4}
