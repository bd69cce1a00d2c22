import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics import balanced_init, half_squared_norm, orthogonal_data, signs_and_directions
from integrators import orthogonal_flow, vanishing_flow
from theory import crossing_times, jump_time_grid, saddle_jumps


def _instance(key, n=8, m=16, alpha=0.5):
    kx, kw = jax.random.split(key)
    X, y = orthogonal_data(n, key=kx)
    model = balanced_init(m, n, alpha, key=kw)
    return X, y, model, *signs_and_directions(model, X)


def _horizon(pred, factor=1.3):
    return float(pred.horizon(factor))


@pytest.mark.slow
def test_agrees_with_the_plain_flow_at_alpha_1e30():
    X, y, model, signs, dirs = _instance(jax.random.PRNGKey(3), alpha=1e-30)
    tau = float(jnp.log(1e30))
    pred = saddle_jumps(y, signs, dirs)
    ts = jnp.linspace(0.0, _horizon(pred), 300)
    tol = 1e-12
    plain = orthogonal_flow(X, y, model, ts, time_scale=tau, rtol=tol, atol=tol)
    sol = vanishing_flow(y, signs, dirs, ts, time_scale=tau, rtol=tol, atol=tol)
    assert bool(plain.ok) and bool(sol.ok)
    floor = pred.final_loss  # uncovered samples stay unfitted
    assert plain.loss[-1] < floor + 1e-10 * plain.loss[0]  # every jump happened
    # pointwise relative agreement of the loss curve, down to 1e-8 of the initial loss (below
    # that, the exponentially decaying tail turns rounding-level differences into large ratios)
    big = plain.loss > 1e-8 * plain.loss[0]
    np.testing.assert_allclose(sol.loss[big], plain.loss[big], rtol=1e-6)
    back = sol.to_model(X)
    for ours, theirs in ((back.a, plain.model.a), (back.W, plain.model.W)):
        assert jnp.max(jnp.abs(ours - theirs)) <= 1e-6 * jnp.max(jnp.abs(theirs))
    cost = half_squared_norm(plain.model)
    np.testing.assert_allclose(sol.cost[-1], cost, rtol=1e-6)


@pytest.mark.slow
def test_reaches_the_limit_at_alpha_10_to_minus_10000():
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    _, y, _, signs, dirs = jax.vmap(lambda k: _instance(k))(keys)
    pred = jax.vmap(saddle_jumps)(y, signs, dirs)
    tau = 1e4 * jnp.log(10.0)
    t1 = jax.vmap(lambda p: p.horizon(1.3))(pred)
    ts = jax.vmap(lambda p, t: jump_time_grid(p, t, time_scale=tau, num=500, window_points=128))(
        pred, t1
    )
    run = jax.jit(jax.vmap(lambda y, s, d, ts: vanishing_flow(y, s, d, ts, time_scale=tau)))
    sol = run(y, signs, dirs, ts)
    assert bool(jnp.all(sol.ok))
    assert bool(jnp.all(jnp.isfinite(sol.loss))) and bool(jnp.all(jnp.isfinite(sol.exponents)))
    measured = jax.vmap(crossing_times)(ts, sol.loss, pred)
    real = jnp.isfinite(pred.times)
    rel = jnp.abs(measured / pred.times - 1)[real]
    assert not jnp.any(jnp.isnan(rel))
    assert jnp.median(rel) < 1e-3 and jnp.max(rel) < 1e-2
    np.testing.assert_allclose(sol.cost[:, -1], pred.cost, rtol=1e-3)
    # every neuron that Algorithm 1 fires ends at ell = 0 (unfired neurons with the same
    # support as a fired one tie with it exactly, share its samples and end there too)
    for s in range(4):
        fired = np.asarray(pred.neurons[s])[np.asarray(pred.neurons[s]) >= 0]
        assert np.all(np.abs(np.asarray(sol.final_exponents[s])[fired]) < 1e-3)


@pytest.mark.slow  # an integration check; the default run keeps its unit tests
def test_to_model_underflows_to_zero_not_nan():
    _, y, _, signs, dirs = _instance(jax.random.PRNGKey(1))
    sol = vanishing_flow(y, signs, dirs, jnp.linspace(0.0, 1.0, 5), time_scale=1e4)
    X = jnp.eye(8)
    model = sol.to_model(X)
    assert bool(jnp.all(model.a == 0)) and bool(jnp.all(model.W == 0))
    assert bool(jnp.all(sol.exponents[-1] < -0.5))


@pytest.mark.parametrize("bad", [0.0, -3.0, float("nan"), float("inf")])
def test_refuses_bad_time_scale(bad):
    _, y, _, signs, dirs = _instance(jax.random.PRNGKey(2))
    with pytest.raises(ValueError, match="time_scale"):
        vanishing_flow(y, signs, dirs, jnp.linspace(0.0, 1.0, 3), time_scale=bad)


def test_refuses_bad_shapes_and_signs():
    _, y, _, signs, dirs = _instance(jax.random.PRNGKey(2))
    ts = jnp.linspace(0.0, 1.0, 3)
    with pytest.raises(ValueError, match="directions"):
        vanishing_flow(y, signs, dirs[:, :5], ts, time_scale=10.0)
    with pytest.raises(ValueError, match="signs"):
        vanishing_flow(y, 0.5 * signs, dirs, ts, time_scale=10.0)


@pytest.mark.slow  # default-run budget: the capability keeps other default tests
def test_failure_is_reported_and_throws():
    _, y, _, signs, dirs = _instance(jax.random.PRNGKey(2))
    ts = jnp.linspace(0.0, 5.0, 3)
    sol = vanishing_flow(y, signs, dirs, ts, time_scale=100.0, max_steps=3)
    assert not bool(sol.ok) and int(sol.stats["num_steps"]) == 3
    with pytest.raises(Exception, match="maximum number"):
        vanishing_flow(y, signs, dirs, ts, time_scale=100.0, max_steps=3, throw=True)


@pytest.mark.parametrize("tau", [50.0, 1000 * np.log(10.0)])
def test_a_neuron_aligned_with_its_only_sample_does_not_stall(tau):
    # psi = 1 on one sample makes the direction field exactly 0 * (huge) in oversized trial
    # steps; before the exponent cap that was NaN, and every step was rejected until max_steps
    one = jnp.array([1.0])
    sol = vanishing_flow(one, one, jnp.array([[1.0]]), jnp.linspace(0.0, 2.0, 5), time_scale=tau)
    assert bool(sol.ok) and int(sol.stats["num_steps"]) < 5000
    np.testing.assert_allclose(sol.cost[-1], 1.0, rtol=1e-4)
