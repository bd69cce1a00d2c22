"""The segment loop of `two_layer_flow` (its module docstring says what it computes): each
iteration classifies the kink event that ended the previous segment, then solves to the next
event with the pattern held."""

import dataclasses
import functools
from typing import NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from dynamics import TwoLayerReLU
from theory import RESULTS, name_nonfinite
from theory.numerics import default_controller, diffeqsolve

from ._gd import _basis_loss as basis_loss, _input_loss as input_loss
from ._illinois import _TimeIllinois
from ._nonsmooth import ACTIVE, SLIDING, toward_kink
from ._sliding_factor import _no_sliding
from ._stepped import StepOptions, stepped_solve
from ._two_layer_field import (
    _KINK_TOL,
    _classify,
    _distance,
    _distance_of,
    _event_condition,
    _field_parts,
    _Frame,
    _initial,
    _residual,
    _to_model,
    _vector_field,
)

# Save times per solve between events: a solve saves at most this many, from the first unsaved
# one, and a solve that reaches the last of them without an event goes on from there. Every
# solve saving at all T times (the trajectory too: T x m x (n + 1) floats) cost O(T) per kink
# event, and under `jax.vmap` a member that had finished re-ran its save loop over all T
# times at every step of the others: 4 seeds of beyond_orthogonal (n = 16) took 87.9 s
# vmapped against 11.2 s one at a time.
_SAVE_WINDOW = 16
_FIRST_STEP = 1e-9  # a segment's least first step (and the flow's first), per unit of time


class _Setup(NamedTuple):
    """What every segment of one flow shares (`_setup`)."""

    G: jax.Array  # the Gram matrix X X^T (exactly I where X is orthonormal to `gram_tol`)
    F: jax.Array | None  # X itself where d < n / 2: G = F F^T, cheaper to multiply by
    y: jax.Array
    tau: jax.Array
    slow: jax.Array  # the speed below which an entry counts as at rest
    ts: jax.Array
    window: int  # save times per segment
    least_dt: jax.Array  # the first step, and the least first step
    solver: diffrax.AbstractSolver
    controller: diffrax.AbstractStepSizeController
    rtol: float
    max_steps: int
    max_kink_events: int


def _gram(X, gram_tol):
    """X X^T, or exactly I where it is within `gram_tol` of it (orthonormal to rounding: the
    orthonormal flow itself)."""
    G = X @ X.T
    eye = jnp.eye(X.shape[0], dtype=X.dtype)
    return jnp.where(jnp.max(jnp.abs(G - eye)) <= gram_tol, eye, G)


def _setup(X, y, ts, tau, limits, solver, options) -> _Setup:
    rtol, atol, max_steps, _ = options
    max_kink_events, gram_tol = limits
    return _Setup(
        G=_gram(X, gram_tol), F=X if 2 * X.shape[1] < X.shape[0] else None, y=y, tau=tau,
        slow=jnp.asarray(max(atol, 1e-10), X.dtype), ts=ts,
        window=min(ts.shape[0], _SAVE_WINDOW), least_dt=_FIRST_STEP * (ts[-1] - ts[0]),
        solver=solver, controller=default_controller(rtol, atol), rtol=rtol,
        max_steps=max_steps, max_kink_events=max_kink_events,
    )  # fmt: skip


def _frame(s: _Setup, mode, factor) -> _Frame:
    """The field's frame of a pattern (`mode`) and its sliding factor."""
    return _Frame(s.G, s.y, s.tau, mode, s.slow, factor, F=s.F)


def _save(t, state, frame):
    kappa, psi = state
    r = _residual(kappa, psi, frame)[1]
    return 0.5 * jnp.mean(r * r), kappa, psi


def _segment(s: _Setup, t0, state, mode, factor, ts_win, dt0):
    """Solve from t0 to the next kink event or to the last of the save times `ts_win`
    (the `window` from the first unsaved one, or the last `window`), from a first step
    dt0."""
    # the pattern holds until the next event: the sliding systems' inverses are the
    # classification's (`_classify`), applied at every evaluation
    frame = _frame(s, mode, factor)
    r0 = _residual(*state, frame)[1]
    d0 = _distance(state, dataclasses.replace(frame, r0=r0))
    # the event condition measures each entry in units of its distance here
    frame = dataclasses.replace(frame, r0=r0, d0=d0)
    # an entry already past its kink (a sliding weight that rounding put a hair outside
    # [0, 1] when the pattern was set): its crossing would never be seen, so the segment
    # ends where it starts, with an event there
    past = jnp.min(d0) < 0
    t1 = jnp.where(past, t0, ts_win[-1])
    sol = diffeqsolve(
        diffrax.ODETerm(_vector_field),
        s.solver,
        t0=t0,
        t1=t1,
        dt0=dt0,
        y0=state,
        args=frame,
        saveat=diffrax.SaveAt(
            subs=[
                diffrax.SubSaveAt(ts=jnp.clip(ts_win, t0, t1), fn=_save),
                diffrax.SubSaveAt(t1=True),
            ]
        ),
        stepsize_controller=s.controller,
        event=diffrax.Event(_event_condition, root_finder=_TimeIllinois(rtol=1e-13, atol=1e-13)),
        max_steps=s.max_steps,
        throw=False,
        grid_checked=True,
    )
    saved, final = sol.ys
    final = jax.tree_util.tree_map(lambda leaf: leaf[-1], final)
    stopped = jnp.asarray(sol.event_mask) | past
    result = RESULTS.where(
        sol.result == diffrax.RESULTS.event_occurred,
        RESULTS.successful,
        RESULTS.promote(sol.result),
    )
    result = name_nonfinite(result, final, _vector_field(sol.ts[1][-1], final, frame))
    return sol.ts[1][-1], final, stopped, saved, result, sol.stats, frame


def _new_pattern(s: _Setup, state, frame, initial, pending):
    """The pattern after the event that ended a segment (`frame`: the segment's), or at
    t = 0 (`initial`), where the entries exactly on their kinks are classified like any
    other kink event. Without an event (not `pending`: the segment reached its window's
    end) nothing is classified, and the factor is only brought to the batch's block size
    (`_refactor`): one classification, and one factorization, in the program (they are
    most of what two_layer_flow compiles)."""
    mode = frame.mode
    _, pz, _, sigma, _, g_z = _field_parts(*state, frame)  # one solve for sigma
    dist = _distance_of(mode, pz, sigma)
    first = jnp.arange(dist.size).reshape(dist.shape) == jnp.argmin(dist)
    # besides the entry that stopped the solve: entries on the wrong side, and entries
    # within a hair of the kink that move towards it (not those moving away from it)
    vel = -s.tau * g_z  # `_velocity`
    towards = (mode != SLIDING) & toward_kink(mode == ACTIVE, vel)
    near = (dist <= _KINK_TOL * s.rtol) & (towards | (mode == SLIDING))
    candidates = jnp.where(initial, state[1][:, 1:] == 0, first | near | (dist < 0))
    candidates &= pending
    state, mode, entered, factor = _classify(state, frame, candidates)
    return state, mode, entered.astype(jnp.int32), factor


def _merge(saved, old_saved, old_filled, ts_win, start, t0, t1):
    """The saves of a segment from t0 to t1 merged into the flow's (saved times are a
    prefix: `start` is the first unsaved one, or the last window's)."""
    window = ts_win.shape[0]
    filled_win = jax.lax.dynamic_slice_in_dim(old_filled, start, window)
    take = (ts_win >= t0) & (ts_win <= t1) & ~filled_win

    def merge(new, old):
        old_win = jax.lax.dynamic_slice_in_dim(old, start, window)
        new_win = jnp.where(take.reshape((window,) + (1,) * (new.ndim - 1)), new, old_win)
        return jax.lax.dynamic_update_slice_in_dim(old, new_win, start, axis=0)

    merged = jax.tree_util.tree_map(merge, saved, old_saved)
    filled = jax.lax.dynamic_update_slice_in_dim(old_filled, filled_win | take, start, 0)
    return merged, filled


def _body(s: _Setup, c: dict) -> dict:
    """One iteration: classify the event that ended the previous segment (`pending`; at
    t = 0 the kinks of the init), then solve to the next event."""
    frame0 = _frame(s, c["mode"], c["factor"])
    state, mode, entered, factor = _new_pattern(s, c["state"], frame0, c["initial"], c["pending"])
    T = s.ts.shape[0]
    start = jnp.minimum(jnp.sum(c["filled"]), T - s.window)  # saved times are a prefix
    ts_win = jax.lax.dynamic_slice_in_dim(s.ts, start, s.window)
    t1, final, stopped, saved, result, stats, frame = _segment(
        s, c["t"], state, mode, factor, ts_win, c["dt"]
    )
    merged, filled = _merge(saved, c["saved"], c["filled"], ts_win, start, c["t"], t1)
    ok = result == RESULTS.successful
    # an event beyond the budget is not processed: the solve stops at it
    limited = stopped & ok & (c["events"] >= s.max_kink_events)
    keep = stopped & ok & ~limited
    # the next segment starts with this one's mean step: kink events come at about that
    # spacing (a first step far longer brackets many crossings, which the root finder then
    # bisects down one by one)
    mean_step = (t1 - c["t"]) / jnp.maximum(stats["num_accepted_steps"], 1)
    return dict(
        t=t1, state=final, mode=mode, factor=frame.factor, pending=keep,
        initial=jnp.asarray(False), saved=merged, filled=filled,
        result=RESULTS.where(limited, RESULTS.kink_limited, result),
        events=c["events"] + keep.astype(jnp.int32), entries=c["entries"] + entered,
        steps=c["steps"] + stats["num_steps"],
        accepted=c["accepted"] + stats["num_accepted_steps"],
        rejected=c["rejected"] + stats["num_rejected_steps"],
        dt=jnp.where(t1 > c["t"], jnp.maximum(mean_step, s.least_dt), c["dt"]),
        # a segment that reached its window's end without an event goes on from there
        done=~ok | limited | (t1 >= s.ts[-1]),
    )  # fmt: skip


@eqx.filter_jit
def _solve(model, X, y, ts, tau, limits, solver, options) -> dict:
    """The flow itself, compiled once per shape and option set (the checks are done): the
    fields of its `TwoLayerFlowSolution`."""
    save_trajectory = options[3]
    s = _setup(X, y, ts, tau, limits, solver, options)
    n, m, T, dtype = X.shape[0], model.width, ts.shape[0], X.dtype
    X_pinv = jnp.linalg.pinv(X)
    state0, mode0, Z0 = _initial(model, X)
    blank = (
        jnp.full((T,), jnp.inf, dtype),
        jnp.full((T, m), jnp.inf, dtype),
        jnp.full((T, m, n + 1), jnp.inf, dtype),
    )
    zero = jnp.zeros((), jnp.int32)
    # each iteration classifies the event that ended the previous segment, then solves to
    # the next event: one classification in the program (most of what it compiles)
    carry0 = dict(
        t=ts[0], state=state0, mode=mode0, factor=_no_sliding(s.G, m),
        pending=jnp.asarray(True), initial=jnp.asarray(True), saved=blank,
        filled=jnp.zeros((T,), bool), result=RESULTS.successful, events=zero, entries=zero,
        steps=zero, accepted=zero, rejected=zero, done=jnp.asarray(False), dt=s.least_dt,
    )  # fmt: skip
    c = jax.lax.while_loop(lambda c: ~c["done"], functools.partial(_body, s), carry0)
    loss, log_scale, psis = c["saved"]
    kappa, psi = c["state"]
    trajectory = None
    if save_trajectory:
        trajectory = jax.vmap(lambda k, p: _to_model(k, p, model, Z0, X_pinv))(log_scale, psis)
    return dict(
        ts=ts,
        loss=loss,
        log_scale=log_scale,
        model=_to_model(kappa, psi, model, Z0, X_pinv),
        trajectory=trajectory,
        pattern=c["mode"],
        time_scale=tau,
        gram=s.G,
        result=c["result"],
        stats={
            "num_steps": c["steps"],
            "num_accepted_steps": c["accepted"],
            "num_rejected_steps": c["rejected"],
            "num_kink_events": c["events"],
            "num_sliding_entries": c["entries"],
        },
    )


def _basis_loss(p, data):
    """L in the data basis: p = (a, Z) with Z = W X^T, data = (G, y) (`_gd`'s loss)."""
    return basis_loss(p, data[1])


def _basis_field(p, data):
    """The flow's field over tau in the data basis (module docstring of `_two_layer`): dL/da,
    and dL/dZ G for Z (relu'(0) = 0, so s_ji = 1[z_ji > 0])."""
    ga, gZ = jax.grad(_basis_loss)(p, data)
    return ga, gZ @ data[0]


def _weight_loss(p, data):
    """L in the weights (a, W) on X: data = (X, y) (`_gd`'s loss)."""
    return input_loss(p, *data)


def _weight_field(p, data):
    """The flow's field over tau in the weights: the plain gradient (a step costs O(m n d),
    not the data basis's O(m n^2))."""
    return jax.grad(_weight_loss)(p, data)


@eqx.filter_jit
def stepped_fields(model, X, y, ts, tau, gram_tol, tolerances, save_trajectory) -> dict:
    """`two_layer_flow(method="steps")`: Euler levels, extrapolated (`integrators._stepped`),
    in the data basis (a, Z = W X^T) with the Gram coupling where n <= d, in the weights
    (a, W) on X where d < n (the same flow: W moves only in X's row space); the fields of
    its `TwoLayerFlowSolution`."""
    rtol, atol, max_steps = tolerances
    dtype = X.dtype
    G = _gram(X, gram_tol)
    weights = X.shape[1] < X.shape[0]
    if weights:
        start, value, field, data = (model.a, model.W), _weight_loss, _weight_field, (X, y)
    else:
        Z0 = model.W @ X.T
        start, value, field, data = (model.a, Z0), _basis_loss, _basis_field, (G, y)
    trajectory, result, stats = stepped_solve(
        start, value, field, data, ts, tau,
        jnp.asarray(rtol, dtype), jnp.asarray(atol, dtype), StepOptions(30, max_steps),
    )  # fmt: skip
    loss = jax.vmap(lambda p: value(p, data))(trajectory)
    a, Z = trajectory
    if weights:  # the nets are the trajectory itself; Z = W X^T for the scales and pattern
        net, Z = TwoLayerReLU, Z @ X.T
        params = trajectory
    else:
        X_pinv = jnp.linalg.pinv(X)

        def net(a, Z):
            return TwoLayerReLU(a, model.W + (Z - Z0) @ X_pinv.T)

        params = (a, Z)
    final = net(*(x[-1] for x in params))
    nets = jax.vmap(net)(*params) if save_trajectory else None
    result = name_nonfinite(result, (a[-1], Z[-1]), loss)
    return dict(
        ts=ts, loss=loss,
        log_scale=0.5 * jnp.log(a * a + jnp.sum(Z * Z, axis=-1)),
        model=final, trajectory=nets,
        pattern=(Z[-1] > 0).astype(jnp.int32), time_scale=tau, gram=G, result=result,
        stats=stats,
    )  # fmt: skip
