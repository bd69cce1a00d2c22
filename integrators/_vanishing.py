"""The rescaled gradient flow at vanishing initialization, alpha = 10^-1000 and beyond.

A balanced initialization a_j = alpha s_j, w_j = alpha u_j cannot be stored once alpha
underflows float64 (alpha < 1e-308), yet the limit theorem is about alpha -> 0. We integrate
the same rescaled flow d theta/dt = -tau grad L (tau = log(1/alpha)) in log-polar coordinates
that never form alpha itself.

**Coordinates.** In the data basis v_ji = <w_j, x_i> (orthonormal x_i), each neuron is

    |a_j| = ||w_j|| = alpha^(-ell_j) = exp(tau ell_j),   a_j = s_j exp(tau ell_j),
    v_j = |a_j| psi_j,

with the log-norm *exponent* ell_j (ell_j(0) = -1; ell_j = 0 is the jump) and the direction
psi_j = v_j / ||w_j|| (psi_j(0) = <u_j, x_.>, ||psi_j|| <= 1). Balancedness |a_j| = ||w_j|| and
the sign s_j are conserved by the flow, so one exponent per neuron is exact, not a gauge choice.
With r_i = h(x_i) - y_i and h(x_i) = sum_j s_j exp(2 tau ell_j) relu(psi_ji),

    d ell_j / dt = -(s_j / n) sum_i r_i relu(psi_ji),
    d psi_ji / dt = -tau (s_j r_i / n + psi_ji d ell_j/dt)    where psi_ji > 0,
    d psi_ji / dt = 0                                         where psi_ji <= 0.

The exponents move at O(1) rates (at a saddle, d ell_j/dt = ||D_j||, Algorithm 1's rate); the
directions move tau times faster. Every alpha-dependent factor is exp(2 tau ell_j), which is
exactly 0 in float64 for a neuron far below the jump (tau |ell_j| > 745), as it is in the limit.
Components with psi_ji <= 0 are frozen for ever (the exact flow on orthonormal data), so no
integration error can flip their sign and wake them. This is the one rescaled two-layer
field of `theory._rescaled` in its "balanced" gauge (lam_j = tau ell_j), shared with the
other two-layer flows.

**Stiffness.** After a neuron has fitted its samples it relaxes at rate ~ tau a_j^2 / n: the
rescaled flow itself is stiff, by a factor tau. An explicit method (Dopri5) then runs at its
stability limit, h ~ 3 n / (tau a_j^2), and its steps grow like tau: a median of 6,200 per
solve at alpha = 1e-10 and 29,000 at 10^-10000 (n = 32, m = 45, `benchmarks.alpha_limit`).
The default solver is therefore `Rodas5P`, an L-stable Rosenbrock method whose step is set
by accuracy alone, with a structured linear solve (`_shifted_solve`): J couples the neurons
only through the n residuals, so each step's matrix shift I - J is inverted by Woodbury in
O(m n^2 + n^3) instead of the O((m n)^3) of a dense LU of the 1485 x 1485 Jacobian.

**Kinks.** A live component that reaches psi_ji = 0 freezes: the field jumps there, and an
adaptive solver that meets the jump inside a step shrinks the step to ~tol / |jump| and climbs
back, ten or more steps per crossing, for each of the m n components that cross. So the
solver is wrapped in `theory.numerics.HoldArgs`, which holds each step's live set fixed (the
components with psi_ji > 0 at the step's start): inside a step the field is smooth, relu(psi)
(all that the other components see of a component) is exact at every stage, and a component
that crossed zero is frozen from the next step on. Its kink, integrated as if smooth, is
charged to the step's error estimate (J times the area the kink cuts off), so it is still
resolved to the tolerance. The crossed component itself runs past zero with the live field
in its crossing step; that value is never used (`final_directions` reports it as 0).

The time scale tau = log(1/alpha) is the `time_scale` argument, as in `orthogonal_flow`.

**Which dynamics.** Like `orthogonal_flow`, this is the flow of exactly orthonormal inputs:
only the directions <u_j, x_i> enter, never X. For a float64 X whose coupling |X X^T - I| is
not far below alpha, the flow of that X differs (see `orthogonal_flow`): at alpha below
1e-16 even rounding-level coupling matters, so this flow is the alpha -> 0 limit of the
idealized problem, not of a particular float64 X.

Paper: *Mildly Overparameterized ReLU Networks on Orthogonal Data: Incremental Learning and
Implicit Bias* (NeurIPS 2026, arXiv:2605.27097).
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from dynamics import TwoLayerReLU
from theory import RESULTS, AbstractSolution, diffrax_stats, rescaled
from theory.checks import (
    check_finite,
    check_flag,
    check_plus_minus_one,
    check_shape,
    check_solver_choice,
    check_solver_options,
    check_time_grid,
    check_time_scale,
    inexact,
)
from theory.numerics import HoldArgs, Rodas5P, default_controller, diffeqsolve


class VanishingFlowSolution(AbstractSolution):
    """Result of `vanishing_flow`; every field is finite for any log(1/alpha).

    - `ts` (T,): save times (rescaled clock); `loss` (T,): L at those times.
    - `exponents` (T, m): ell_j(t), with ||w_j(t)|| = |a_j(t)| = alpha^(-ell_j(t)).
    - `cost` (T,): 1/2 ||theta||^2 = sum_j a_j^2 = sum_j exp(2 tau ell_j) (balancedness).
    - `final_exponents` (m,), `final_directions` (m, n): ell_j and psi_j = v_j / ||w_j|| at
      `ts[-1]` (0 on components that reached the kink, the initial value on components frozen
      from the start). `trajectory` (T, m, n) when `save_trajectory=True`, else `None`.
    - `signs` (m,), `initial_directions` (m, n), `time_scale` (tau = log(1/alpha)): the inputs.
    - `stats` (diffrax's `num_steps`, `num_accepted_steps`, `num_rejected_steps`) and
      `result` (a `theory.RESULTS` item); `ok` is True where the solve succeeded. After a
      failure the remaining saved values are `inf` (diffrax's convention), never silent NaNs.

    >>> sol = vanishing_flow(jnp.array([1.0, -1.0]), jnp.array([1.0, -1.0]),
    ...                      jnp.array([[0.6, 0.8], [0.8, 0.6]]), jnp.array([0.0, 3.0]),
    ...                      time_scale=1e4)
    >>> sol.exponents.shape, round(float(sol.cost[-1]), 3)  # Algorithm 1: |y_1| + |y_2|
    ((2, 2), 2.0)
    """

    result: RESULTS
    stats: dict
    ts: Float[Array, " T"]
    loss: Float[Array, " T"]
    exponents: Float[Array, "T m"]
    cost: Float[Array, " T"]
    final_exponents: Float[Array, " m"]
    final_directions: Float[Array, "m n"]
    trajectory: Float[Array, "T m n"] | None
    signs: Float[Array, " m"]
    initial_directions: Float[Array, "m n"]
    time_scale: Float[Array, ""]

    def to_model(self, X: Float[Array, "n d"], perp_directions=None) -> TwoLayerReLU:
        """The final parameters (a, W) in ordinary coordinates, where float64 can hold them.

        a_j = s_j alpha^(-ell_j); on live components v_ji = |a_j| psi_ji, on components frozen
        from the start v_ji = alpha <u_j, x_i>, on components that reached the kink during the
        flow v_ji = 0; W = V X + alpha * `perp_directions` (the part of u_j orthogonal to the
        data, which never moves; omitted when `None`, exact for d = n). Values below float64's
        range come out as 0.

        >>> sol = vanishing_flow(jnp.array([1.0]), jnp.array([1.0]), jnp.array([[1.0]]),
        ...                      jnp.array([0.0, 0.5]), time_scale=10.0)
        >>> model = sol.to_model(jnp.eye(1))  # halfway to the jump: |a| = alpha^(1/2)
        >>> round(float(model.a[0] / jnp.exp(-5.0)), 3)
        1.0
        """
        tau = self.time_scale
        size = jnp.exp(tau * self.final_exponents)
        alpha = jnp.exp(-tau)
        psi, psi0 = self.final_directions, self.initial_directions
        frozen = jnp.where(psi0 <= 0, alpha * psi0, 0.0)
        V = jnp.where(psi > 0, size[:, None] * psi, frozen)
        W = V @ X
        if perp_directions is not None:
            W = W + alpha * perp_directions
        return TwoLayerReLU(self.signs * size, W)


def _size2(ell, tau):
    """a_j^2 = exp(2 tau ell_j), capped for trial stages far past a jump (`theory._rescaled`)."""
    return rescaled.size2(tau * ell)


def _vector_field(t, state, args):
    """The shared rescaled field (`theory._rescaled`, gauge "balanced", G = I) in fast time
    s = tau t (tau = 1 there), converted to this state: d ell/dt = dL/ds (ell = L / tau) and
    d psi/dt = tau d psi/ds."""
    ell, psi = state
    signs, y, tau = args[:3]
    live = psi > 0 if len(args) == 3 else args[3]
    dL, dpsi = rescaled.balanced_field(tau * ell, signs, psi, y, live)
    return dL, tau * dpsi


def _step_args(t, state, args):
    """The live set of a step, fixed at its start (see **Kinks** in the module docstring)."""
    return args[:3] + (HoldArgs.live_set(state[1]),)


def _shifted_solve(vector_field, t, state, args, shift):
    """(shift I - J) x = b for the Jacobian J of `_vector_field`, by Woodbury: O(m n^2 + n^3)
    to form the n x n system once per step, O(m n + n^2) per right-hand side.

    With A_k = exp(2 tau ell_k), R = relu(psi), H = [psi > 0], r the residual and g = d ell/dt,
    J couples neuron j's unknowns (d ell_j, d psi_j) to the other neurons only through the
    residual's change q = dr (n numbers): q_i = sum_k s_k (A'_k R_ki d ell_k + A_k H_ki
    d psi_ki). Given q, each neuron's system is a diagonal plus rank one in d psi_j (the
    diagonal D_j = shift + tau g_j on live components, shift on frozen ones) and closes with
    E_j = shift + 2 tau g_j, the relaxation rate of ||psi_j||. Eliminating the neurons leaves
    one n x n system K q = rhs, K = diag(1 + tau/n sum_k A_k H_k / D_k) - R^T diag(w) beta,
    inverted once per step; each right-hand side then costs O(m n) plus an n x n product.
    The elimination divides by D_j and E_j, which vanish where the step size meets a
    shrinking neuron's rate (g_j < 0, shift = -tau g_j or -2 tau g_j). E_j = 0 makes the step
    matrix singular; D_j = 0 need not, but the elimination loses accuracy as D_j -> 0. Where
    either is below 1e-6 of the shift the solve returns inf, the step is rejected, and the
    controller picks another step size.
    """
    del vector_field, t
    ell, psi = state
    signs, y, tau = args[:3]
    n = y.shape[0]
    size2 = _size2(ell, tau)
    dsize2 = jnp.where(2.0 * tau * ell < rescaled.MAX_LOG_SIZE2, 2.0 * tau * size2, 0.0)  # d/d ell
    live = psi > 0
    act = jnp.where(live, psi, 0.0)
    r = (signs * size2) @ act - y
    g = -signs * (act @ r) / n
    rho = jnp.where(live, r[None, :], 0.0)
    D = shift + tau * g
    E = shift + 2.0 * tau * g
    # d g_j = alpha_j(b) + <beta_j, q>: the neuron's growth rate given the residual's change
    beta = (D[:, None] * act - (tau / n) * signs[:, None] * rho) * (-(signs / n) / E)[:, None]
    w = signs * (dsize2 / shift - tau * size2 / D)
    K = jnp.diag(1.0 + (tau / n) * ((size2 / D) @ live.astype(psi.dtype))) - act.T @ (
        w[:, None] * beta
    )

    # each right-hand side of every Rosenbrock stage is a chain of O(m n) passes, written as
    # broadcasts and sums (which XLA fuses) and a product with K^-1 (n x n, formed once)
    K_inv = jnp.linalg.inv(K)
    c_ell = signs * dsize2 / shift
    c_psi = signs * size2 / D
    tiny = 1e-6 * jnp.abs(shift)
    safe = jnp.all(jnp.abs(D) > tiny) & jnp.all(jnp.abs(E) > tiny)

    def solve(b):
        b_ell, b_psi = b
        b_live = jnp.where(live, b_psi, 0.0)
        alpha = -(signs / n) * jnp.sum(rho * b_live, axis=1) / E
        rhs = jnp.sum(
            (c_ell * (b_ell + alpha))[:, None] * act
            + c_psi[:, None] * (b_live - tau * act * alpha[:, None]),
            axis=0,
        )
        q = jnp.sum(K_inv * rhs[None, :], axis=1)
        dg = alpha + jnp.sum(beta * q[None, :], axis=1)
        d_ell = (b_ell + dg) / shift
        d_live = b_psi - tau * act * dg[:, None] - (tau / n) * signs[:, None] * q[None, :]
        d_psi = jnp.where(live, d_live / D[:, None], b_psi / shift)
        return jnp.where(safe, d_ell, jnp.inf), jnp.where(safe, d_psi, jnp.inf)

    return solve


def _overshoot(state0, state1, args):
    """The live components that ended a step past the kink: their value there (`HoldArgs`)."""
    return jnp.zeros_like(state1[0]), HoldArgs.past_kink(args[3], state1[1])


def _solver(solver, hold_live: bool):
    """The solver a `vanishing_flow` call runs: `Rodas5P` with the Woodbury solve by default,
    wrapped in `HoldArgs` with the live-set hooks unless `hold_live=False`."""
    if solver is None:
        if not hold_live:
            # a Rosenbrock step freezes J at its start: on the plain field a kink inside a
            # step is then an O(1) error at every step size, and the solve stalls
            raise ValueError(
                "`hold_live=False` needs an explicit `solver` (e.g. diffrax.Dopri5()): the "
                "default Rodas5P stalls on the plain field's kinks"
            )
        solver = Rodas5P(shifted_solve=_shifted_solve)
    return HoldArgs(solver, _step_args, _overshoot) if hold_live else solver


def vanishing_flow(
    y: Float[Array, " n"],
    signs: Float[Array, " m"],
    directions: Float[Array, "m n"],
    ts: Float[Array, " T"],
    *,
    time_scale,
    rtol: float = 1e-9,
    atol: float = 1e-9,
    max_steps: int = 1_000_000,
    save_trajectory: bool = False,
    solver: diffrax.AbstractAdaptiveSolver | None = None,
    hold_live: bool = True,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    throw: bool = False,
) -> VanishingFlowSolution:
    """Rescaled gradient flow d theta/dt = -log(1/alpha) grad L from a balanced init at any alpha.

    The network h(x) = sum_j a_j relu(w_j . x), L = 1/(2n) sum_i (h(x_i) - y_i)^2 on orthonormal
    inputs, starts at a_j = alpha s_j, w_j = alpha u_j, and is integrated in the exponent /
    direction coordinates of the module docstring: ||w_j|| = alpha^(-ell_j), ell_j(0) = -1.
    alpha itself is never formed, so `time_scale` tau = log(1/alpha) can be 1e4 or more; at
    alpha = 1e-30 the solution agrees with `orthogonal_flow` (the same flow in other
    coordinates).

    **Arguments:**

    - `y` (n,): labels; `signs` (m,): s_j in {-1, +1}; `directions` (m, n): <u_j, x_i>, as
      returned by `dynamics.signs_and_directions` (only the data-basis part of u_j moves).
    - `ts` (T,): increasing save times in the rescaled clock, from 0 or later; the flow
      starts at `ts[0]`.
    - `time_scale`: tau = log(1/alpha) > 0, finite (an array, so sweeps do not recompile).
    - `rtol`, `atol`: tolerances (exponents and directions are O(1), so they are relative to
      each neuron's size). `solver` default `Rodas5P` with the structured solve of the module
      docstring; any adaptive diffrax solver can be passed instead (`diffrax.Dopri5()` is
      faster where the flow is hardly stiff, at moderate log(1/alpha), and slower at large
      log(1/alpha); `benchmarks.alpha_limit` measures both). `hold_live` (default True) holds
      each step's live set fixed (**Kinks** above) around whichever solver runs; `False` gives
      the solver the plain field, live where psi > 0 (with an explicit solver only; the
      default Rodas5P refuses it). `stepsize_controller` default an I
      controller at `rtol`/`atol` for the default solver (diffrax's `PIDController`), and for
      a solver passed in the PI controller of `orthogonal_flow` (pcoeff 0.4, icoeff 0.3).
      `throw=True` raises where the solve fails.

    **Returns:** a `VanishingFlowSolution`. Pure and `jax.vmap`-able over every array argument.

    One neuron on one sample reaches Algorithm 1's cost ||y_S|| = 1 at alpha = 10^-1000:

    >>> sol = vanishing_flow(jnp.array([1.0]), jnp.array([1.0]), jnp.array([[1.0]]),
    ...                      jnp.linspace(0.0, 2.0, 5), time_scale=1000 * jnp.log(10.0))
    >>> bool(sol.ok), round(float(sol.cost[-1]), 4), float(sol.exponents[0, 0])
    (True, 1.0, -1.0)
    """
    check_shape("signs", signs, (None,))
    m = jnp.shape(signs)[0]
    check_shape("y", y, (None,))
    n = jnp.shape(y)[0]
    check_shape("directions", directions, (m, n))
    if m == 0 or n == 0:
        raise ValueError(f"need at least one neuron and one sample, got m = {m}, n = {n}")
    dtype = jnp.result_type(jnp.asarray(directions), jnp.asarray(y), jnp.float32)
    signs = jnp.asarray(check_plus_minus_one("signs", signs), dtype)
    tau = check_time_scale(time_scale, dtype)
    rtol, atol, max_steps = check_solver_options(rtol, atol, max_steps)
    check_solver_choice(solver, stepsize_controller)
    directions = check_finite("directions", inexact(directions, dtype, name="directions"))
    y = check_finite("y", inexact(y, dtype, name="y"))
    ts = check_time_grid("ts", ts, dtype)
    hold_live = check_flag("hold_live", hold_live)
    save_trajectory = check_flag("save_trajectory", save_trajectory)
    if stepsize_controller is None:
        # PI damping is for an explicit solver at its stability limit (`default_controller`);
        # the L-stable default has none, and a plain I controller takes 12% fewer steps
        explicit_default = solver is not None
        stepsize_controller = (
            default_controller(rtol, atol)
            if explicit_default
            else diffrax.PIDController(rtol=rtol, atol=atol)
        )
    solver = _solver(solver, hold_live)
    out = _solve(y, signs, directions, ts, tau, solver, stepsize_controller, max_steps,
                 save_trajectory)  # fmt: skip
    return out.raise_if_failed(throw)


@eqx.filter_jit
def _solve(y, signs, directions, ts, tau, solver, stepsize_controller, max_steps, save_trajectory):
    """The solve itself, compiled once per shape and option set (the inputs are checked)."""
    args = (signs, y, tau)

    def reported(psi):
        """Components that reached the kink at 0 (the value past it is never used)."""
        return jnp.where(directions > 0, jnp.maximum(psi, 0.0), psi)

    def save(t, state, args):
        ell, psi = state
        r = rescaled.residual(tau * ell, signs, jax.nn.relu(psi), y)
        out = (0.5 * jnp.mean(r * r), ell, jnp.sum(jnp.exp(2.0 * tau * ell)))
        return out + ((reported(psi),) if save_trajectory else ())

    sol = diffeqsolve(
        diffrax.ODETerm(_vector_field),
        solver,
        t0=ts[0],
        t1=ts[-1],
        dt0=None,
        y0=(-jnp.ones(signs.shape, ts.dtype), directions),
        args=args,
        saveat=diffrax.SaveAt(subs=[diffrax.SubSaveAt(ts=ts, fn=save), diffrax.SubSaveAt(t1=True)]),
        stepsize_controller=stepsize_controller,
        max_steps=max_steps,
        throw=False,
        grid_checked=True,
    )
    saved, (ell1, psi1) = sol.ys
    out = VanishingFlowSolution(
        ts=ts,
        loss=saved[0],
        exponents=saved[1],
        cost=saved[2],
        final_exponents=ell1[-1],
        final_directions=reported(psi1[-1]),
        trajectory=saved[3] if save_trajectory else None,
        signs=signs,
        initial_directions=directions,
        time_scale=tau,
        result=RESULTS.promote(sol.result),
        stats=diffrax_stats(sol),
    )
    return out
