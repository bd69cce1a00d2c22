"""The field of `two_layer_flow` in its log-scale coordinates: the residual, the Filippov
sliding weights on a kink, the velocity, and the classification of kink events."""

import dataclasses
import functools
from typing import NamedTuple

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from dynamics import TwoLayerReLU
from theory import rescaled
from theory.numerics import lu_solve

from ._nonsmooth import (
    ACTIVE,
    INACTIVE,
    SLIDING,
    box_gap,
    box_violation,
    finite_or,
    kink_gap,
    toward_kink,
)
from ._sliding_factor import (
    _apply,
    _branch,
    _gathered,
    _masked,
    _refactor,
    _sizes,
    _SlidingFactor,
)

# at an event, entries this close to their kink (times rtol, in units of the neuron's size)
# that move towards it are classified with it; each crosses early by its distance over its
# speed (`two_layer_flow`'s docstring: fixed at 1e-9, the flow's clock ran 5e-6 ahead)
_KINK_TOL = 1e-4
_NUDGE = 1e-13  # where a classified entry restarts, on its side of the kink
_RELEASE_ROUNDS = 6  # consistency and release rounds after a kink event


class _Frame(eqx.Module):
    G: Float[Array, "n n"]
    y: Float[Array, " n"]
    tau: Float[Array, ""]
    mode: Int[Array, "m n"]
    slow: Float[Array, ""]  # below this speed an entry restarts further off the kink
    factor: _SlidingFactor | None = None  # `_sliding_factor(G, mode)`, or solve each time
    # the residual where the segment started (`_distance`); None where no segment is solved
    r0: Float[Array, " n"] | None = None
    # each entry's distance where the segment started (`_event_condition`); None: unscaled
    d0: Float[Array, "m n"] | None = None
    # a factor F (n, k) with G = F F^T where k < n / 2 (X itself: `_two_layer_solve._setup`):
    # products with G then cost 2 m n k instead of m n^2; None: the products use G itself
    F: Float[Array, "n k"] | None = None


def _times_gram(v, frame):
    """v @ G for v (m, n), through the frame's factor where it has one."""
    if frame.F is None:
        return v @ frame.G
    return (v @ frame.F) @ frame.F.T


def _residual(kappa, psi, frame):
    act = jnp.where(frame.mode == ACTIVE, psi[:, 1:], 0.0)
    return act, rescaled.residual(kappa, psi[:, 0], act, frame.y)


# per neuron, in plain XLA operations: jaxlib's batched LAPACK deadlocks a sweep on XLA:CPU
# with several host devices once the systems are large (`theory.numerics.lu_solve`)
_solve = jax.vmap(lu_solve)
_solve_looped = jax.vmap(functools.partial(lu_solve, unroll=False))  # less to compile


def _least_squares(M, b, solve):
    """sigma minimizing |M sigma - b| per neuron, with a ridge of 1e-14 of M^T M's scale: for
    a singular M (duplicated inputs sliding together: the weights are not unique)."""
    eye = jnp.eye(M.shape[-1], dtype=M.dtype)
    MtM = jnp.einsum("jki,jkl->jil", M, M)
    ridge = 1e-14 * jnp.max(jnp.abs(MtM), axis=(1, 2), keepdims=True) * eye[None]
    return solve(MtM + ridge, jnp.einsum("jki,jk->ji", M, b))


def _weights_solve(M, b, unroll=True):
    """sigma from M sigma = b per neuron (batched), by `_least_squares` where M is
    singular."""
    solve = _solve if unroll else _solve_looped
    sigma = solve(M, b)
    good = jnp.all(jnp.isfinite(sigma), axis=1, keepdims=True)
    # the branch is taken by the whole batch under vmap (else both sides run, every time)
    return jax.lax.cond(
        eqxi.unvmap_all(jnp.all(good)),
        lambda: sigma,
        lambda: jnp.where(good, sigma, _least_squares(M, b, solve)),
    )


def _sliding_weights(r, frame):
    """sigma (m, n) on the sliding entries: (G (r * s_j))_S = 0 for each neuron's set S.

    Each neuron's system is as large as its sliding set, often a few entries, at times a third
    of the samples: the sets are gathered into the smallest of 1 x 1 (solved by a division), 4
    x 4, 16 x 16, 32 x 32, ... systems that holds the largest (`_sizes`; else the full n x n).
    With the frame's `_SlidingFactor` (the flow's segments and kink events) the inverses are
    formed (or updated) once per pattern and applied here; without it (or where they give non-
    finite weights: a singular G_SS, a sliding sample fitted exactly) each evaluation solves
    its systems.
    """
    S = frame.mode == SLIDING
    n = r.shape[0]
    # with a factor the direct solves are a rare fallback, traced at every evaluation: looped
    unroll = frame.factor is None

    def full_system(b_full):
        M = _masked(jnp.broadcast_to(frame.G * r[None, :], S.shape + (n,)), S)
        return M, jnp.where(S, b_full, 0.0)

    def full(b_full):
        return _weights_solve(*full_system(b_full), unroll)

    def rescue(b_full):
        # where the inverses gave non-finite weights, so would the solve: least squares
        return _least_squares(*full_system(b_full), _solve_looped)

    def single(b_full):
        # one sliding entry per neuron: (G (r * s_j))_i = 0 gives sigma directly
        den = jnp.diag(frame.G)[None, :] * r[None, :]
        return jnp.where(S, b_full / jnp.where(S, den, 1.0), 0.0)

    def on_gathered(b_full, idx, valid, weights):
        """weights(b) (m, k) on the gathered entries, scattered back to (m, n)."""
        b = jnp.where(valid, jnp.take_along_axis(b_full, idx, axis=1), 0.0)
        small = jnp.where(valid, weights(b), 0.0)
        rows = jnp.arange(S.shape[0])[:, None]
        return jnp.zeros(S.shape, r.dtype).at[rows, idx].add(small)

    def compact(b_full, k):
        idx, valid = _gathered(S, k)
        M = _masked(frame.G[idx[:, :, None], idx[:, None, :]] * r[idx][:, None, :], valid)
        return on_gathered(b_full, idx, valid, lambda b: _weights_solve(M, b, unroll))

    def applied(b_full, i):
        f = frame.factor
        if i < len(f.idx):  # a compact size: u = G_SS^{-1} b on the gathered entries
            idx = f.idx[i]
            valid = jnp.take_along_axis(S, idx, axis=1)
            return on_gathered(
                b_full,
                idx,
                valid,
                lambda b: _apply(f.inv[i], b) / jnp.where(valid, r[idx], 1.0),
            )
        u = _apply(f.inv[i], jnp.where(S, b_full, 0.0))
        return jnp.where(S, u / jnp.where(S, r[None, :], 1.0), 0.0)

    def solve():
        # b_i = -(G (r * s_j))_i over the active entries, for i in S
        b_full = -_times_gram(jnp.where(frame.mode == ACTIVE, r[None, :], 0.0), frame)
        sizes = _sizes(n)
        branches = [single] + [functools.partial(compact, k=k) for k in sizes] + [full]
        branch = _branch(S)
        if frame.factor is None:
            sigma = jax.lax.switch(branch, branches, b_full)
        else:
            fast = [single] + [
                functools.partial(applied, i=i) for i in range(len(frame.factor.inv))
            ]
            fast += [full] * (len(branches) - len(fast))  # no n x n slot (n > _FULL)
            sigma = jax.lax.switch(branch, fast, b_full)
            # the fallback: least squares of the n x n systems (one branch to compile, not one
            # per size), for the neurons whose weights are not finite (the others keep theirs,
            # to the bit)
            good = jnp.all(jnp.isfinite(sigma), axis=1, keepdims=True)
            sigma = jax.lax.cond(
                eqxi.unvmap_all(jnp.all(good)),
                lambda: sigma,
                # (branch 0 is `single` itself: its non-finite weights stay as they are)
                lambda: jnp.where(
                    good, sigma, jax.lax.cond(branch == 0, lambda b: sigma, rescue, b_full)
                ),
            )
        # still not finite (a sliding sample fitted exactly, r_i = 0): release the entry
        return jnp.where(S, finite_or(sigma, -1.0), 0.0)

    return jax.lax.cond(
        eqxi.unvmap_any(jnp.any(S)), solve, lambda: jnp.zeros_like(r, shape=S.shape)
    )


def _slopes(r, frame):
    """The activation slopes s_ji (1 active, 0 inactive, the Filippov weight sigma_ji on the
    kink) and sigma itself."""
    sigma = _sliding_weights(r, frame)
    s = jnp.where(frame.mode == ACTIVE, 1.0, jnp.where(frame.mode == SLIDING, sigma, 0.0))
    return s, sigma


def _field_parts(kappa, psi, frame):
    act, r = _residual(kappa, psi, frame)
    s, sigma = _slopes(r, frame)
    g_a, g_z = rescaled.gradients(psi[:, 0], act, s, r, functools.partial(_times_gram, frame=frame))
    return psi[:, 0], psi[:, 1:], r, sigma, g_a, g_z


def _velocity(kappa, psi, frame):
    """dz/dt of every entry in units of its neuron's size (psi), on the kink (z = 0)."""
    return -frame.tau * _field_parts(kappa, psi, frame)[5]


def _vector_field(t, state, frame):
    """The shared rescaled field (`theory._rescaled`, gauge "norm") with the Gram coupling:
    every entry moves but the sliding ones, held on the kink."""
    kappa, psi = state
    act, r = _residual(kappa, psi, frame)
    s, _ = _slopes(r, frame)
    dkappa, dpa, dpz = rescaled.field(
        kappa,
        psi[:, 0],
        psi[:, 1:],
        frame.y,
        frame.tau,
        act=act,
        slope=s,
        moving=frame.mode != SLIDING,
        gram=functools.partial(_times_gram, frame=frame),
        r=r,
    )
    return dkappa, jnp.concatenate([dpa[:, None], dpz], axis=1)


def _distance(state, frame):
    """How far each entry is from changing its pattern (> 0 inside): z for active entries,
    -z for inactive ones, min(sigma, 1 - sigma) for sliding ones.

    In a segment (`frame.r0`, the residual at its start), a sliding entry's distance is
    min(sigma q, (1 - sigma) q) with q_i = r_i / r0_i: the same at the start, and with no pole.
    sigma = u / r (u = G_SS^{-1} b smooth) has a pole where a sliding sample's residual r_i
    crosses 0; the weight leaves [0, 1] before it (through 1, say) and can come back after it
    (through 0) within one step, so min(sigma, 1 - sigma) is positive at both ends of a step
    that straddles the exit, which then goes unseen (found: a held entry on Gaussian inputs,
    the loss 2e-3 off at rtol 1e-8, right at 1e-12). sigma q = u / r0 is smooth, and once r_i
    has changed sign (q < 0) the distance stays negative."""
    kappa, psi = state
    r = _residual(kappa, psi, frame)[1]
    sigma = _sliding_weights(r, frame)
    dist = _distance_of(frame.mode, psi[:, 1:], sigma)
    if frame.r0 is None:
        return dist
    q = jnp.where(frame.r0 != 0, r / jnp.where(frame.r0 != 0, frame.r0, 1.0), 1.0)[None, :]
    return jnp.where(frame.mode == SLIDING, jnp.minimum(sigma * q, (1.0 - sigma) * q), dist)


def _distance_of(mode, pz, sigma):
    return jnp.where(mode == SLIDING, box_gap(sigma), kink_gap(mode == ACTIVE, pz))


def _event_condition(t, y, args, **kwargs):
    """The nearest entry's distance from its kink, each entry's in units of its distance at
    the segment's start (`frame.d0`, where positive): the same sign entry by entry, so the
    same first crossing, but not flat. Unscaled, inactive entries that hardly move at 1e-12
    to 1e-9 below their kinks (near a fitted interpolator) and entries just restarted 1e-13
    off theirs held the minimum near 0 over most of a step, the crossing entry's fall
    showing only in its last 1e-12: regula falsi stalled and the locator bisected (at
    n = 64, c = 1e-6 a third of the events took 30 to 60 evaluations of the condition)."""
    d = _distance(y, args)
    if args.d0 is not None:
        d = d / jnp.where(args.d0 > 0, args.d0, 1.0)
    return jnp.min(d)


def _phase(k):
    return jnp.asarray(k, jnp.int32)


class _Event(NamedTuple):
    """The kink event `_classify` works on: the state with the candidates put on the kink."""

    kappa: jax.Array
    psi: jax.Array
    candidates: jax.Array
    frame: _Frame  # the segment's that ended at the event


def _classified(e: _Event, now, c):
    """Phase 0: the candidates classified by their one-sided velocities."""
    n, G = e.frame.y.shape[0], e.frame.G
    pa, _, r, sigma, _, _ = _field_parts(e.kappa, e.psi, now)
    s = jnp.where(now.mode == ACTIVE, 1.0, jnp.where(now.mode == SLIDING, sigma, 0.0))
    s_minus = jnp.where(e.candidates, 0.0, s)  # each candidate counted inactive ...
    d_minus = -pa[:, None] * _times_gram(s_minus * r[None, :], e.frame) / n
    d_plus = d_minus - pa[:, None] * (jnp.diag(G) * r)[None, :] / n  # ... and active
    new = jnp.where(
        (d_minus > 0) & (d_plus > 0),
        ACTIVE,
        jnp.where((d_minus > 0) & (d_plus <= 0), SLIDING, INACTIVE),
    )
    pending = jnp.where(e.candidates, new, now.mode)
    return dict(c, pending=pending, phase=_phase(1), d=(d_minus, d_plus))


def _consistent(e: _Event, now, c):
    """Phase 1: a candidate set active that the joint pattern moves down, or inactive that it
    moves up, goes onto the kink. `live`: this member goes on; the phase is the batch's
    (under vmap a batched index would run every phase at every iteration), a finished
    member's rounds change nothing."""
    live = c["changing"] & (c["rounds"] < _RELEASE_ROUNDS)
    go = eqxi.unvmap_any(live)
    mode = now.mode

    def wrong():
        vel = _velocity(e.kappa, e.psi, now)
        return e.candidates & (mode != SLIDING) & toward_kink(mode == ACTIVE, vel)

    wrong = jax.lax.cond(go, wrong, lambda: jnp.zeros_like(e.candidates))
    return dict(
        c, pending=jnp.where(live & wrong, SLIDING, mode), phase=_phase(jnp.where(go, 2, 3)),
        before=mode, live=live,
    )  # fmt: skip


def _release(e: _Event, now, c):
    """Phase 2: the worst sliding weight outside [0, 1] per neuron released."""
    n = e.frame.y.shape[0]
    new = now.mode
    sigma = _sliding_weights(_residual(e.kappa, e.psi, now)[1], now)
    violation = jnp.where(new == SLIDING, box_violation(sigma), -jnp.inf)
    worst = jnp.arange(n)[None, :] == jnp.argmax(violation, axis=1)[:, None]
    out = worst & (violation > 0) & c["live"]
    up = out & (sigma > 1.0)
    down = out & (sigma < 0.0)
    new = jnp.where(up, ACTIVE, jnp.where(down, INACTIVE, new))
    return dict(
        c, pending=new, phase=_phase(1), released=c["released"] | up | down,
        changing=c["live"] & jnp.any(new != c["before"]), rounds=c["rounds"] + c["live"],
    )  # fmt: skip


def _classify(state, frame, candidates):
    """New pattern and state after a kink event, and the pattern's `_SlidingFactor`.

    `candidates` (m, n) are put on the kink (z = 0) and classified by their one-sided
    velocities d_- and d_+ (the others held as they are). Candidates of one neuron interact
    through G, so the pattern is then made consistent: a candidate set active that the joint
    pattern moves down, or inactive that it moves up, goes onto the kink (sliding); and a
    sliding entry whose weight left [0, 1] is released, one per neuron per round (the worst
    first: the others' weights change once it is gone), strictly outside only (a weight
    just inside stays until it crosses; releasing it early lets it fall straight back, a Zeno
    loop of events). Classified entries restart a hair off the kink on their side, further
    off (by `slow`) where they move slower than `slow` (near a fitted interpolator, where
    the residual is ~1e-9 and a hair's breadth would be recrossed at once: a Zeno loop)."""
    kappa, psi = state
    psi = psi.at[:, 1:].set(jnp.where(candidates, 0.0, psi[:, 1:]))
    mode = jnp.where(candidates & (frame.mode == SLIDING), INACTIVE, frame.mode)

    def with_mode(mode, base):
        # the weights as the flow's segments evaluate them (`_SlidingFactor`): a weight that
        # the classification keeps inside [0, 1] by rounding should not start the next
        # segment outside it, past its event (what is left, rounding, the segment's guard
        # catches: `two_layer_flow`'s module docstring)
        return dataclasses.replace(frame, mode=mode, factor=_refactor(base, mode), r0=None, d0=None)

    was_sliding = frame.mode == SLIDING

    # One loop, one refactorization per iteration (each `with_mode` in the program is a
    # `_sliding_factor` that XLA compiles, most of what two_layer_flow compiles): the pattern
    # `pending` is factored, then the phase says what to do with it. 0: the candidates
    # classified by their one-sided velocities; then rounds of 1 (a candidate set active that
    # the joint pattern moves down, or inactive that it moves up, goes onto the kink) and 2
    # (the worst sliding weight outside [0, 1] per neuron released), until a round changes
    # nothing or `_RELEASE_ROUNDS` (3: done).
    e = _Event(kappa, psi, candidates, frame)
    phases = [functools.partial(f, e) for f in (_classified, _consistent, _release)]

    def step(carry):
        prev, c = carry
        now = with_mode(c["pending"], prev)
        c = jax.lax.switch(c["phase"], phases, now, dict(c, pending=now.mode))
        return now, c

    zeros = jnp.zeros(mode.shape, frame.G.dtype)
    c0 = dict(
        pending=mode, phase=_phase(0), before=mode, changing=jnp.any(candidates),
        live=jnp.asarray(True), released=jnp.zeros_like(candidates), rounds=_phase(0),
        d=(zeros, zeros),
    )  # fmt: skip
    # (the frame as `with_mode` builds them: no segment's r0 and d0)
    first = dataclasses.replace(frame, r0=None, d0=None)
    now, c = jax.lax.while_loop(lambda carry: carry[1]["phase"] != 3, step, (first, c0))
    released = c["released"]
    d_minus, d_plus = c["d"]
    mode = now.mode
    entered = candidates & (mode == SLIDING) & ~was_sliding
    moved = candidates | released
    speed = frame.tau * jnp.maximum(jnp.abs(d_minus), jnp.abs(d_plus))
    gap = jnp.where(speed < frame.slow, frame.slow, _NUDGE)
    side = jnp.where(mode == SLIDING, 0.0, kink_gap(mode == ACTIVE, gap))
    psi = psi.at[:, 1:].set(jnp.where(moved, side, psi[:, 1:]))
    return (kappa, psi), mode, jnp.sum(entered), now.factor


def _initial(model: TwoLayerReLU, X):
    Z = model.W @ X.T
    theta = jnp.concatenate([model.a[:, None], Z], axis=1)
    kappa, psi = rescaled.log_polar(theta, theta)
    mode = jnp.where(Z > 0, ACTIVE, INACTIVE)
    return (kappa, psi), mode, Z


def _to_model(kappa, psi, model0: TwoLayerReLU, Z0, X_pinv):
    size = jnp.exp(kappa)[:, None]
    Z = size * psi[:, 1:]
    return TwoLayerReLU(size[:, 0] * psi[:, 0], model0.W + (Z - Z0) @ X_pinv.T)
