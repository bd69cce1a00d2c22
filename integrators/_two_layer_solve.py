"""The segment loop of `two_layer_flow` (its module docstring says what it computes): each
iteration classifies the kink event that ended the previous segment, then solves to the next
event with the pattern held."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from theory import RESULTS, name_nonfinite
from theory.numerics import default_controller, diffeqsolve

from ._illinois import _TimeIllinois
from ._sliding_factor import ACTIVE, INACTIVE, SLIDING, _no_sliding
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


@eqx.filter_jit
def _solve(model, X, y, ts, tau, limits, solver, options) -> dict:
    """The flow itself, compiled once per shape and option set (the checks are done): the
    fields of its `TwoLayerFlowSolution`."""
    rtol, atol, max_steps, save_trajectory = options
    max_kink_events, gram_tol = limits
    n = X.shape[0]
    dtype = X.dtype
    m = model.width
    G = X @ X.T
    eye = jnp.eye(n, dtype=dtype)
    # orthonormal to rounding: exactly the orthonormal flow (relative to the Gram's scale)
    G = jnp.where(jnp.max(jnp.abs(G - eye)) <= gram_tol, eye, G)
    X_pinv = jnp.linalg.pinv(X)
    state0, mode0, Z0 = _initial(model, X)
    t_end = ts[-1]
    T = ts.shape[0]

    def save(t, state, frame):
        kappa, psi = state
        r = _residual(kappa, psi, frame)[1]
        return 0.5 * jnp.mean(r * r), kappa, psi

    slow = jnp.asarray(max(atol, 1e-10), dtype)

    window = min(T, _SAVE_WINDOW)

    least_dt = _FIRST_STEP * (t_end - ts[0])  # the first step, and the least first step
    controller = default_controller(rtol, atol)
    term = diffrax.ODETerm(_vector_field)

    def segment(t0, state, mode, factor, ts_win, dt0):
        """Solve from t0 to the next kink event or to the last of the save times `ts_win`
        (the `window` from the first unsaved one, or the last `window`), from a first step
        dt0."""
        # the pattern holds until the next event: the sliding systems' inverses are the
        # classification's (`_classify`), applied at every evaluation
        frame = _Frame(G, y, tau, mode, slow, factor)
        r0 = _residual(*state, frame)[1]
        d0 = _distance(state, _Frame(G, y, tau, mode, slow, factor, r0))
        # the event condition measures each entry in units of its distance here
        frame = _Frame(G, y, tau, mode, slow, factor, r0, d0)
        # an entry already past its kink (a sliding weight that rounding put a hair outside
        # [0, 1] when the pattern was set): its crossing would never be seen, so the segment
        # ends where it starts, with an event there
        past = jnp.min(d0) < 0
        t1 = jnp.where(past, t0, ts_win[-1])
        sol = diffeqsolve(
            term,
            solver,
            t0=t0,
            t1=t1,
            dt0=dt0,
            y0=state,
            args=frame,
            saveat=diffrax.SaveAt(
                subs=[
                    diffrax.SubSaveAt(ts=jnp.clip(ts_win, t0, t1), fn=save),
                    diffrax.SubSaveAt(t1=True),
                ]
            ),
            stepsize_controller=controller,
            event=diffrax.Event(
                _event_condition, root_finder=_TimeIllinois(rtol=1e-13, atol=1e-13)
            ),
            max_steps=max_steps,
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

    def new_pattern(state, frame, initial, pending):
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
        vel = -tau * g_z  # `_velocity`
        towards = ((mode == ACTIVE) & (vel < 0)) | ((mode == INACTIVE) & (vel > 0))
        near = (dist <= _KINK_TOL * rtol) & (towards | (mode == SLIDING))
        candidates = jnp.where(initial, state[1][:, 1:] == 0, first | near | (dist < 0))
        candidates &= pending
        state, mode, entered, factor = _classify(state, frame, candidates)
        return state, mode, entered.astype(jnp.int32), factor

    blank = (
        jnp.full((T,), jnp.inf, dtype),
        jnp.full((T, m), jnp.inf, dtype),
        jnp.full((T, m, n + 1), jnp.inf, dtype),
    )
    zero = jnp.zeros((), jnp.int32)
    # each iteration classifies the event that ended the previous segment (`pending`; at
    # t = 0 the kinks of the init), then solves to the next event: one classification in
    # the program (it is most of what two_layer_flow compiles)
    carry0 = dict(
        t=ts[0], state=state0, mode=mode0, factor=_no_sliding(G, m),
        pending=jnp.asarray(True), initial=jnp.asarray(True), saved=blank,
        filled=jnp.zeros((T,), bool), result=RESULTS.successful, events=zero, entries=zero,
        steps=zero, accepted=zero, rejected=zero, done=jnp.asarray(False),
        dt=least_dt,
    )  # fmt: skip

    def cond(c):
        return ~c["done"]

    def body(c):
        state, mode, entered, factor = new_pattern(
            c["state"], _Frame(G, y, tau, c["mode"], slow, c["factor"]), c["initial"], c["pending"]
        )
        start = jnp.minimum(jnp.sum(c["filled"]), T - window)  # saved times are a prefix
        ts_win = jax.lax.dynamic_slice_in_dim(ts, start, window)
        t1, final, stopped, saved, result, stats, frame = segment(
            c["t"], state, mode, factor, ts_win, c["dt"]
        )
        filled_win = jax.lax.dynamic_slice_in_dim(c["filled"], start, window)
        take = (ts_win >= c["t"]) & (ts_win <= t1) & ~filled_win

        def merge(new, old):
            old_win = jax.lax.dynamic_slice_in_dim(old, start, window)
            new_win = jnp.where(take.reshape((window,) + (1,) * (new.ndim - 1)), new, old_win)
            return jax.lax.dynamic_update_slice_in_dim(old, new_win, start, axis=0)

        merged = jax.tree_util.tree_map(merge, saved, c["saved"])
        ok = result == RESULTS.successful
        # an event beyond the budget is not processed: the solve stops at it
        limited = stopped & ok & (c["events"] >= max_kink_events)
        keep = stopped & ok & ~limited
        events = c["events"] + keep.astype(jnp.int32)
        result = RESULTS.where(limited, RESULTS.kink_limited, result)
        return dict(
            t=t1,
            state=final,
            mode=mode,
            factor=frame.factor,
            pending=keep,
            initial=jnp.asarray(False),
            saved=merged,
            filled=jax.lax.dynamic_update_slice_in_dim(c["filled"], filled_win | take, start, 0),
            result=result,
            events=events,
            entries=c["entries"] + entered,
            steps=c["steps"] + stats["num_steps"],
            accepted=c["accepted"] + stats["num_accepted_steps"],
            # the next segment starts with this one's mean step: kink events come at about
            # that spacing (a first step far longer brackets many crossings, which the root
            # finder then bisects down one by one)
            dt=jnp.where(
                t1 > c["t"],
                jnp.maximum(
                    (t1 - c["t"]) / jnp.maximum(stats["num_accepted_steps"], 1),
                    least_dt,
                ),
                c["dt"],
            ),
            rejected=c["rejected"] + stats["num_rejected_steps"],
            # a segment that reached its window's end without an event goes on from there
            done=~ok | limited | (t1 >= t_end),
        )

    c = jax.lax.while_loop(cond, body, carry0)
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
        gram=G,
        result=c["result"],
        stats={
            "num_steps": c["steps"],
            "num_accepted_steps": c["accepted"],
            "num_rejected_steps": c["rejected"],
            "num_kink_events": c["events"],
            "num_sliding_entries": c["entries"],
        },
    )
