import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics import balanced_init, he_uniform_init, orthogonal_data, signs_and_directions
from integrators import gradient_descent, gradient_flow
from theory import crossing_times, saddle_jumps


def _instance(key, n, m, alpha, d=None):
    kx, kw = jax.random.split(key)
    X, y = orthogonal_data(n, d, key=kx)
    return X, y, balanced_init(m, X.shape[1], alpha, key=kw)


def _balance(model):
    return model.a**2 - jnp.sum(model.W**2, axis=-1)


@pytest.mark.parametrize("init", ["balanced", "he"])
def test_conservation_law(init):
    # a_j^2 - ||w_j||^2 is conserved by the flow (2-homogeneity of each neuron).
    kx, kw = jax.random.split(jax.random.PRNGKey(7))
    X, y = orthogonal_data(6, 9, key=kx)
    if init == "he":
        model = he_uniform_init(10, 9, key=kw)
    else:
        model = balanced_init(10, 9, 1e-3, key=kw)
    ts = jnp.linspace(0.0, 30.0 if init == "balanced" else 5.0, 50)
    sol = gradient_flow(model, X, y, ts, time_scale=10.0, save_params=True)
    assert bool(sol.ok)
    c = jax.vmap(_balance)(sol.trajectory)
    scale = jnp.max(jnp.abs(sol.model.a)) ** 2
    np.testing.assert_allclose(c, jnp.broadcast_to(_balance(model), c.shape), atol=1e-6 * scale)
    assert sol.loss[-1] < 0.1 * sol.loss[0]  # it did move
    np.testing.assert_allclose(sol.trajectory.a[-1], sol.model.a)


def test_flow_matches_algorithm_1_at_alpha_1e30():
    keys = jax.random.split(jax.random.PRNGKey(0), 6)
    X, y, model = jax.vmap(lambda k: _instance(k, 8, 16, 1e-30))(keys)
    pred = jax.vmap(saddle_jumps)(y, *jax.vmap(signs_and_directions)(model, X))
    last = jnp.max(jnp.where(jnp.isfinite(pred.times), pred.times, 0.0), axis=1)
    ts = jax.vmap(lambda t: jnp.linspace(0.0, 1.15 * t, 1500))(last)
    sol = jax.jit(
        jax.vmap(lambda m, X, y, ts: gradient_flow(m, X, y, ts, time_scale=jnp.log(1e30)))
    )(model, X, y, ts)
    assert bool(jnp.all(sol.ok))
    measured = jax.vmap(crossing_times)(ts, sol.loss, pred)
    real = jnp.isfinite(pred.times)
    rel = jnp.abs(measured / pred.times - 1)[real]
    assert not jnp.any(jnp.isnan(rel)), "every predicted jump must be seen in the simulation"
    assert jnp.median(rel) < 0.02 and jnp.max(rel) < 0.15
    cost = 0.5 * (jnp.sum(sol.model.a**2, axis=1) + jnp.sum(sol.model.W**2, axis=(1, 2)))
    assert jnp.max(jnp.abs(cost / pred.cost - 1)) < 0.05


def test_gradient_descent_follows_the_flow_at_small_step():
    X, y, model = _instance(jax.random.PRNGKey(5), 8, 16, 0.05)
    eta = 0.01
    gd = gradient_descent(model, X, y, learning_rate=eta, tol=0.0, max_steps=30_000)
    flow = gradient_flow(model, X, y, gd.steps * eta)  # ordinary time t = k eta
    assert bool(flow.ok)
    assert gd.loss[-1] < 1e-8 * gd.loss[0]  # the run went through all its jumps
    np.testing.assert_allclose(gd.loss, flow.loss, atol=2e-3 * float(gd.loss[0]))
    big = flow.loss > 1e-4
    np.testing.assert_allclose(gd.loss[big], flow.loss[big], rtol=0.02)


def test_gradient_descent_stops_at_tolerance_and_vmaps():
    keys = jax.random.split(jax.random.PRNGKey(1), 3)
    X, y, model = jax.vmap(lambda k: _instance(k, 8, 20, 1e-10))(keys)
    run = jax.jit(jax.vmap(lambda m, X, y: gradient_descent(m, X, y, max_steps=100_000)))
    sol = run(model, X, y)
    assert sol.steps.shape == sol.loss.shape == (3, sol.loss.shape[1])
    for s in range(3):
        if sol.converged[s]:
            assert sol.final_loss[s] <= 1e-10 and sol.num_steps[s] < 100_000
            assert sol.loss[s, -1] == sol.final_loss[s]
    assert bool(jnp.any(sol.converged))


def test_failed_solve_is_reported_not_nan():
    X, y, model = _instance(jax.random.PRNGKey(2), 6, 8, 1e-30)
    sol = gradient_flow(model, X, y, jnp.linspace(0.0, 50.0, 20), time_scale=69.0, max_steps=5)
    assert not bool(sol.ok)
    assert not jnp.any(jnp.isnan(sol.loss))
    assert jnp.isinf(sol.loss[-1])


def test_flow_requires_orthonormal_rows():
    X, y, model = _instance(jax.random.PRNGKey(2), 6, 8, 1e-3)
    with pytest.raises(ValueError, match="X"):
        gradient_flow(model, 2.0 * X, y, jnp.linspace(0.0, 1.0, 3))
    with pytest.raises(ValueError, match="y"):
        gradient_flow(model, X, y[:5], jnp.linspace(0.0, 1.0, 3))


def test_gradient_descent_refuses_underflowing_float32_parameters():
    from dynamics import TwoLayerReLU

    X, y = orthogonal_data(4, key=jax.random.PRNGKey(0), dtype=jnp.float32)
    tiny = TwoLayerReLU(jnp.full(3, 1e-30, jnp.float32), jnp.full((3, 4), 1e-30, jnp.float32))
    with pytest.raises(ValueError, match="float32"):
        gradient_descent(tiny, X, y)


def test_gradient_descent_stops_when_it_diverges():
    X, y = orthogonal_data(8, key=jax.random.PRNGKey(3))
    model = he_uniform_init(16, 8, key=jax.random.PRNGKey(4))
    stable = gradient_descent(model, X, y, learning_rate=0.5, max_steps=2_000, max_loss=1e3)
    assert not bool(stable.diverged)
    wild = gradient_descent(model, X, y, learning_rate=1e3, max_steps=100_000, max_loss=1e3)
    assert bool(wild.diverged) and not bool(wild.converged)
    assert int(wild.num_steps) < 100  # it stopped at the blow-up, not at max_steps
