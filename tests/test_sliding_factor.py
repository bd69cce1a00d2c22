"""The inverses of two_layer_flow's sliding systems (`integrators._sliding_factor`): per-event
inverses, rank-one updates, block sizes, batches and in-place updates against direct solves."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_two_layer_kinks import _correlated, _direct, _frame

from integrators import _sliding_factor as SF


def test_sliding_weights_from_the_per_event_inverses_are_the_direct_solves():
    # the flow forms G_SS^{-1} once per kink event (`_sliding_factor`) and applies it at every
    # evaluation; each branch (sets of 1, up to 4 and all 6 entries) against numpy's
    # solve of (G (r * s_j))_S = 0, and the degenerate cases (a duplicated input sliding with
    # its copy, a sliding sample fitted exactly) as the direct solves give them
    from integrators import _two_layer_field as F

    n, m = 6, 4
    X = _correlated(n, 0.3)
    G = X @ X.T
    rng = np.random.default_rng(0)
    r = jnp.asarray(rng.normal(size=n))

    @jax.jit
    def weights(mode, G=G, r=r):  # one compilation: the branch is taken at run time
        frame = _frame(G, mode)
        factored = eqx.tree_at(lambda f: f.factor, frame, SF._sliding_factor(G, mode),
                               is_leaf=lambda x: x is None)  # fmt: skip
        return F._sliding_weights(r, frame), F._sliding_weights(r, factored)

    for most in (1, 3, 5):
        sizes = [most] + list(rng.integers(0, most + 1, size=m - 1))
        mode = np.full((m, n), F.INACTIVE)
        for j, k in enumerate(sizes):
            perm = rng.permutation(n)
            mode[j, perm[:1]] = F.ACTIVE
            mode[j, perm[1 : 1 + k]] = F.SLIDING
        direct, factored = weights(jnp.asarray(mode))
        for j in range(m):
            S, expected = _direct(G, r, mode[j])
            np.testing.assert_allclose(np.asarray(factored)[j, S], expected, rtol=1e-9)
            assert np.all(np.asarray(factored)[j, ~S] == 0.0)
        np.testing.assert_allclose(factored, direct, rtol=1e-9, atol=1e-12)
    # a duplicated input (G_SS singular) and a fitted sliding sample (r_i = 0)
    Xd = X.at[1].set(X[0])
    mode = jnp.full((m, n), F.INACTIVE).at[:, 4:].set(F.ACTIVE).at[0, :2].set(F.SLIDING)
    mode = mode.at[1, 2:4].set(F.SLIDING)
    for G_, r_, j in ((Xd @ Xd.T, r, 0), (G, r.at[2].set(0.0), 1)):
        direct, factored = weights(mode, G_, r_)
        assert np.all(np.isfinite(np.asarray(direct)))
        # neuron j's weights come from the direct solve; the others' from their inverses
        np.testing.assert_array_equal(factored[j], direct[j])
        np.testing.assert_allclose(factored, direct, rtol=1e-9, atol=1e-15)


@pytest.mark.slow  # 4-8 s; the per-event inverses' default test covers the factor
def test_sets_of_about_half_the_samples_get_a_block_of_five_eighths():
    # at c = 1e-6 each neuron's set grows to about one label sign's count (129 of 256): a
    # 5n/8 block holds it where the n x n one costs 2.6 times as much per evaluation
    from integrators import _two_layer_field as F

    assert SF._sizes(256) == [4, 16, 32, 64, 128, 160]
    assert SF._sizes(64) == [4, 16, 32, 48] and SF._sizes(16) == [4]
    n, m = 64, 3
    X = _correlated(n, 0.1)
    G, r = X @ X.T, jnp.asarray(np.random.default_rng(1).normal(size=n))
    mode = np.full((m, n), F.ACTIVE)
    mode[0, :40], mode[1, 5:9], mode[2, ::2] = F.SLIDING, F.SLIDING, F.INACTIVE
    factor = SF._sliding_factor(G, jnp.asarray(mode))
    assert int(factor.branch) == 1 + SF._sizes(n).index(48)
    sigma = np.asarray(F._sliding_weights(r, _frame(G, jnp.asarray(mode), factor)))
    for j in range(2):
        S, expected = _direct(G, r, mode[j])
        np.testing.assert_allclose(sigma[j, S], expected, rtol=1e-8)
    assert np.all(sigma[2] == 0.0)


@pytest.mark.slow  # 4-8 s; the per-event inverses' default test covers the factor
def test_rank_one_updates_of_the_sliding_inverses_are_the_direct_solves(monkeypatch):
    # an event that changes a few entries of the sliding sets updates the inverses (removal by
    # the Schur complement, addition by bordering) instead of forming them: 60 random events
    # of 0 to 2 changes per neuron against numpy's solves (here from the 4 x 4 slot up, at
    # n = 12, so that both the compact slot and the n x n one are updated)
    from integrators import _two_layer_field as F

    monkeypatch.setattr(SF, "_UPDATE_FROM", 4)
    n, m = 12, 4
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, n)) / np.sqrt(n)  # Gaussian: condition ~1e3
    G, r = jnp.asarray(X @ X.T), jnp.asarray(rng.normal(size=n))
    mode = np.where(rng.random((m, n)) < 0.5, F.ACTIVE, F.INACTIVE)
    mode[:, :2] = F.SLIDING

    refactor, weights = jax.jit(SF._refactor), jax.jit(F._sliding_weights)
    now = _frame(G, jnp.asarray(mode), SF._sliding_factor(G, jnp.asarray(mode)))
    updated = 0
    for _ in range(60):
        new = np.asarray(now.mode).copy()
        for j in range(m):
            for i in rng.integers(0, n, size=rng.integers(0, 3)):
                new[j, i] = F.SLIDING if new[j, i] != F.SLIDING else F.ACTIVE
        factor = refactor(now, jnp.asarray(new))
        updated = max(updated, int(jnp.max(factor.updates)))
        now = _frame(G, jnp.asarray(new), factor)
        sigma = np.asarray(weights(r, now))
        for j in range(m):
            S, expected = _direct(G, r, new[j])
            np.testing.assert_allclose(sigma[j, S], expected, rtol=1e-8, atol=1e-12)
    assert updated >= 10
    # a duplicated input joining its copy's set: the pivot is unsafe and the inverses are
    # formed afresh (which the probe checks: `_checked_inverse`)
    Xd = X.copy()
    Xd[5] = Xd[0]
    G = jnp.asarray(Xd @ Xd.T)
    mode = jnp.full((m, n), F.INACTIVE).at[:, -3:].set(F.ACTIVE).at[0, :3].set(F.SLIDING)
    new = mode.at[0, 5].set(F.SLIDING)
    factor = SF._refactor(_frame(G, mode, SF._sliding_factor(G, mode)), new)
    assert int(jnp.max(factor.updates)) == 0
    fresh = _frame(G, new, SF._sliding_factor(G, new))
    np.testing.assert_array_equal(
        F._sliding_weights(r, _frame(G, new, factor)), F._sliding_weights(r, fresh)
    )


@pytest.mark.slow
def test_a_member_without_an_event_reads_the_batch_block_under_vmap():
    # vmapped, a member without a kink event keeps its factor (one neuron sliding on 2
    # entries: the 4 x 4 block) while another's set grows to 5 (the batch moves to the n x n
    # block): its inverses are formed again, not read from a block it never filled
    from integrators import _two_layer_field as F

    n = 6
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, n))
    G, r = jnp.asarray(X @ X.T), jnp.asarray(rng.normal(size=n))
    A, S = F.ACTIVE, F.SLIDING
    old = jnp.asarray([[[S, S, A, A, A, A]], [[S, S, A, A, A, A]]])
    new = jnp.asarray([[[S, S, A, A, A, A]], [[S, S, S, S, S, A]]])

    def step(event, mode_old, mode_new, factor_old):
        factor = jax.lax.cond(event, lambda: SF._sliding_factor(G, mode_new), lambda: factor_old)
        mode = jnp.where(event, mode_new, mode_old)
        factor = SF._refactor(_frame(G, mode, factor), mode)
        weights = F._sliding_weights(r, _frame(G, mode, factor))
        return weights, F._sliding_weights(r, _frame(G, mode))

    factors = jax.vmap(lambda mode: SF._sliding_factor(G, mode))(old)
    factored, direct = jax.vmap(step)(jnp.asarray([False, True]), old, new, factors)
    assert np.all(np.asarray(direct)[:, 0, :2] != 0.0)
    np.testing.assert_allclose(factored, direct, rtol=1e-9, atol=1e-12)


def test_sliding_sets_beyond_the_largest_factored_block_are_solved_directly(monkeypatch):
    # past n = 256 the factor holds no n x n inverses: a set larger than the largest compact
    # block is solved at each evaluation (here with the blocks cut to 4 x 4 at n = 6)
    from integrators import _two_layer_field as F

    monkeypatch.setattr(SF, "_COMPACT", (4,))
    monkeypatch.setattr(SF, "_FULL", 4)
    n, m = 6, 2
    X = _correlated(n, 0.3)
    G = jnp.asarray(X @ X.T)
    r = jnp.asarray(np.random.default_rng(1).normal(size=n))
    mode = jnp.asarray(
        [[F.ACTIVE] + [F.SLIDING] * 5, [F.ACTIVE, F.ACTIVE] + [F.SLIDING] * 2 + [F.INACTIVE] * 2]
    )
    factor = SF._sliding_factor(G, mode)
    assert [a.shape for a in factor.inv] == [(m, 4, 4)]  # no (m, n, n) slot
    frame = _frame(G, mode, factor)
    sigma = np.asarray(F._sliding_weights(r, frame))
    for j in range(m):
        S, expected = _direct(G, r, mode[j])
        np.testing.assert_allclose(sigma[j, S], expected, rtol=1e-9)


@pytest.mark.slow
def test_a_duplicated_input_split_across_the_inverse_blocks_falls_back_to_least_squares():
    # the blocked inverse does not pivot: a duplicated pair of inputs in one sliding set, one
    # in each half of its 32 x 32 block, meets a rounding-size pivot and gives finite garbage;
    # the factor's probe catches it and the weights are the direct solves' (least squares)
    from integrators import _two_layer_field as F

    n, m = 40, 3
    X = _correlated(n, 0.3)
    r = jnp.asarray(np.random.default_rng(0).normal(size=n))

    @jax.jit
    def weights(mode, G):
        frame = _frame(G, mode)
        factored = eqx.tree_at(lambda f: f.factor, frame, SF._sliding_factor(G, mode),
                               is_leaf=lambda x: x is None)  # fmt: skip
        return F._sliding_weights(r, frame), F._sliding_weights(r, factored)

    mode = jnp.full((m, n), F.INACTIVE).at[:, -5:].set(F.ACTIVE).at[0, :30].set(F.SLIDING)
    for copy in (5, 20):  # the same half, then the other half
        Xd = X.at[copy].set(X[0])
        direct, factored = weights(mode, Xd @ Xd.T)
        assert np.all(np.isfinite(np.asarray(direct)))
        np.testing.assert_allclose(factored, direct, rtol=1e-9, atol=1e-12)


def test_in_place_is_a_cond():
    # the factor's cond without the copy (`_in_place`): f(x) where pred, else x, also jitted
    # and under vmap with a batched predicate
    from integrators._sliding_factor import _in_place

    x = (jnp.arange(3.0), jnp.ones((2, 2)))
    f = lambda x: (x[0] + 1.0, 2.0 * x[1])  # noqa: E731
    for pred in (True, False):
        out = jax.jit(_in_place, static_argnums=1)(jnp.asarray(pred), f, x)
        for a, b in zip(out, f(x) if pred else x, strict=True):
            np.testing.assert_array_equal(a, b)
    preds = jnp.asarray([True, False])
    xs = jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), x)
    out = jax.vmap(lambda p, x: _in_place(p, f, x))(preds, xs)
    np.testing.assert_array_equal(out[0][0], f(x)[0])
    np.testing.assert_array_equal(out[0][1], x[0])
