"""Diagonal linear networks: the alpha -> 0 jump process against the exact flow (log form and
`gradient_flow`) and against the minimum-l1 interpolator (an LP solved by scipy)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

from dynamics import DiagonalNet, diagonal_init, diagonal_loss, diagonal_units, unchecked
from integrators import diagonal_flow, gradient_flow
from theory import RESULTS, crossing_times, diagonal_jumps


def _sparse_problem(n=12, d=36, seed=0):
    X = jax.random.normal(jax.random.PRNGKey(seed), (n, d))
    beta = jnp.zeros(d).at[:3].set(jnp.array([1.0, -2.0, 1.5]))
    return X, X @ beta


def _min_l1(X, y):
    X, y = np.asarray(X), np.asarray(y)
    d = X.shape[1]
    res = scipy.optimize.linprog(
        np.ones(2 * d), A_eq=np.hstack([X, -X]), b_eq=y, bounds=(0, None), method="highs"
    )
    return res.x[:d] - res.x[d:]


def test_orthogonal_coordinates_jump_once_each_in_order():
    short = diagonal_jumps(jnp.eye(3), jnp.array([0.5, -3.0, 1.0]), max_jumps=2)
    assert short.result == RESULTS.max_jumps_reached and not short.ok
    y = jnp.array([0.5, -3.0, 1.0])
    sol = diagonal_jumps(jnp.eye(3), y)
    assert sol.ok and int(sol.num_jumps) == 3
    # n = 3: X^T y / n = y / 3, t_i = 1 / (2 |y_i| / 3)
    np.testing.assert_allclose(sol.times[:3], np.sort(1.5 / np.abs(np.asarray(y))), rtol=1e-14)
    assert sol.joined[:3].tolist() == [1, 2, 0]
    np.testing.assert_allclose(sol.final_beta, y, atol=1e-14)
    assert np.isinf(sol.times[3:]).all()


def test_final_saddle_is_the_minimum_l1_interpolator():
    for seed in range(3):
        X, y = _sparse_problem(seed=seed)
        sol = diagonal_jumps(X, y)
        assert sol.ok
        ref = _min_l1(X, y)
        np.testing.assert_allclose(sol.final_beta, ref, atol=1e-9)
        assert abs(float(sol.l1_norm) - np.abs(ref).sum()) < 1e-9
        assert float(sol.final_loss) < 1e-20
        # losses decrease along the saddles, times increase
        k = int(sol.num_jumps)
        assert np.all(np.diff(np.asarray(sol.times[:k])) > 0)
        assert np.all(np.diff(np.asarray(sol.losses[:k])) < 0)


def test_jumps_are_scale_free_in_labels_and_inputs():
    # the jump times scale as 1 / (X^T y): ties are told apart relative to that scale (an
    # absolute 1e-12 merged every jump of labels x 1e20, the l1 norm 31% above the LP's)
    X = jax.random.normal(jax.random.PRNGKey(2), (3, 6))
    y = X[:, :2] @ jnp.array([1.0, -2.0])
    base = diagonal_jumps(X, y)
    l1 = np.abs(_min_l1(X, y)).sum()
    assert base.ok and int(base.num_jumps) == 3
    for sy, sx in ((1e20, 1.0), (1.0, 1e100), (1e-100, 1.0), (1e150, 1.0)):
        sol = diagonal_jumps(X * sx, y * sy)
        assert sol.ok and int(sol.num_jumps) == 3, (sy, sx)
        np.testing.assert_allclose(float(sol.l1_norm), l1 * sy / sx, rtol=1e-12)
        np.testing.assert_allclose(sol.times[:3] * sy * sx, base.times[:3], rtol=1e-12)


def test_jumps_converge_to_the_flow_at_rate_one_over_log_inverse_alpha():
    X, y = _sparse_problem()
    pred = diagonal_jumps(X, y)
    k = int(pred.num_jumps)
    ts = jnp.linspace(0.0, 1.3 * float(pred.times[k - 1]), 1201)
    taus, errors = [], []
    for log10 in (10, 100, 1000):  # alpha down to 10^-1000
        tau = log10 * np.log(10.0)
        sol = diagonal_flow(X, y, ts, time_scale=tau)
        assert sol.ok
        errors.append(
            np.abs(np.asarray(crossing_times(ts, sol.loss, pred))[:k] - pred.times[:k]).max()
        )
        taus.append(tau)
    slope = np.polyfit(np.log(1.0 / np.array(taus)), np.log(errors), 1)[0]
    assert errors[-1] < 5e-3 and 0.8 < slope < 1.2, (errors, slope)
    np.testing.assert_allclose(sol.final_beta, pred.final_beta, atol=5e-3)


@pytest.mark.slow
def test_first_jump_finite_alpha_correction():
    X, y = _sparse_problem()
    pred = diagonal_jumps(X, y)
    t1 = float(pred.times[0])
    ts = jnp.linspace(0.0, 1.2 * t1, 2001)
    for alpha in (1e-4, 1e-12):
        sol = diagonal_flow(X, y, ts, time_scale=-np.log(alpha))
        measured = float(crossing_times(ts, sol.loss, pred)[0])
        limit_error = abs(measured - t1)
        corrected_error = abs(measured - float(pred.first_time_finite_alpha(alpha)))
        assert corrected_error < 2e-4 and corrected_error < limit_error / 20


def test_first_time_finite_alpha_range_subnormals_and_no_jump():
    sol = diagonal_jumps(jnp.eye(2), jnp.array([2.0, -1.0]))
    # the closed form at alpha = 1e-320 (subnormal: XLA would flush it to 0 and give t_1)
    r, cap = float(sol.first_rate), float(sol.first_capacity)
    expected = float(sol.times[0]) + (np.log(cap) - np.log1p(np.sqrt(2))) / (
        4 * r * -np.log(1e-320)
    )
    assert abs(float(sol.first_time_finite_alpha(1e-320)) - expected) < 1e-15
    assert float(sol.first_time_finite_alpha(1e-320)) != float(sol.times[0])
    for alpha in (1.0, 2.0, 0.0, -0.5):
        with pytest.raises(ValueError, match="`alpha` must lie in"):
            sol.first_time_finite_alpha(alpha)
    with pytest.raises(ValueError, match="`alpha` must have shape"):
        sol.first_time_finite_alpha(jnp.array([0.1, 0.2]))
    # no coordinate ever jumps (X^T y = 0): inf, not nan
    assert np.isposinf(diagonal_jumps(jnp.eye(2), jnp.zeros(2)).first_time_finite_alpha(0.1))


@pytest.mark.slow
def test_log_form_matches_gradient_flow_on_the_network():
    X, y = _sparse_problem()
    ts = jnp.linspace(0.0, 0.8, 81)
    for alpha in (1e-3, 1e-30):
        model = diagonal_init(X.shape[1], alpha)
        tau = -np.log(alpha)
        flow = gradient_flow(
            model, unchecked.diagonal_loss, ts, args=(X, y), time_scale=tau,
            units=diagonal_units(model),
        )  # fmt: skip
        exact = diagonal_flow(X, y, ts, time_scale=tau)
        assert flow.ok and exact.ok
        np.testing.assert_allclose(np.log(flow.loss), np.log(exact.loss), atol=1e-4)


@pytest.mark.slow
def test_vmap_over_datasets_and_padding():
    Xs = jnp.stack([_sparse_problem(seed=s)[0] for s in range(3)])
    ys = jnp.stack([_sparse_problem(seed=s)[1] for s in range(3)])
    sols = jax.vmap(lambda X, y: diagonal_jumps(X, y, max_jumps=20))(Xs, ys)
    for s in range(3):
        one = diagonal_jumps(Xs[s], ys[s], max_jumps=20)
        np.testing.assert_allclose(sols.times[s], one.times)
        k = int(one.num_jumps)
        assert (one.betas[k:] == one.final_beta).all()
    short = diagonal_jumps(Xs[0], ys[0], max_jumps=2)
    assert short.result == RESULTS.max_jumps_reached and not short.ok
    with pytest.raises(Exception, match="max_jumps"):
        diagonal_jumps(Xs[0], ys[0], max_jumps=2, throw=True)


def test_model_loss_and_units():
    net = DiagonalNet(jnp.array([1.0, 2.0]), jnp.array([0.5, 3.0]))
    X, y = jnp.eye(2), jnp.array([0.75, -5.0])
    assert float(diagonal_loss(net, (X, y))) == 0.0
    assert float(unchecked.diagonal_loss(net, (X, y + 1.0))) == 0.5
    assert diagonal_units(net).u.tolist() == [0, 1]


def test_no_signal_means_no_jump():
    # X = 0 (G = 0): no jump, ok; not refused as out of float's range
    sol = diagonal_jumps(jnp.zeros((2, 2)), jnp.ones(2))
    assert sol.ok and int(sol.num_jumps) == 0
