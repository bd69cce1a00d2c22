"""Gradient flow of the two-layer ReLU net on orthonormal data, with diffrax (`orthogonal_flow`).

The rescaled flow d theta/dt = -tau grad L(theta) (tau = log(1/alpha) for the saddle-to-saddle
clock, tau = 1 for ordinary time) moves neurons whose sizes differ by a factor 1/alpha = 1e100:
one error scale cannot serve a neuron at 1e-100 and one at O(1), and a component crossing a
ReLU kink has no scale of its own. The formulation below gives every neuron its own scale.

**Data basis.** With orthonormal rows x_i, write v_ji = <w_j, x_i>; the part of w_j orthogonal
to the data never moves. In these coordinates (r = h - y)

    da_j/dt = -tau/n sum_i r_i relu(v_ji),     dv_ji/dt = -tau/n a_j r_i 1[v_ji > 0],

so a component with v_ji <= 0 is frozen for ever: it neither moves nor acts.

**Per-neuron log scale.** We integrate theta_j = (a_j, v_j) = exp(kappa_j) psi_j with the gauge
d kappa_j/dt = -tau <P_j, g_j(P_j)> / ||P_j||^2, where P_j is the live part of psi_j (a_j and
its positive v_ji) and g_j the loss gradient of the neuron, 1-homogeneous in P_j. Then ||P_j||
stays 1, every live component is O(1) and kappa_j = O(log 1/alpha), so a plain absolute +
relative tolerance controls each neuron's *relative* error, whatever its size. The live part
moves by d psi/dt = -tau g_j(psi_j) - psi_j d kappa_j/dt; frozen components get an exactly zero
derivative, so no integration error can flip their sign and wake them (the failure of plain
polar coordinates, where frozen components decay relative to a growing neuron, a stiff mode
that explicit solvers turn into tolerance-level noise of either sign). The parameters come
back as v_ji = exp(kappa_j) psi_ji on live components, v_ji(0) on components frozen from the
start, and 0 on components that reached the kink during the flow. The field is the one
rescaled two-layer field of `theory._rescaled` (gauge "norm", G = I), shared with
`two_layer_flow`, `vanishing_flow` and the fast phases of `theory.saddle_jumps`.

**Kinks.** A live component that reaches v_ji = 0 freezes, and the field jumps there; an adaptive
solver that meets the jump inside a step shrinks the step to ~tol / |jump| and climbs back, ten or
more steps per crossing. By default the solver is wrapped in `theory.numerics.HoldArgs`, which holds
each step's live set fixed (the field is smooth inside every step, relu of each component exact at
every stage) and adds the kink's area to the error estimate, so the crossing is still resolved to
the tolerance: on the main job's instances 336 steps per solve at alpha = 1e-10 / sqrt(45) instead
of 1,374.

**Which dynamics.** This is the flow of *exactly* orthonormal inputs (the data basis): X is
accepted when max |X X^T - I| <= 1e-6, and its coupling is then ignored. At small alpha the
flow of the given float64 X itself differs once that coupling is not far below alpha: coupled
frozen components (v_ji <= 0, of size alpha) get pushed across the kink as the neurons grow,
and wake samples the ideal flow never fits. Measured (n = 8, d = 12, m = 16, plain-coordinate
GD on X against this flow, `tests/test_flow.py`, slow): at alpha = 1e-8 a coupling of 3e-14 (and
even 3e-10) changes the jump times by 0.1%, GD's own step error; at alpha = 1e-30 a coupling
of 3e-14, or the 7e-16 of float64 rounding, brings the last loss crossing from t = 108 to
t = 6.0 (95% earlier).

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
    check_matrix,
    check_model,
    check_orthonormal_rows,
    check_shape,
    check_solver_choice,
    check_solver_options,
    check_time_grid,
    check_time_scale,
    check_value,
    inexact,
)
from theory.numerics import HoldArgs, default_controller, diffeqsolve


class ScaledState(eqx.Module):
    """Flow state: per-neuron `log_scale` kappa_j (m,) and `psi` (m, 1 + n), the columns being
    a_j and v_j1..v_jn divided by exp(kappa_j)."""

    log_scale: Float[Array, " m"]
    psi: Float[Array, "m n1"]


class _Frame(eqx.Module):
    """What the flow never changes: data, labels, time scale, frozen values."""

    X: Float[Array, "n d"]
    y: Float[Array, " n"]
    tau: Float[Array, ""]
    v_frozen: Float[Array, "m n"]  # v_ji(0) where v_ji(0) <= 0, else 0
    w_perp: Float[Array, "m d"]  # the part of w_j orthogonal to the data
    live: Array | None = None  # the live set held for a step (`HoldArgs`), else psi_v > 0


def _held_live(t, state: ScaledState, frame: _Frame) -> _Frame:
    """The frame with the live set at a step's start, for `HoldArgs`."""
    live = HoldArgs.live_set(state.psi[:, 1:])
    return eqx.tree_at(lambda f: f.live, frame, live, is_leaf=lambda x: x is None)


def _overshoot(state0: ScaledState, state1: ScaledState, frame: _Frame) -> ScaledState:
    """The live components that ended a step past the kink: their value there (`HoldArgs`)."""
    psi_v = HoldArgs.past_kink(frame.live, state1.psi[:, 1:])
    psi = jnp.concatenate([jnp.zeros_like(state1.psi[:, :1]), psi_v], axis=1)
    return ScaledState(jnp.zeros_like(state1.log_scale), psi)


def _initial_state(model: TwoLayerReLU, X) -> tuple[ScaledState, Float[Array, "m n"]]:
    v = model.W @ X.T
    theta = jnp.concatenate([model.a[:, None], v], axis=1)
    live = jnp.concatenate([model.a[:, None], jax.nn.relu(v)], axis=1)
    # a dead neuron (a_j = 0 and every v_ji <= 0) has no live part: it never moves, so it
    # keeps kappa = 0 and its frozen values, instead of log 0
    kappa, psi = rescaled.log_polar(theta, live)
    return ScaledState(kappa, psi), jnp.minimum(v, 0.0)


def _to_model(state: ScaledState, frame: _Frame) -> TwoLayerReLU:
    scale = jnp.exp(state.log_scale)[:, None]
    psi_v = state.psi[:, 1:]
    v = jnp.where(psi_v > 0, scale * psi_v, frame.v_frozen)
    return TwoLayerReLU(scale[:, 0] * state.psi[:, 0], v @ frame.X + frame.w_perp)


def _loss(state: ScaledState, y):
    r = rescaled.residual(state.log_scale, state.psi[:, 0], jax.nn.relu(state.psi[:, 1:]), y)
    return 0.5 * jnp.mean(r * r)


def _vector_field(t, state: ScaledState, frame: _Frame):
    """The shared rescaled field (`theory._rescaled`, gauge "norm", G = I): the live
    components move, the frozen ones get an exactly zero derivative."""
    psi_v = state.psi[:, 1:]
    live = psi_v > 0 if frame.live is None else frame.live
    dkappa, dpsi_a, dpsi_v = rescaled.field(
        state.log_scale,
        state.psi[:, 0],
        psi_v,
        frame.y,
        frame.tau,
        act=jax.nn.relu(psi_v),
        slope=live,
        moving=live,
    )
    return ScaledState(dkappa, jnp.concatenate([dpsi_a[:, None], dpsi_v], axis=1))


class OrthogonalFlowSolution(AbstractSolution):
    """Result of `orthogonal_flow`.

    - `ts` (T,): save times (rescaled clock); `loss` (T,): L at those times.
    - `trajectory`: the model at every save time (leading axis T) when `save_trajectory=True`,
      else `None`.
    - `model`: the parameters at the final time `ts[-1]`.
    - `log_scale` (T, m): kappa_j = log ||(a_j, live v_j)|| at the save times: the neuron
      sizes on a log scale, finite even where exp(kappa) underflows.
    - `time_scale`: the tau it was integrated with.
    - `stats`: diffrax's `num_steps`, `num_accepted_steps`, `num_rejected_steps`.
    - `result`: a `theory.RESULTS` item; `ok` is True where it is `successful`. After a
      failure the remaining saved values are `inf` (diffrax's convention), never silent NaNs.

    >>> model = TwoLayerReLU(jnp.array([0.1]), jnp.array([[0.1, 0.0]]))
    >>> sol = orthogonal_flow(jnp.eye(2), jnp.array([1.0, 0.0]), model, jnp.array([0.0, 1.0]))
    >>> sol.loss.shape, sol.model.W.shape, sorted(sol.stats)
    ((2,), (1, 2), ['num_accepted_steps', 'num_rejected_steps', 'num_steps'])
    """

    result: RESULTS
    stats: dict
    ts: Float[Array, " T"]
    loss: Float[Array, " T"]
    log_scale: Float[Array, "T m"]
    trajectory: TwoLayerReLU | None
    model: TwoLayerReLU
    time_scale: Float[Array, ""]


def orthogonal_flow(
    X: Float[Array, "n d"],
    y: Float[Array, " n"],
    model: TwoLayerReLU,
    ts: Float[Array, " T"],
    *,
    time_scale=1.0,
    rtol: float = 1e-7,
    atol: float = 1e-7,
    max_steps: int = 100_000,
    save_trajectory: bool = False,
    solver: diffrax.AbstractAdaptiveSolver | None = None,
    hold_live: bool = True,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    throw: bool = False,
) -> OrthogonalFlowSolution:
    """Integrate d theta/dt = -tau grad L(theta), L = 1/(2n) sum_i (h(x_i) - y_i)^2, from `ts[0]`.

    h(x) = sum_j a_j relu(w_j . x) with relu'(0) = 0, on inputs `X` with orthonormal rows
    (`ValueError` otherwise). With `time_scale` tau = log(1/alpha), the clock of theta~(t) =
    theta(log(1/alpha) t) is the rescaled one, in which the small-initialization flow becomes a jump
    process. Integration uses the per-neuron log-scale formulation of the module docstring, an
    adaptive `solver` (default `diffrax.Dopri5()`), with each step's live set held fixed around it
    (`theory.numerics.HoldArgs`; see **Kinks** in the module docstring; `hold_live=False` gives the
    solver the plain field instead), and `stepsize_controller` (default a PI controller at
    `rtol`/`atol` with pcoeff = 0.4, icoeff = 0.3: after the jumps the fitted neurons make the step
    size stability-limited, where these damp the accept/reject oscillation). Pure and
    `jax.vmap`-able over models, data, `ts` and `time_scale` (an array, so a sweep over alpha does
    not recompile). `ts` (T,) must be increasing, from t = 0 or later; the flow starts from `model`
    at `ts[0]`. `throw=True` raises where the solve fails instead of returning `ok = False`.

    **Arguments:**

    - `X` (n, d): inputs with orthonormal rows; `y` (n,): labels.
    - `model`: the `TwoLayerReLU` start (any size: its log scale is exact at any alpha whose
      square float64 holds).
    - `ts` (T,): increasing save times, from t = 0 or later.
    - `time_scale`: tau > 0, log(1/alpha) for the rescaled clock (an array under `vmap`).
    - `rtol`, `atol`, `max_steps`: the step control and budget; `solver`,
      `stepsize_controller` replace them.
    - `save_trajectory`: also return the net at every save time.
    - `hold_live`: hold each step's live set (default) or give the solver the plain field.
    - `throw`: raise where the solve fails.

    **Returns:** an `OrthogonalFlowSolution` (`ts`, `loss`, `log_scale`, `model`,
    `trajectory`, `result`, `stats`).

    **Raises:** `ValueError` on rows that are not orthonormal, shapes that do not match,
    non-finite data or model, a non-increasing `ts`, a non-positive `time_scale`, bad solver
    options, or an initial loss that overflows.

    >>> X, y = jnp.eye(2), jnp.array([1.0, -1.0])
    >>> model = TwoLayerReLU(jnp.array([1e-3, -1e-3]), 1e-3 * jnp.eye(2))
    >>> tau = jnp.log(1e3)
    >>> sol = orthogonal_flow(X, y, model, jnp.linspace(0.0, 3.0, 4), time_scale=tau)
    >>> bool(sol.ok), bool(sol.loss[-1] < 1e-6)
    (True, True)
    """
    check_model("model", model, TwoLayerReLU)
    X = check_matrix("X", X)
    n, d = X.shape
    if n == 0:
        raise ValueError("`X` must hold at least one sample, got none")
    check_shape("y", y, (n,))
    check_shape("model.W", model.W, (None, d))
    dtype = jnp.result_type(model.a.dtype, jnp.asarray(X).dtype, float)
    X, y = (
        check_finite("X", inexact(X, dtype, name="X")),
        check_finite("y", inexact(y, dtype, name="y")),
    )
    X = check_orthonormal_rows("X", X)
    ts = check_time_grid("ts", ts, dtype)
    tau = check_time_scale(time_scale, dtype)
    rtol, atol, max_steps = check_solver_options(rtol, atol, max_steps)
    check_solver_choice(solver, stepsize_controller)
    model = TwoLayerReLU(check_finite("model.a", model.a), check_finite("model.W", model.W))
    X = check_initial_loss(model, X, y)
    hold_live = check_flag("hold_live", hold_live)
    save_trajectory = check_flag("save_trajectory", save_trajectory)
    solver = diffrax.Dopri5() if solver is None else solver
    if hold_live:
        solver = HoldArgs(solver, _held_live, _overshoot)
    if stepsize_controller is None:
        stepsize_controller = default_controller(rtol, atol)
    out = _solve(X, y, model, ts, tau, solver, stepsize_controller, max_steps, save_trajectory)
    return out.raise_if_failed(throw)


@eqx.filter_jit
def _solve(X, y, model, ts, tau, solver, stepsize_controller, max_steps, save_trajectory):
    """The solve itself, compiled once per shape and option set (the inputs are checked)."""
    state0, v_frozen = _initial_state(model, X)
    w_perp = model.W - (model.W @ X.T) @ X
    frame = _Frame(X, y, tau, v_frozen, w_perp)

    def save(t, state, frame):
        params = _to_model(state, frame) if save_trajectory else None
        return _loss(state, frame.y), state.log_scale, params

    sol = diffeqsolve(
        diffrax.ODETerm(_vector_field),
        solver,
        t0=ts[0],
        t1=ts[-1],
        dt0=None,
        y0=state0,
        args=frame,
        saveat=diffrax.SaveAt(subs=[diffrax.SubSaveAt(ts=ts, fn=save), diffrax.SubSaveAt(t1=True)]),
        stepsize_controller=stepsize_controller,
        max_steps=max_steps,
        throw=False,
        grid_checked=True,
    )
    (loss, log_scale, trajectory), final = sol.ys
    out = OrthogonalFlowSolution(
        ts=ts,
        loss=loss,
        log_scale=log_scale,
        trajectory=trajectory,
        model=_to_model(jax.tree_util.tree_map(lambda leaf: leaf[-1], final), frame),
        time_scale=tau,
        result=RESULTS.promote(sol.result),
        stats=diffrax_stats(sol),
    )
    return out


def check_initial_loss(model, X, y):
    """`X`, refused where the net's loss at the start overflows (outputs near 1e154 or larger:
    a model x 1e200 was integrated from an infinite loss and came back ok)."""
    h = jnp.maximum(X @ model.W.T, 0.0) @ model.a
    r = h - y
    return check_value(
        X,
        jnp.isfinite(jnp.sum(r * r)),
        "`model`'s loss at the start overflows (its outputs a_j relu(w_j . x) are near 1e154 "
        "or larger): scale the model",
    )
