"""The field of `two_layer_flow` in its log-scale coordinates: the residual, the Filippov
sliding weights on a kink, the velocity, and the classification of kink events."""

import functools

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from dynamics import TwoLayerReLU
from theory import rescaled
from theory.numerics import lu_solve

INACTIVE, ACTIVE, SLIDING = 0, 1, 2
_KINK_TOL = 1e-9  # pre-activations (in units of the neuron's size) treated as on the kink
_NUDGE = 1e-13  # where a classified entry restarts, on its side of the kink
_RELEASE_ROUNDS = 6  # consistency and release rounds after a kink event
_COMPACT = (4, 16)  # sizes of the small systems the sliding sets are gathered into


class _Frame(eqx.Module):
    G: Float[Array, "n n"]
    y: Float[Array, " n"]
    tau: Float[Array, ""]
    mode: Int[Array, "m n"]
    slow: Float[Array, ""]  # below this speed an entry restarts further off the kink


def _residual(kappa, psi, frame):
    act = jnp.where(frame.mode == ACTIVE, psi[:, 1:], 0.0)
    return act, rescaled.residual(kappa, psi[:, 0], act, frame.y)


# per neuron, in plain XLA operations: jaxlib's batched LAPACK deadlocks a sweep on XLA:CPU
# with several host devices once the systems are large (`theory.numerics.lu_solve`)
_solve = jax.vmap(lu_solve)


def _weights_solve(M, b):
    """sigma from M sigma = b per neuron (batched), by least squares of a slightly regularized
    system where M is singular (duplicated inputs sliding together: the weights are not
    unique)."""
    sigma = _solve(M, b)

    def least_squares():
        eye = jnp.eye(M.shape[-1], dtype=M.dtype)
        MtM = jnp.einsum("jki,jkl->jil", M, M)
        ridge = 1e-14 * jnp.max(jnp.abs(MtM), axis=(1, 2), keepdims=True) * eye[None]
        rhs = jnp.einsum("jki,jk->ji", M, b)
        return _solve(MtM + ridge, rhs)

    good = jnp.all(jnp.isfinite(sigma), axis=1, keepdims=True)
    # the branch is taken by the whole batch under vmap (else both sides run, every time)
    return jax.lax.cond(
        eqxi.unvmap_all(jnp.all(good)),
        lambda: sigma,
        lambda: jnp.where(good, sigma, least_squares()),
    )


def _sliding_weights(r, frame):
    """sigma (m, n) on the sliding entries: (G (r * s_j))_S = 0 for each neuron's set S.

    Each neuron's system is as large as its sliding set, rarely more than a few entries: the
    sets are gathered into the smallest of 1 x 1 (solved by a division), 4 x 4 and 16 x 16
    systems that holds the largest (the full n x n ones beyond), since this solve runs at
    every field evaluation, and neurons typically slide on a few samples at once while the
    full n x n systems would cost O(n^3) each time."""
    S = frame.mode == SLIDING
    n = r.shape[0]

    def full(b_full):
        eye = jnp.eye(n, dtype=r.dtype)
        both = S[:, :, None] & S[:, None, :]
        M = jnp.where(both, frame.G[None] * r[None, None, :], eye[None])
        return _weights_solve(M, jnp.where(S, b_full, 0.0))

    def single(b_full):
        # one sliding entry per neuron: (G (r * s_j))_i = 0 gives sigma directly
        den = jnp.diag(frame.G)[None, :] * r[None, :]
        return jnp.where(S, b_full / jnp.where(S, den, 1.0), 0.0)

    def compact(b_full, k):
        _, idx = jax.lax.top_k(jnp.where(S, n - jnp.arange(n), 0), k)  # sliding ones first
        valid = jnp.take_along_axis(S, idx, axis=1)
        both = valid[:, :, None] & valid[:, None, :]
        eye = jnp.eye(k, dtype=r.dtype)
        M = jnp.where(both, frame.G[idx[:, :, None], idx[:, None, :]] * r[idx][:, None, :], eye)
        b = jnp.where(valid, jnp.take_along_axis(b_full, idx, axis=1), 0.0)
        small = jnp.where(valid, _weights_solve(M, b), 0.0)
        rows = jnp.arange(S.shape[0])[:, None]
        return jnp.zeros(S.shape, r.dtype).at[rows, idx].add(small)

    def solve():
        # b_i = -(G (r * s_j))_i over the active entries, for i in S
        b_full = -(jnp.where(frame.mode == ACTIVE, r[None, :], 0.0) @ frame.G)
        most = jnp.max(jnp.sum(S, axis=1))
        sizes = [k for k in _COMPACT if k < n]
        branches = [single] + [functools.partial(compact, k=k) for k in sizes] + [full]
        # under vmap the batch takes the largest size any member needs (any size that holds
        # the sets gives the same weights): a batched index would run every branch
        branch = eqxi.unvmap_max(jnp.searchsorted(jnp.asarray([1] + sizes), most))
        sigma = jax.lax.switch(branch, branches, b_full)
        # still not finite (a sliding sample fitted exactly, r_i = 0): release the entry
        return jnp.where(S, jnp.where(jnp.isfinite(sigma), sigma, -1.0), 0.0)

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
    g_a, g_z = rescaled.gradients(psi[:, 0], act, s, r, frame.G)
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
        gram=frame.G,
        r=r,
    )
    return dkappa, jnp.concatenate([dpa[:, None], dpz], axis=1)


def _distance(state, frame):
    """How far each entry is from changing its pattern (> 0 inside): z for active entries,
    -z for inactive ones, min(sigma, 1 - sigma) for sliding ones."""
    kappa, psi = state
    sigma = _sliding_weights(_residual(kappa, psi, frame)[1], frame)
    return _distance_of(frame.mode, psi[:, 1:], sigma)


def _distance_of(mode, pz, sigma):
    return jnp.where(
        mode == ACTIVE, pz, jnp.where(mode == INACTIVE, -pz, jnp.minimum(sigma, 1.0 - sigma))
    )


def _event_condition(t, y, args, **kwargs):
    return jnp.min(_distance(y, args))


def _classify(state, frame, candidates):
    """New pattern and state after a kink event.

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
    n = frame.y.shape[0]
    psi = psi.at[:, 1:].set(jnp.where(candidates, 0.0, psi[:, 1:]))
    mode = jnp.where(candidates & (frame.mode == SLIDING), INACTIVE, frame.mode)

    def with_mode(mode):
        return eqx.tree_at(lambda f: f.mode, frame, mode)

    pa, _, r, sigma, _, _ = _field_parts(kappa, psi, with_mode(mode))
    s = jnp.where(mode == ACTIVE, 1.0, jnp.where(mode == SLIDING, sigma, 0.0))
    s_minus = jnp.where(candidates, 0.0, s)  # each candidate counted inactive ...
    d_minus = -pa[:, None] * ((s_minus * r[None, :]) @ frame.G) / n
    d_plus = d_minus - pa[:, None] * (jnp.diag(frame.G) * r)[None, :] / n  # ... and active
    new = jnp.where(
        (d_minus > 0) & (d_plus > 0),
        ACTIVE,
        jnp.where((d_minus > 0) & (d_plus <= 0), SLIDING, INACTIVE),
    )
    was_sliding = frame.mode == SLIDING
    mode = jnp.where(candidates, new, mode)

    def round_(carry):
        mode, released, _, k = carry
        vel = _velocity(kappa, psi, with_mode(mode))
        wrong = candidates & (((mode == ACTIVE) & (vel < 0)) | ((mode == INACTIVE) & (vel > 0)))
        new = jnp.where(wrong, SLIDING, mode)
        here = with_mode(new)
        sigma = _sliding_weights(_residual(kappa, psi, here)[1], here)
        violation = jnp.where(new == SLIDING, jnp.maximum(sigma - 1.0, -sigma), -jnp.inf)
        worst = jnp.arange(n)[None, :] == jnp.argmax(violation, axis=1)[:, None]
        out = worst & (violation > 0)
        up = out & (sigma > 1.0)
        down = out & (sigma < 0.0)
        new = jnp.where(up, ACTIVE, jnp.where(down, INACTIVE, new))
        return new, released | up | down, jnp.any(new != mode), k + 1

    # until the pattern stops changing (one round for a lone entry), at most _RELEASE_ROUNDS
    mode, released, _, _ = jax.lax.while_loop(
        lambda c: c[2] & (c[3] < _RELEASE_ROUNDS),
        round_,
        (mode, jnp.zeros_like(candidates), jnp.asarray(True), 0),
    )
    entered = candidates & (mode == SLIDING) & ~was_sliding
    moved = candidates | released
    speed = frame.tau * jnp.maximum(jnp.abs(d_minus), jnp.abs(d_plus))
    gap = jnp.where(speed < frame.slow, frame.slow, _NUDGE)
    side = jnp.where(mode == ACTIVE, gap, jnp.where(mode == INACTIVE, -gap, 0.0))
    psi = psi.at[:, 1:].set(jnp.where(moved, side, psi[:, 1:]))
    return (kappa, psi), mode, jnp.sum(entered)


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
