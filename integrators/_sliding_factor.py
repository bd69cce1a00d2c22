"""The inverses of `two_layer_flow`'s Filippov sliding systems, one set per kink pattern:
formed in gathered blocks (`_sliding_factor`), carried from one pattern to the next by
rank-one updates (`_neuron_updates`), and kept in place (`_in_place`)."""

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
from jaxtyping import Array, Int

from theory.numerics import spd_inverse

from ._nonsmooth import SLIDING, smallest_holding

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
    return eqxi.unvmap_max(smallest_holding([1] + _sizes(S.shape[1]), most))


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
    slides on the same entries as `frame.mode` (the factor depends on the sliding sets alone)
    and the factor is in the batch's block size: a kink event that changes no sliding set
    forms no inverses (before, four per event, most of its time at c = 1e-6, n = 64, where the
    sets reach 64 entries), and one that changes a few entries updates them. Under vmap a
    member without a kink event keeps its factor while the others' sets can change the
    batch's block size (`_branch`, the largest set of any member): it would read a block it
    never filled (zero weights, finite: no fallback sees them), so it is formed again."""
    S = mode == SLIDING
    same = ~eqxi.unvmap_any(jnp.any(S != (frame.mode == SLIDING)))
    same &= ~eqxi.unvmap_any(frame.factor.branch != _branch(S))
    return _in_place(
        ~same, lambda f: _sliding_factor(frame.G, mode, (f, frame.mode == SLIDING)), frame.factor
    )


def _no_sliding(G, m) -> _SlidingFactor:
    """The `_SlidingFactor` of a pattern with no sliding entry (branch 0: nothing to invert),
    with every slot in place for the patterns after it: what `_sliding_factor` gives there,
    without a program that forms inverses."""
    n = G.shape[0]
    sizes = _sizes(n)
    slots = sizes + ([n] if n <= _FULL else [])
    return _SlidingFactor(
        tuple(jnp.zeros((m, k), jnp.int32) for k in sizes),
        tuple(jnp.zeros((m, k, k), G.dtype) for k in slots),
        jnp.zeros((), jnp.int32),
        jnp.zeros((m,), jnp.int32),
    )


def _in_place(pred, f, x):
    """f(x) where `pred`, else x: a cond as a loop of at most one round, whose x XLA updates
    in place where a lax.cond copies the x it passes through (the factor's slots, 47 MB at
    n = 256, were copied several times per kink event: half of an event's time). Under vmap
    a batched `pred` runs f for the whole batch and selects, as lax.cond does."""
    return jax.lax.while_loop(lambda c: c[0], lambda c: (jnp.asarray(False), f(c[1])), (pred, x))[1]
