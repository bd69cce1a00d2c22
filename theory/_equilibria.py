"""The staircase's equilibria: the mass fixed point, the plateaus of stages 0, 2 and >= 4
under weight decay (`stage_equilibria`, `weight_decay_plateaus`).

Paper: *Learning Orthogonal Multi-Index Models Beyond Small Initialization: Incremental
Learning, Competitive Dynamics and Symmetry* (NeurIPS 2026, arXiv:2609.10879)."""

import math

import jax.numpy as jnp
from jaxtyping import Array, Float

from ._hermite import hermite_coefficients, second_moment
from ._solution import Readable
from .checks import (
    check_activation,
    check_positive,
    check_positive_int,
    check_value,
)


def mass_equilibrium(*, c0, r, weight_decay):
    """alpha~* = r - lambda / (2 c_0^2), the fixed point of the degree-0 mass ODE: stage 0's
    leading term. Later stages hold more mass (every Hermite order's energy counts; at r = 4,
    lambda = 2, |z|: 2.625 against 2.429): see `stage_equilibria`. Where the weight decay
    outweighs the target (alpha~* <= 0) the mass has no positive fixed point and decays to 0:
    refused, as `mass_ode` refuses it.

    **Arguments:**

    - `c0`: the Hermite coefficient c_0 of the activation, one finite number > 0.
    - `r`: the number of target directions, an integer >= 1.
    - `weight_decay`: lambda, one finite number >= 0.

    **Returns:** alpha~*: a Python float for Python inputs, else a scalar array.

    **Raises:** `ValueError` where `c0` is not one finite number > 0, `r` is not an integer
    >= 1, `weight_decay` is not one finite number >= 0, or alpha~* <= 0 (through
    `eqx.error_if` where the inputs are traced).

    >>> mass_equilibrium(c0=1.0, r=4, weight_decay=2.0)
    3.0
    """
    c0 = check_positive("c0", c0, scalar=True)
    r = check_positive_int("r", r)  # the number of target directions
    weight_decay = check_positive("weight_decay", weight_decay, allow_zero=True, scalar=True)
    K = r - weight_decay / c0 / c0 / 2.0  # c0 = 1e200 or 1e-200: no pow overflow, no 0/0
    message = (
        "the mass equilibrium r - weight_decay / (2 c_0^2) must be > 0 (the weight decay "
        f"outweighs the target's mean), got r = {r}, weight_decay = {weight_decay}"
    )
    return check_value(K, jnp.asarray(K) > 0, message)


_EQ_DEGREE = 200  # Hermite degrees summed for the isotropic stages (their tail is < 1e-6)


def _sphere_moments(q, J: int):
    """rho_j(q) = E u_1^(2j) for u uniform on the unit sphere of R^q, j = 1..J:
    prod_{i<j} (2i + 1) / (q + 2i) (0 for q = inf)."""
    i = jnp.arange(J, dtype=float)
    return jnp.cumprod((2.0 * i + 1.0) / (q + 2.0 * i))


class StageEquilibria(Readable):
    """Mass equilibria, plateaus and relaxation rates of the staircase's stages, with every
    Hermite order (`stage_equilibria`). The fields are (3,), for stages 0, 2 and >= 4, except
    the scalars `target_energy` and `weight_decay`.

    - `mass`: alpha~* under weight decay lambda; `loss`: the plateau L(alpha~*);
      `rate`: the rate 4 S_B alpha~* of the logistic approach of alpha~ to alpha~*.
    - `S_A`, `S_B`, `target_energy`: the sums that define L(alpha~) = 1/2 (T - 2 alpha~ S_A +
      alpha~^2 S_B) in each stage (see `stage_equilibria`); `weight_decay`: lambda.

    >>> eq = stage_equilibria(activation="abs", r=4, d=20, weight_decay=2.0)
    >>> [round(v, 3) for v in eq.mass.tolist()][2], round(float(eq.loss[2]), 3)
    (2.625, 0.687)
    """

    mass: Float[Array, " 3"]
    loss: Float[Array, " 3"]
    rate: Float[Array, " 3"]
    S_A: Float[Array, " 3"]
    S_B: Float[Array, " 3"]
    target_energy: Float[Array, ""]
    weight_decay: Float[Array, ""]

    @staticmethod
    def _stage(stage):
        if isinstance(stage, bool) or stage not in (0, 1, 2):
            raise ValueError(f"`stage` must be 0, 1 or 2 (orders 0, 2, >= 4), got {stage!r}")
        return stage

    def loss_at(self, alpha, stage: int) -> Float[Array, "..."]:
        """L(alpha~) = 1/2 (T - 2 alpha~ S_A + alpha~^2 S_B) of stage `stage` (0, 1 or 2 for
        orders 0, 2, >= 4) at mass `alpha`, the loss of that stage's configuration.

        >>> eq = stage_equilibria(activation="abs", r=4, d=20, weight_decay=0.0)
        >>> round(float(eq.loss_at(4.0, 2)), 12)  # aligned neurons at the full mass fit all
        0.0
        """
        stage = self._stage(stage)
        a = check_positive("alpha", alpha, allow_zero=True)
        loss = 0.5 * (self.target_energy - 2.0 * a * self.S_A[stage] + a * a * self.S_B[stage])
        return jnp.maximum(loss, 0.0)  # a square: clip the rounding at its zero

    def relax(self, alpha0, ts, stage: int) -> Float[Array, " T"]:
        """alpha~ at the times `ts` after it was `alpha0` (at t = 0): the logistic
        d alpha~/dt = 4 S_B alpha~ (alpha~* - alpha~) of stage `stage` (0, 1 or 2 for orders
        0, 2, >= 4). Across the switch-off of lambda, use the equilibria of lambda = 0 from
        the mass at the switch-off.

        >>> eq = stage_equilibria(activation="abs", r=4, d=20, weight_decay=0.0)
        >>> round(float(eq.relax(2.625, jnp.array([100.0]), 2)[0]), 6)  # back to r = 4
        4.0
        """
        K = self.mass[self._stage(stage)]
        a0 = check_positive("alpha0", alpha0)
        ts = check_positive("ts", ts, allow_zero=True)
        return K / (1.0 + (K / a0 - 1.0) * jnp.exp(-4.0 * self.S_B[stage] * K * jnp.asarray(ts)))


def stage_equilibria(*, activation: str, r: int, d, weight_decay) -> StageEquilibria:
    """The mass equilibrium and plateau of each stage, with every Hermite order.

    **Derivation.** With equal masses and directions w^ distributed as in the stage, the loss
    is quadratic in the total mass alpha~ (Hermite orders are orthogonal, and
    E[He_k(u.x) He_k(v.x)] / k! = <u, v>^k):

        L(alpha~) = 1/2 (T - 2 alpha~ S_A + alpha~^2 S_B),
        S_A = sum_k c_k^2 A_k, S_B = sum_k c_k^2 B_k, T = c_0^2 r^2 + r sum_{k>=1} c_k^2,

    with A_0 = r, B_0 = 1 and, for k >= 1, A_k = sum_{l<=r} E w^_l^k (overlap with the target's
    directions) and B_k = E <w^, w^'>^k (with another neuron). Each neuron's mass obeys
    d||w||^2/dt = -2 ||w||^2 (lambda + 2 E[(f - f*) sigma(w^.x)]) = -2 ||w||^2 (lambda +
    2 dL/d alpha~), so alpha~ relaxes logistically, d alpha~/dt = 4 S_B alpha~ (alpha~* -
    alpha~), to

        alpha~* = (S_A - lambda / 2) / S_B,   plateau L(alpha~*).

    The stages differ in where the directions are: uniform on the sphere of R^d (stage 0,
    A_2j = r rho_j(d), B_2j = rho_j(d), rho_j(q) = E u_1^(2j) = prod_{i<j} (2i+1)/(q+2i)), on
    the sphere of the target subspace after the degree-2 stage (A_2j = r rho_j(r),
    B_2j = rho_j(r)), or on the r target directions equally (stage >= 4: A_k = 1, B_k = 1/r).
    The last gives alpha~* = r - r lambda / (2 (r c_0^2 + sum_{k>=1} c_k^2)): every order's
    energy holds the mass up, not the degree-0 one alone (`mass_equilibrium`'s
    r - lambda / (2 c_0^2), which is stage 0's leading term). At d = 20, r = 4, lambda = 2,
    sigma = |z|: 2.625 (the simulated flow's) against 2.429, and the plateau
    r lambda^2 / (8 (r c_0^2 + sum_{k>=1} c_k^2)) = 0.687 against lambda^2 / (8 c_0^2) = 0.785.
    Mean-field limit (m -> infinity; a neuron's interaction with itself, O(1/m) in the
    isotropic stages, is left out); even activations (`EVEN_ACTIVATIONS`).

    **Arguments:** `activation` (even), `r` target directions, `d` >= r input dimension
    (`None`: d -> infinity, where stage 0 sees only the degree-0 term), `weight_decay`
    lambda >= 0.

    **Returns:** a `StageEquilibria`. A `ValueError` where lambda is so large that a stage's
    mass would be <= 0.

    >>> eq = stage_equilibria(activation="abs", r=4, d=20, weight_decay=0.0)
    >>> [round(v, 4) for v in eq.mass.tolist()], round(float(eq.loss[2]), 12)
    ([4.0, 4.0, 4.0], 0.0)
    """
    check_activation(activation, even=True)
    r = check_positive_int("r", r)
    d = math.inf if d is None else check_positive_int("d", d, minimum=r)
    lam = check_positive("weight_decay", weight_decay, allow_zero=True, scalar=True)
    c = hermite_coefficients(activation, _EQ_DEGREE)
    c2 = c * c
    rest = second_moment(activation) - c2[0]  # sum_{k>=1} c_k^2
    J = _EQ_DEGREE // 2
    even = c2[2 * jnp.arange(1, J + 1)]
    tail = rest - jnp.sum(c2[1:])  # energy above degree _EQ_DEGREE, at rho_J (rho decreases)
    rho = [_sphere_moments(float(q), J) for q in (d, r)]
    iso = [jnp.sum(even * p) + tail * p[-1] for p in rho]
    S_A = jnp.stack([r * c2[0] + r * iso[0], r * c2[0] + r * iso[1], r * c2[0] + rest])
    S_B = jnp.stack([c2[0] + iso[0], c2[0] + iso[1], c2[0] + rest / r])
    mass = (S_A - 0.5 * lam) / S_B
    message = (
        "every stage's mass equilibrium (S_A - weight_decay / 2) / S_B must be > 0 (the weight "
        f"decay outweighs what the target holds up), got weight_decay = {weight_decay}"
    )
    mass = check_value(mass, mass > 0, message)
    T = c2[0] * r * r + r * rest
    loss = jnp.maximum(0.5 * (T - 2.0 * mass * S_A + mass * mass * S_B), 0.0)
    return StageEquilibria(
        mass=mass,
        loss=loss,
        rate=4.0 * S_B * mass,
        S_A=S_A,
        S_B=S_B,
        target_energy=T,
        weight_decay=jnp.asarray(lam),
    )


def weight_decay_plateaus(*, activation: str, r: int, weight_decay, d=None) -> Float[Array, " 3"]:
    """The loss plateaus after stages 0, 2 and >= 4 under weight decay lambda, with every
    Hermite order: `stage_equilibria(...).loss` with the same arguments.

    At lambda = 0 and d -> infinity (`d=None`) stage 0's plateau is 1/2 (E_2 + E_>=4) of
    `hermite_energies`. After stage 2 the neurons are spread uniformly over the target
    subspace, which fits part of every even order >= 4: the plateau is
    sum_{j>=2} c_2j^2 r (1 - r rho_j(r)) / 2, not 1/2 E_>=4 (for r = 1 the subspace is one
    direction and nothing is left). Weight decay adds a degree-0 bias, lambda^2 / (8 c_0^2) in
    stage 0 and r lambda^2 / (8 (r c_0^2 + sum_{k>=1} c_k^2)) in stage >= 4.

    **Arguments:**

    - `activation`: an even activation, a name of `EVEN_ACTIVATIONS`.
    - `r`: the number of target directions, an integer >= 1.
    - `weight_decay`: lambda, one finite number >= 0.
    - `d`: the input dimension, an integer >= r, or None (default) for d -> infinity.

    **Returns:** the plateaus after stages 0, 2 and >= 4, an array of shape (3,).

    **Raises:** `ValueError` where `stage_equilibria` refuses the arguments: an activation
    that is not even, `r` not an integer >= 1, `d` < r, a negative or non-finite
    `weight_decay`, or one so large that a stage's mass equilibrium is <= 0.

    >>> plateaus = weight_decay_plateaus(activation="abs", r=1, weight_decay=0.0)
    >>> [round(v, 4) for v in plateaus.tolist()]
    [0.1817, 0.0, 0.0]
    >>> round(float(weight_decay_plateaus(activation="abs", r=4, weight_decay=2.0, d=20)[2]), 3)
    0.687
    """
    return stage_equilibria(activation=activation, r=r, d=d, weight_decay=weight_decay).loss
