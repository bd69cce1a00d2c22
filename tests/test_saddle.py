import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theory import coverage_width, crossing_times, jump_time_grid, min_norm_cost, saddle_jumps


def test_one_sample_one_neuron():
    # D = |y| / n = 2, t_1 = 1/2, a = sqrt(2), cost = |y| = 2, loss goes to 0.
    p = saddle_jumps(jnp.array([-2.0]), jnp.array([-1.0]), jnp.array([[0.7]]))
    assert p.num_jumps == 1
    np.testing.assert_allclose(p.times, [0.5])
    np.testing.assert_array_equal(p.neurons, [0])
    np.testing.assert_allclose(p.amplitudes, [-math.sqrt(2.0)])
    np.testing.assert_allclose(p.plateaus, [0.0])
    np.testing.assert_allclose(p.initial_plateau, 2.0)
    np.testing.assert_allclose(p.cost, 2.0)


def test_two_samples_one_jump_covers_both():
    # Neuron 0 sees both samples: ||D|| = sqrt(4 + 1) / 2; neuron 1 only sample 1 (||D|| = 1/2)
    # and is pre-empted: after the first jump its support is fitted, so the process stops.
    y = jnp.array([2.0, 1.0])
    p = saddle_jumps(y, jnp.array([1.0, 1.0]), jnp.array([[0.1, 0.2], [-0.3, 0.4]]))
    assert p.num_jumps == 1
    np.testing.assert_allclose(p.times[0], 2 / math.sqrt(5))
    assert np.isinf(p.times[1]) and p.neurons[1] == -1 and np.isnan(p.plateaus[1])
    np.testing.assert_array_equal(p.fitted[0], [True, True])
    np.testing.assert_allclose(p.cost, math.sqrt(5))


def test_three_samples_rate_changes_after_a_jump():
    # n = 3, y = (1, 2, 1).
    # neuron 0 (+): support {0, 2}, ||D|| = sqrt(2)/3;  neuron 1 (+): support {0, 1}, sqrt(5)/3;
    # neuron 2 (-): no negative labels, empty support.
    # Jump 1: neuron 1 at t1 = 3/sqrt(5), fits {0, 1}. Neuron 0 reached ell = -1 + t1 sqrt(2)/3 and
    # now grows at 1/3 (only sample 2 left): t2 = t1 + 3 (1 - t1 sqrt(2)/3) = 3 - t1 (sqrt(2) - 1).
    y = jnp.array([1.0, 2.0, 1.0])
    signs = jnp.array([1.0, 1.0, -1.0])
    directions = jnp.array([[0.5, -0.5, 0.5], [0.5, 0.5, -0.5], [0.1, 0.1, 0.1]])
    p = saddle_jumps(y, signs, directions)
    t1 = 3 / math.sqrt(5)
    assert p.num_jumps == 2
    np.testing.assert_allclose(p.times[:2], [t1, 3 - t1 * (math.sqrt(2) - 1)])
    np.testing.assert_array_equal(p.neurons, [1, 0, -1])
    np.testing.assert_array_equal(p.fitted[:2], [[True, True, False], [False, False, True]])
    np.testing.assert_allclose(p.amplitudes[:2], [5**0.25, 1.0])
    np.testing.assert_allclose(p.plateaus[:2], [1 / 6, 0.0])
    np.testing.assert_allclose(p.initial_plateau, 1.0)
    np.testing.assert_allclose(p.cost, math.sqrt(5) + 1)
    assert not p.uncovered.any()


def _random_instance(key, n, m):
    k1, k2, k3 = jax.random.split(key, 3)
    y = jax.random.normal(k1, (n,))
    signs = jax.random.rademacher(k2, (m,), dtype=jnp.float64)
    directions = jax.random.normal(k3, (m, n))
    return y, signs, directions


@pytest.mark.parametrize(
    "n,m",
    [
        pytest.param(5, 3, marks=pytest.mark.slow),
        pytest.param(16, 42, marks=pytest.mark.slow),
        (32, 12),
    ],
)
def test_invariants_on_random_instances(n, m):
    keys = jax.random.split(jax.random.PRNGKey(n * 100 + m), 8)
    y, signs, directions = jax.vmap(_random_instance, in_axes=(0, None, None))(keys, n, m)
    # seed by seed: the eager path (test_jit_and_vmap_agree_with_single_calls checks that the
    # batched, always-resolving path agrees with it)
    p = jax.tree_util.tree_map(
        lambda *x: np.stack(x), *[saddle_jumps(y[s], signs[s], directions[s]) for s in range(8)]
    )
    optimum = np.asarray(jax.vmap(min_norm_cost)(y))
    # check on host arrays: indexing device arrays seed by seed costs a dispatch each
    p, y, signs, directions = jax.tree_util.tree_map(np.asarray, (p, y, signs, directions))
    K = min(m, n)
    assert p.times.shape == (8, K) and p.fitted.shape == (8, K, n)
    for s in range(8):
        k = int(p.num_jumps[s])
        t, pl = np.asarray(p.times[s]), np.asarray(p.plateaus[s])
        assert np.all(np.diff(t[:k]) > 0) and np.all(np.isinf(t[k:]))
        assert np.all(np.diff(np.r_[p.initial_plateau[s], pl[:k]]) < 0)
        assert np.all(np.isnan(pl[k:])) and np.all(np.asarray(p.neurons[s, k:]) == -1)
        # each sample fitted at most once; fitted exactly the covered ones
        counts = np.asarray(p.fitted[s]).sum(axis=0)
        assert counts.max() <= 1
        support = (np.asarray(directions[s]) > 0) & (
            np.asarray(signs[s])[:, None] * np.asarray(y[s])[None, :] > 0
        )
        np.testing.assert_array_equal(np.asarray(p.uncovered[s]), ~support.any(axis=0))
        np.testing.assert_array_equal(counts == 1, ~np.asarray(p.uncovered[s]))
        # the final plateau is the loss of the uncovered samples, and cost >= the optimum
        final = 0.5 * np.sum(np.where(p.uncovered[s], y[s] ** 2, 0.0)) / n
        np.testing.assert_allclose(pl[k - 1] if k else p.initial_plateau[s], final, atol=1e-14)
        if not p.uncovered[s].any():
            assert p.cost[s] >= optimum[s] - 1e-12
        np.testing.assert_allclose(p.cost[s], np.sum(np.asarray(p.final_amplitudes[s]) ** 2))
        # without shared samples the cost is Algorithm 1's sum of ||y_S||
        norms = [np.linalg.norm(y[s][np.asarray(p.fitted[s, j])]) for j in range(k)]
        if np.all(np.asarray(p.groups[s, :, 1]) == -1):  # no simultaneous jumps
            np.testing.assert_allclose(p.cost[s], np.sum(norms), rtol=1e-12)
        # a neuron fires at most once, with the sign of its fitted labels
        fired = np.asarray(p.neurons[s, :k])
        assert len(set(fired.tolist())) == k
        for j in range(k):
            assert np.all(np.sign(y[s][np.asarray(p.fitted[s, j])]) == signs[s][fired[j]])


@pytest.mark.slow  # default-run budget: the capability keeps other default tests
def test_jit_and_vmap_agree_with_single_calls():
    keys = jax.random.split(jax.random.PRNGKey(3), 4)
    y, signs, directions = jax.vmap(_random_instance, in_axes=(0, None, None))(keys, 8, 10)
    batched = jax.jit(jax.vmap(saddle_jumps))(y, signs, directions)
    for s in range(4):
        single = saddle_jumps(y[s], signs[s], directions[s])
        np.testing.assert_array_equal(batched.times[s], single.times)
        np.testing.assert_array_equal(batched.neurons[s], single.neurons)
        np.testing.assert_array_equal(batched.groups[s], single.groups)
        np.testing.assert_allclose(batched.cost[s], single.cost, rtol=1e-7)
        np.testing.assert_allclose(batched.final_amplitudes[s], single.final_amplitudes, rtol=1e-7)


def test_min_norm_cost_hand_case_and_attained_by_one_neuron_per_sign():
    y = jnp.array([3.0, -1.0, 4.0, -2.0])
    np.testing.assert_allclose(min_norm_cost(y), 5.0 + math.sqrt(5.0))
    # a neuron that covers every positive sample alone reaches ||y_+||, the optimum for y_+
    p = saddle_jumps(y, jnp.array([1.0, -1.0]), jnp.ones((2, 4)))
    np.testing.assert_allclose(p.cost, min_norm_cost(y))


def test_coverage_width():
    assert coverage_width(32) == 45  # the paper's n = 32 row
    assert coverage_width(64) == 47
    assert int(coverage_width(jnp.array(32))) == 45
    # the union bound it encodes
    m = coverage_width(100, 1e-3)
    assert 100 * 0.75**m <= 1e-3 < 100 * 0.75 ** (m - 1)
    with pytest.raises(ValueError):
        coverage_width(0)


def test_bad_inputs_raise_value_errors_naming_the_argument():
    y, s, d = jnp.ones(3), jnp.ones(2), jnp.ones((2, 3))
    with pytest.raises(ValueError, match="signs"):
        saddle_jumps(y, jnp.array([1.0, 0.5]), d)
    with pytest.raises(ValueError, match="directions"):
        saddle_jumps(y, s, jnp.ones((2, 4)))
    with pytest.raises(ValueError, match="y"):
        saddle_jumps(jnp.ones((3, 1)), s, d)


def test_crossing_times_interpolates_in_log_loss():
    p = saddle_jumps(jnp.array([-2.0]), jnp.array([-1.0]), jnp.array([[0.7]]))
    # plateau 0 = 2, plateau 1 = 0: level 1; loss 4 -> 0.25 between t = 1 and 2 crosses 1 at 1.5
    ts = jnp.array([0.0, 1.0, 2.0, 3.0])
    loss = jnp.array([2.0, 4.0, 0.25, 0.0])
    np.testing.assert_allclose(crossing_times(ts, loss, p), [1.5])
    assert np.isnan(crossing_times(ts, jnp.full(4, 2.0), p)[0])


def test_predicted_exponents_by_hand():
    from theory import predicted_exponents

    # two neurons on one positive sample y = 1 (n = 1): rates ||D|| = 1 and a tie, neuron 0
    # fires at t = 1; neuron 1 then has no unfitted support and stops at its exponent, 0.
    y = jnp.array([1.0])
    pred = saddle_jumps(y, jnp.array([1.0, 1.0]), jnp.array([[0.5], [0.2]]))
    ell = predicted_exponents(pred, jnp.array([0.0, 0.25, 1.0, 3.0]))
    np.testing.assert_allclose(ell[:, 0], [-1.0, -0.75, 0.0, 0.0])
    np.testing.assert_allclose(ell[:, 1], [-1.0, -0.75, 0.0, 0.0])
    # a neuron of the other sign never moves
    pred = saddle_jumps(y, jnp.array([1.0, -1.0]), jnp.array([[0.5], [0.2]]))
    ell = predicted_exponents(pred, jnp.array([0.0, 2.0, 5.0]))
    np.testing.assert_allclose(ell[:, 1], [-1.0, -1.0, -1.0])
    np.testing.assert_allclose(pred.rates[0], [1.0, 0.0])


def test_last_time_horizon_and_final_loss():
    # one neuron, one sample: t_1 = 1/2, everything is fitted
    pred = saddle_jumps(jnp.array([2.0]), jnp.array([1.0]), jnp.array([[0.3]]))
    assert float(pred.last_time) == 0.5 and float(pred.horizon(2.0)) == 1.0
    assert float(pred.final_loss) == 0.0
    # a neuron of the wrong sign: no jump, the sample stays unfitted at its initial loss
    pred = saddle_jumps(jnp.array([2.0, 1.0]), jnp.array([-1.0]), jnp.array([[0.3, 0.4]]))
    assert float(pred.last_time) == 0.0 and float(pred.horizon(1.3)) == 1.3
    np.testing.assert_allclose(pred.final_loss, pred.initial_plateau)
    # one sample uncovered: the loss floor is its share of the initial loss
    pred = saddle_jumps(jnp.array([2.0, -1.0]), jnp.array([1.0]), jnp.array([[0.3, 0.4]]))
    np.testing.assert_allclose(pred.final_loss, 0.5 * 1.0 / 2)
    # GD needs tau t_K / eta steps to reach the last jump
    pred = saddle_jumps(jnp.array([2.0]), jnp.array([1.0]), jnp.array([[0.3]]))
    assert float(pred.gd_epochs(time_scale=69.0, learning_rate=0.5)) == pytest.approx(69.0)


@pytest.mark.slow
def test_jump_time_grid_resolves_every_jump():
    y, signs, dirs = _random_instance(jax.random.PRNGKey(4), 8, 16)
    pred = saddle_jumps(y, signs, dirs)
    t1 = float(pred.horizon(1.3))
    tau = 1e4
    grid = np.asarray(jump_time_grid(pred, t1, time_scale=tau, num=100, window_points=64))
    assert grid.shape == (100 + 64 * 8,)
    assert np.all(np.diff(grid) >= 0) and grid[0] == 0.0 and grid[-1] == pytest.approx(t1)
    for t in np.asarray(pred.times)[np.isfinite(pred.times)]:
        near = grid[np.abs(grid - t) <= (1 + 1e-9) * 30 / tau * t]
        assert near.size >= 64 and np.max(np.diff(near)) <= 2 * 60 / tau * t / 63
    # a Python integer horizon still gives a float grid (never an integer one)
    assert jump_time_grid(pred, 10, time_scale=tau, num=5).dtype.kind == "f"


@pytest.mark.slow  # an integration check; the default run keeps its unit tests
def test_simultaneous_jumps_share_samples_as_the_flow_does():
    # two tied neurons, supports {0, 1} and {1, 2}: Algorithm 1 as written fired one after the
    # other (cost 1 + sqrt 2); the group shares sample 1 as its fast phase does
    from integrators import vanishing_flow

    y, signs = jnp.ones(3), jnp.ones(2)
    D = jnp.array([[0.9, 0.1, -0.4], [-0.3, 0.2, 0.9]])
    D = D / jnp.linalg.norm(D, axis=1, keepdims=True)
    p = saddle_jumps(y, signs, D)
    assert p.ok and int(p.num_jumps) == 1
    assert p.groups[0].tolist() == [0, 1] and int(p.neurons[0]) == 0
    np.testing.assert_array_equal(p.fitted[0], [True, True, True])
    np.testing.assert_allclose(p.cost, np.sum(np.asarray(p.final_amplitudes) ** 2))
    ts = jnp.linspace(0.0, 3 * float(p.last_time), 50)
    flow = vanishing_flow(y, signs, D, ts, time_scale=1e4 * np.log(10.0))
    np.testing.assert_allclose(p.cost, flow.cost[-1], rtol=1e-6)
    assert abs(float(p.cost) - (1 + math.sqrt(2))) > 0.1  # not the sequential answer
    # symmetric directions split sample 1 equally: sqrt 5
    Ds = jnp.array([[0.5, 0.5, -0.7], [-0.7, 0.5, 0.5]])
    np.testing.assert_allclose(saddle_jumps(y, signs, Ds).cost, math.sqrt(5.0), rtol=1e-7)


@pytest.mark.slow
def test_groups_and_tie_gaps_are_consistent():
    keys = jax.random.split(jax.random.PRNGKey(11), 6)
    y, signs, directions = jax.vmap(_random_instance, in_axes=(0, None, None))(keys, 8, 20)
    y = jnp.sign(y)  # +-1 labels: ties are common
    p = jax.tree_util.tree_map(
        lambda *x: np.stack(x), *[saddle_jumps(y[s], signs[s], directions[s]) for s in range(6)]
    )
    assert p.ok.all() and (p.groups[..., 1] >= 0).any()
    for s in range(6):
        k = int(p.num_jumps[s])
        members = [g[g >= 0] for g in p.groups[s, :k]]
        assert all(
            np.all(np.diff(g) > 0) and g[0] == p.neurons[s, j] for j, g in enumerate(members)
        )
        flat = np.concatenate(members)
        assert len(set(flat.tolist())) == flat.size  # a neuron fires once
        assert np.all(p.final_amplitudes[s][flat] != 0)
        others = np.setdiff1d(np.arange(20), flat)
        assert np.all(p.final_amplitudes[s][others] == 0)
        assert np.all(p.tie_gaps[s, :k] > 0) and np.all(np.isinf(p.tie_gaps[s, k:]))


@pytest.mark.slow
def test_finite_alpha_one_neuron_is_the_logistic_midpoint():
    # one neuron, one sample: ell = -1 + Y t + kappa / tau with kappa = log((1 + c)/2) from the
    # alignment phase, then the logistic u' = 2 tau (Y - u) u / n crosses u = Y (1 - 1/sqrt 2)
    Y, c, tau = 2.0, 0.6, 50.0
    p = saddle_jumps(jnp.array([Y]), jnp.array([1.0]), jnp.array([[c]]), time_scale=tau)
    kappa = math.log((1 + c) / 2)
    expected = 1 / Y + (math.log(Y) - 2 * kappa - math.log(1 + math.sqrt(2))) / (2 * Y * tau)
    assert p.ok and float(p.time_scale) == tau
    # to 0.2% of the correction (1.3e-3): the crossing is interpolated between saved points
    np.testing.assert_allclose(p.times_finite_alpha[0], expected, atol=2e-6)
    assert abs(float(p.times_finite_alpha[0]) - 1 / Y) > 1e-3
    np.testing.assert_allclose(p.cost_finite_alpha, Y, rtol=1e-6)
    assert float(p.times[0]) == 1 / Y  # the limit is unchanged
    # padded jumps are +inf, as in the limit; a time scale below 20 is refused
    two = saddle_jumps(
        jnp.ones(2), jnp.ones(2), jnp.array([[0.6, 0.8], [-0.6, -0.8]]), time_scale=tau
    )
    assert int(two.num_jumps) == 1 and float(two.times_finite_alpha[1]) == np.inf and two.ok
    with pytest.raises(ValueError, match="time_scale"):
        saddle_jumps(jnp.array([Y]), jnp.array([1.0]), jnp.array([[c]]), time_scale=5.0)
    # in the limit the finite-alpha fields are the limit's
    q = saddle_jumps(jnp.array([Y]), jnp.array([1.0]), jnp.array([[c]]))
    assert float(q.times_finite_alpha[0]) == float(q.times[0]) and q.curve_ts is None


@pytest.mark.slow
def test_plus_minus_one_labels_cost_and_plateaus_follow_the_flow():
    # the instances: n = 16, m = 42, +-1 labels, 6 seeds, log10(1/alpha) = 10^4
    from benchmarks._saddle import limit_instance
    from integrators import vanishing_flow

    tau = 1e4 * math.log(10.0)
    ties = 0
    for seed in range(6):
        y, signs, D = limit_instance(jax.random.PRNGKey(seed), 16, 42, labels="sign")
        p = saddle_jumps(y, signs, D)
        ts = jump_time_grid(p, float(p.horizon(1.3)), time_scale=tau)
        flow = vanishing_flow(y, signs, D, ts, time_scale=tau)
        assert p.ok and flow.ok
        np.testing.assert_allclose(p.cost, flow.cost[-1], rtol=1e-3)
        k = int(p.num_jumps)
        # the loss just before the next jump (or at the end) is the plateau
        ends = np.r_[np.asarray(p.times[1:k]), float(ts[-1]) + 1.0]
        for j in range(k):
            t_probe = float(p.times[j]) + 0.5 * (ends[j] - float(p.times[j]))
            measured = np.interp(t_probe, np.asarray(ts), np.asarray(flow.loss))
            assert abs(measured - float(p.plateaus[j])) < 1e-3
        ties += int(np.sum(np.asarray(p.groups[:k, 1]) >= 0))
    assert ties > 0


@pytest.mark.slow
def test_label_scale_moves_the_times_only():
    # times scale like 1/|y|; at labels x 1e12 an absolute tie floor once made every neuron
    # jump at the first time (1 jump, ok), where the same labels at scale 1 make 3
    from benchmarks._saddle import limit_instance

    y, signs, directions = limit_instance(jax.random.PRNGKey(3), 8, 12)
    base = saddle_jumps(y, signs, directions)
    assert int(base.num_jumps) >= 3
    for c in (1e-6, 1e12):
        p = saddle_jumps(c * y, signs, directions)
        assert int(p.num_jumps) == int(base.num_jumps) and bool(p.ok)
        k = int(base.num_jumps)
        np.testing.assert_allclose(c * p.times[:k], base.times[:k], rtol=1e-12)
        # the cost goes through the fast phases' ODE (rtol = atol = 1e-8, absolute in their
        # state): 4e-8 apart at labels x 1e-6, 2.4e-5 at x 1e12
        np.testing.assert_allclose(p.cost / c, base.cost, rtol=1e-4)
