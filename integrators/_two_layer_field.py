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
from theory.numerics import lu_solve, spd_inverse

INACTIVE, ACTIVE, SLIDING = 0, 1, 2
# at an event, entries this close to their kink (times rtol, in units of the neuron's size)
# that move towards it are classified with it; each crosses early by its distance over its
# speed (`two_layer_flow`'s docstring: fixed at 1e-9, the flow's clock ran 5e-6 ahead)
_KINK_TOL = 1e-4
_NUDGE = 1e-13  # where a classified entry restarts, on its side of the kink
_RELEASE_ROUNDS = 6  # consistency and release rounds after a kink event
_COMPACT = (4, 16, 32, 64, 128)  # sizes of the small systems the sliding sets are gathered into
_FULL = 256  # up to this n the factor has an n x n slot
_REFRESH = 64  # rank-one updates of a factor's inverses before they are formed afresh
_UPDATE_FROM = 64  # smaller slots are formed afresh (as fast, and less to compile)


class _SlidingFactor(eqx.Module):
    """The inverses of the sliding systems of one pattern, for every field evaluation until the
    next kink event: neuron j's sliding weights solve (G (r * s_j))_S = 0 on its sliding set
    S, i.e. G_SS u_S = b_S with u = r * sigma and b_i = -(G (r * 1_active))_i, and G_SS does
    not change between events while r does. So G_SS^{-1} is formed where a set changes (gathered
    into a k x k block, k the smallest of `_sizes(n)` and n that holds the largest set) and
    each evaluation costs a matrix-vector product instead of a solve (up to n = `_FULL`;
    beyond, sets larger than the largest compact size are solved at each evaluation). An event
    that changes the sets in a few entries updates the inverses of the neurons it changes by
    rank-one steps (`_neuron_updates`)."""

    idx: tuple  # per compact size k: (m, k) distinct sample indices, the sliding ones among
    # them (first where formed afresh); the n x n slot is indexed by the samples themselves
    inv: tuple  # per size (compact ones, then n if n <= _FULL): (m, k, k) inverses of G_SS
    # (the rows and columns of the other entries set to the identity)
    branch: Int[Array, ""]  # the slot in use (`_branch`)
    updates: Int[Array, " m"]  # each neuron's rank-one updates since its inverse was formed


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


def _sizes(n):
    """The compact sizes below n, and 5n/8 (to a multiple of 16) up to n = `_FULL`: at
    c = 1e-6 each neuron's set grows to about the samples of one label sign (129 of 256 at
    n = 256, seed 0), one past 128, and the n x n slot cost (256 / 160)^2 = 2.6 times as much
    per evaluation (beyond `_FULL` no slot grows with n)."""
    half = -(-5 * n // 128) * 16
    return sorted({k for k in _COMPACT if k < n} | ({half} if half < n <= _FULL else set()))


def _branch(S):
    """0: at most one sliding entry per neuron; then the smallest compact size that holds the
    largest set, then n. Under vmap the batch takes the largest any member needs (any size
    that holds the sets gives the same weights): a batched index would run every branch."""
    most = jnp.max(jnp.sum(S, axis=1))
    return eqxi.unvmap_max(jnp.searchsorted(jnp.asarray([1] + _sizes(S.shape[1])), most))


def _gathered(S, k):
    """(m, k) indices of each neuron's sliding entries (first, in order) and which are."""
    m, n = S.shape
    # the entries in the order sliding ones first, each part by index (what top_k of
    # where(S, n - i, 0) gives, without its sort: on XLA:CPU a sort of the (m, n) pattern
    # cost more than the inverses it indexes at n = 256)
    count = jnp.sum(S, axis=1, keepdims=True)
    before = jnp.cumsum(S, axis=1) - S  # sliding entries before each entry
    place = jnp.where(S, before, count + jnp.arange(n) - before)
    order = (
        jnp.zeros((m, n), jnp.int32)
        .at[jnp.arange(m)[:, None], place]
        .set(jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), (m, n)), unique_indices=True)
    )
    idx = order[:, :k]
    return idx, jnp.take_along_axis(S, idx, axis=1)


def _apply(P, b):
    """P_j b_j for each neuron: (m, k, k) by (m, k), a batched matrix-vector product at full
    precision (HIGHEST: no TF32 on GPUs; on CPU twice as fast as a sum of products)."""
    return jnp.einsum("mij,mj->mi", P, b, precision=jax.lax.Precision.HIGHEST)


def _masked(block, valid):
    """The blocks (m, k, k) on the entries `valid` (m, k), the other rows and columns set to
    the identity: one system per neuron, of fixed size, the same solution on its set."""
    both = valid[:, :, None] & valid[:, None, :]
    return jnp.where(both, block, jnp.eye(block.shape[-1], dtype=block.dtype))


def _checked_inverse(M, inv=None):
    """The inverses of the Gram blocks M (m, k, k) (`spd_inverse`, or `inv` where given),
    NaN where one is not an inverse to 1e-6 on a probe vector: a singular block (a
    duplicated input sliding with its copy) gives finite garbage where elimination without
    pivoting meets a pivot of rounding size, and the NaN sends that neuron's weights to the
    least-squares fallback (`_sliding_weights`)."""
    inv = spd_inverse(M) if inv is None else inv
    probe = jnp.sin(1.0 + jnp.arange(M.shape[-1], dtype=M.dtype))  # no zero sums, no symmetry
    back = _apply(M, _apply(inv, jnp.broadcast_to(probe, M.shape[:-1])))
    bad = jnp.max(jnp.abs(back - probe), axis=1) > 1e-6
    return jnp.where(bad[:, None, None], jnp.nan, inv)


def _rank_one_updates(G, idx, P, s_old, s_new):
    """One neuron's slot (idx (k,), P (k, k)) of the set s_old (n,) carried to s_new one
    entry per step, the removals first: removing the entry at position p (its Schur
    complement)

        P <- P - P[:, p] P[p, :] / P[p, p], then row and column p set to e_p,

    adding sample i at a padding position p (bordering: b = G[idx, i] on the held entries,
    s = G_ii - b^T P b, w = P b - e_p)

        P <- P - e_p e_p^T + w w^T / s.

    Each step is a few passes over the (k, k) inverse where forming it is O(k^3).
    Returns the slot, the steps taken, and whether it is safe to use: every pivot positive
    (s > 1e-12 G_ii: not a duplicated input joining its copy) and the result an inverse on
    `_checked_inverse`'s probe; else the caller forms the inverses afresh (where the probe
    sends a singular block to least squares)."""
    k = idx.shape[0]
    pos = jnp.arange(k)
    samples = jnp.arange(s_new.shape[0])
    diag = jnp.diag(G)

    def step(carry):
        idx, P, cur, steps, safe = carry
        held = cur[idx]  # positions of the current set
        target = s_new[idx]
        drop = held & ~target
        removing = jnp.any(drop)
        add = s_new & ~cur
        adding = jnp.any(add) & ~removing
        i = jnp.argmax(add)  # the sample to add: at its own position if held as padding,
        at = idx == i  # else at a padding position not in s_new
        p = jnp.where(
            removing,
            jnp.argmax(drop),
            jnp.where(jnp.any(at), jnp.argmax(at), jnp.argmax(~target)),
        )
        e = pos == p
        # removal: u v^T = -P[:, p] P[p, :] / P[p, p]
        pivot = P[p, p]
        # addition: w w^T / s
        b = jnp.where(held & ~e, G[i, idx], 0.0)
        Pb = _apply(P[None], b[None])[0]
        s = diag[i] - jnp.sum(b * Pb)
        w = Pb - e
        u = jnp.where(removing, P[:, p], jnp.where(adding, w, 0.0))
        v = jnp.where(
            removing,
            -P[p, :] / jnp.where(removing, pivot, 1.0),
            jnp.where(adding, w / jnp.where(adding, s, 1.0), 0.0),
        )
        on_p = e[:, None] | e[None, :]
        pp = e[:, None] & e[None, :]
        P = jnp.where(
            removing & on_p,
            pp.astype(P.dtype),
            P + u[:, None] * v[None, :] - (adding & pp).astype(P.dtype),
        )
        idx = jnp.where(adding & e, i, idx).astype(idx.dtype)
        cur = (cur & ~(removing & (samples == idx[p]))) | (adding & (samples == i))
        safe &= (~adding | (s > 1e-12 * diag[i])) & (~removing | (pivot > 0))
        return idx, P, cur, steps + 1, safe

    # each step settles one entry: at most k steps (a guard: not reached)
    idx, P, cur, steps, safe = jax.lax.while_loop(
        lambda c: jnp.any(c[2] != s_new) & (c[3] < k),
        step,
        (idx, P, s_old, jnp.asarray(0, jnp.int32), jnp.asarray(True)),
    )
    safe &= jnp.all(cur == s_new)
    # the probe of the inverses formed afresh (`_checked_inverse`): rounding in a nearly
    # dependent entry's pivot passes the test on s
    M = _masked(G[idx[:, None], idx[None, :]][None], s_new[idx][None])
    safe &= jnp.all(jnp.isfinite(_checked_inverse(M, P[None])))
    return idx, P, steps, safe


def _fresh(G, S, k):
    """Slot k's indices (m, k) and inverses (m, k, k) of the sets S (m, n), formed afresh:
    gathered into k x k blocks (k < n), or the n x n Gram masked to each set."""
    m, n = S.shape
    if k < n:
        ix, valid = _gathered(S, k)
        block = G[ix[:, :, None], ix[:, None, :]]
    else:
        ix, valid = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), (m, n)), S
        block = jnp.broadcast_to(G, (m, n, n))
    return ix.astype(jnp.int32), _checked_inverse(_masked(block, valid))


def _neuron_updates(G, idx, P, updates, S_old, S_new, changed):
    """Slot (idx, P) of the sets S_old carried to S_new neuron by neuron, only those
    `changed` (m,) (an event changes one or two of them), each by `_rank_one_updates` on its
    own (k, k) inverse (O(k^2) per entry; on all m blocks at once it cost 30 ms per event at
    n = 256). `updates` (m,) counts each neuron's updates since its inverse was formed.
    Returns the slot, the counts, and whether every neuron's update was safe (else the
    caller forms the slot afresh, as where a set changed in more than k / 4 entries or a
    neuron would pass `_REFRESH` updates: one inverse per slot in the program, which at
    n = 256 compiles for over a minute)."""

    def neuron(carry):
        idx, P, updates, safe, left = carry
        j = jnp.argmax(left)
        ix, Pj, steps, ok = _rank_one_updates(G, idx[j], P[j], S_old[j], S_new[j])
        # (under vmap a member with no neuron left runs the body too: it keeps its slot)
        go = left[j]
        return (
            idx.at[j].set(jnp.where(go, ix, idx[j])),
            P.at[j].set(jnp.where(go, Pj, P[j])),
            updates.at[j].add(jnp.where(go, steps, 0)),
            safe & (ok | ~go),
            left.at[j].set(False),
        )

    idx, P, updates, safe, _ = jax.lax.while_loop(
        lambda c: jnp.any(c[4]), neuron, (idx, P, updates, jnp.asarray(True), changed)
    )
    return idx, P, updates, safe


def _sliding_factor(G, mode, previous=None) -> _SlidingFactor:
    """`_SlidingFactor` of the pattern `mode`: only the inverses of its branch are formed,
    or, from `previous` (the factor of sets S_old, and S_old) in the same branch of at least
    `_UPDATE_FROM`, updated neuron by neuron where the sets changed (`_neuron_updates`) in
    at most k / 4 entries, up to `_REFRESH` updates per neuron (rounding), and only with
    safe pivots."""
    S = mode == SLIDING
    m, n = S.shape
    sizes = _sizes(n)
    branch = _branch(S)
    # (sets beyond the compact sizes solved at each evaluation cost far more than the n x n
    # slot; beyond `_FULL` they are: `_sliding_weights`)
    slots = sizes + ([n] if n <= _FULL else [])
    none = jnp.zeros((m,), jnp.int32)
    every = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), (m, n))  # the n x n slot's

    def formed(i, k):
        if previous is None or k < _UPDATE_FROM:
            return (*_fresh(G, S, k), none)
        factor, S_old = previous
        old_idx = factor.idx[i] if i < len(factor.idx) else every
        changes = jnp.sum(S != S_old, axis=1)
        incremental = (
            (factor.branch == branch)
            & jnp.all(changes <= k // 4)
            & jnp.all(factor.updates + changes <= _REFRESH)
        )

        # (one `_fresh` per slot: each is a recursion of batched products that XLA compiles
        # for tens of seconds at n = 256)
        x = (old_idx, factor.inv[i], factor.updates, jnp.asarray(False))
        idx, inv, updates, safe = _in_place(
            eqxi.unvmap_all(incremental),
            lambda x: _neuron_updates(G, *x[:3], S_old, S, changes > 0),
            x,
        )
        return _in_place(
            ~eqxi.unvmap_all(safe), lambda _: (*_fresh(G, S, k), none), (idx, inv, updates)
        )

    # slot by slot, in place: the branch's is formed (or updated), the others kept as they
    # were (stale, never read: `branch` says which is valid; a lax.switch over the branches
    # wrote every slot at each refactorization, the unused ones as zeros)
    if previous is None:
        idx = [jnp.zeros((m, k), jnp.int32) for k in sizes]
        inv = [jnp.zeros((m, k, k), G.dtype) for k in slots]
    else:
        idx, inv = list(previous[0].idx), list(previous[0].inv)
    updates = none
    for i, k in enumerate(slots):
        kept = (idx[i] if i < len(sizes) else every, inv[i], none)
        ix, inv[i], up = _in_place(branch == i + 1, lambda _, i=i, k=k: formed(i, k), kept)
        if i < len(sizes):
            idx[i] = ix
        updates = jnp.where(branch == i + 1, up, updates)
    idx, inv = tuple(idx), tuple(inv)
    return _SlidingFactor(idx, inv, branch, updates)


def _refactor(frame, mode) -> _SlidingFactor:
    """`_sliding_factor(frame.G, mode)` from `frame.factor`, or `frame.factor` where `mode`
    slides on the same entries as `frame.mode` (the factor depends on the sliding sets alone):
    a kink event that changes no sliding set forms no inverses (before, four per event, most
    of its time at c = 1e-6, n = 64, where the sets reach 64 entries), and one that changes a
    few entries updates them."""
    # (same sets in the whole batch: the same block size, `_branch`; `frame.factor` is that of
    # `frame.mode` in the batch's block size, which `_batch_block` keeps where members differ)
    same = ~eqxi.unvmap_any(jnp.any((mode == SLIDING) != (frame.mode == SLIDING)))
    return _in_place(
        ~same, lambda f: _sliding_factor(frame.G, mode, (f, frame.mode == SLIDING)), frame.factor
    )


def _in_place(pred, f, x):
    """f(x) where `pred`, else x: a cond as a loop of at most one round, whose x XLA updates
    in place where a lax.cond copies the x it passes through (the factor's slots, 47 MB at
    n = 256, were copied several times per kink event: half of an event's time). Under vmap
    a batched `pred` runs f for the whole batch and selects, as lax.cond does."""
    return jax.lax.while_loop(lambda c: c[0], lambda c: (jnp.asarray(False), f(c[1])), (pred, x))[1]


def _batch_block(factor, G, mode) -> _SlidingFactor:
    """`factor` (of `mode`), formed again where its block size is not the batch's: under vmap
    a member without a kink event keeps its factor while the others' sets can change the
    batch's size (`_branch`, the largest set of any member), and it would read a block it
    never filled (zero weights, finite: no fallback sees them)."""
    return jax.lax.cond(
        eqxi.unvmap_any(factor.branch != _branch(mode == SLIDING)),
        lambda: _sliding_factor(G, mode),
        lambda: factor,
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
        b_full = -(jnp.where(frame.mode == ACTIVE, r[None, :], 0.0) @ frame.G)
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
    return jnp.where(
        mode == ACTIVE, pz, jnp.where(mode == INACTIVE, -pz, jnp.minimum(sigma, 1.0 - sigma))
    )


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
    n = frame.y.shape[0]
    psi = psi.at[:, 1:].set(jnp.where(candidates, 0.0, psi[:, 1:]))
    mode = jnp.where(candidates & (frame.mode == SLIDING), INACTIVE, frame.mode)

    def with_mode(mode, base):
        # the weights as the flow's segments evaluate them (`_SlidingFactor`): a weight that
        # the classification keeps inside [0, 1] by rounding should not start the next
        # segment outside it, past its event (what is left, rounding, the segment's guard
        # catches: `two_layer_flow`'s module docstring)
        return _Frame(frame.G, frame.y, frame.tau, mode, frame.slow, _refactor(base, mode))

    was_sliding = frame.mode == SLIDING

    def _phase(k):
        return jnp.asarray(k, jnp.int32)

    # One loop, one refactorization per iteration (each `with_mode` in the program is a
    # `_sliding_factor` that XLA compiles, most of what two_layer_flow compiles): the pattern
    # `pending` is factored, then the phase says what to do with it. 0: the candidates
    # classified by their one-sided velocities; then rounds of 1 (a candidate set active that
    # the joint pattern moves down, or inactive that it moves up, goes onto the kink) and 2
    # (the worst sliding weight outside [0, 1] per neuron released), until a round changes
    # nothing or `_RELEASE_ROUNDS` (3: done).
    def classified(now, c):
        pa, _, r, sigma, _, _ = _field_parts(kappa, psi, now)
        s = jnp.where(now.mode == ACTIVE, 1.0, jnp.where(now.mode == SLIDING, sigma, 0.0))
        s_minus = jnp.where(candidates, 0.0, s)  # each candidate counted inactive ...
        d_minus = -pa[:, None] * ((s_minus * r[None, :]) @ frame.G) / n
        d_plus = d_minus - pa[:, None] * (jnp.diag(frame.G) * r)[None, :] / n  # ... and active
        new = jnp.where(
            (d_minus > 0) & (d_plus > 0),
            ACTIVE,
            jnp.where((d_minus > 0) & (d_plus <= 0), SLIDING, INACTIVE),
        )
        pending = jnp.where(candidates, new, now.mode)
        return dict(c, pending=pending, phase=_phase(1), d=(d_minus, d_plus))

    def consistent(now, c):
        # `live`: this member goes on; the phase is the batch's (under vmap a batched index
        # would run every phase at every iteration), a finished member's rounds change nothing
        live = c["changing"] & (c["rounds"] < _RELEASE_ROUNDS)
        go = eqxi.unvmap_any(live)
        mode = now.mode

        def wrong():
            vel = _velocity(kappa, psi, now)
            return candidates & (((mode == ACTIVE) & (vel < 0)) | ((mode == INACTIVE) & (vel > 0)))

        wrong = jax.lax.cond(go, wrong, lambda: jnp.zeros_like(candidates))
        return dict(
            c, pending=jnp.where(live & wrong, SLIDING, mode), phase=_phase(jnp.where(go, 2, 3)),
            before=mode, live=live,
        )  # fmt: skip

    def release(now, c):
        new = now.mode
        sigma = _sliding_weights(_residual(kappa, psi, now)[1], now)
        violation = jnp.where(new == SLIDING, jnp.maximum(sigma - 1.0, -sigma), -jnp.inf)
        worst = jnp.arange(n)[None, :] == jnp.argmax(violation, axis=1)[:, None]
        out = worst & (violation > 0) & c["live"]
        up = out & (sigma > 1.0)
        down = out & (sigma < 0.0)
        new = jnp.where(up, ACTIVE, jnp.where(down, INACTIVE, new))
        return dict(
            c, pending=new, phase=_phase(1), released=c["released"] | up | down,
            changing=c["live"] & jnp.any(new != c["before"]), rounds=c["rounds"] + c["live"],
        )  # fmt: skip

    def step(carry):
        prev, c = carry
        now = with_mode(c["pending"], prev)
        c = jax.lax.switch(
            c["phase"], [classified, consistent, release], now, dict(c, pending=now.mode)
        )
        return now, c

    zeros = jnp.zeros(mode.shape, frame.G.dtype)
    c0 = dict(
        pending=mode, phase=_phase(0), before=mode, changing=jnp.asarray(True),
        live=jnp.asarray(True), released=jnp.zeros_like(candidates), rounds=_phase(0),
        d=(zeros, zeros),
    )  # fmt: skip
    # (the frame as `with_mode` builds them: no segment's r0 and d0)
    first = _Frame(frame.G, frame.y, frame.tau, frame.mode, frame.slow, frame.factor)
    now, c = jax.lax.while_loop(lambda carry: carry[1]["phase"] != 3, step, (first, c0))
    released = c["released"]
    d_minus, d_plus = c["d"]
    mode = now.mode
    entered = candidates & (mode == SLIDING) & ~was_sliding
    moved = candidates | released
    speed = frame.tau * jnp.maximum(jnp.abs(d_minus), jnp.abs(d_plus))
    gap = jnp.where(speed < frame.slow, frame.slow, _NUDGE)
    side = jnp.where(mode == ACTIVE, gap, jnp.where(mode == INACTIVE, -gap, 0.0))
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
