import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import orthogonal_instance

from dynamics import (
    balanced_init,
    half_squared_norm,
    he_uniform_init,
    orthogonal_data,
    signs_and_directions,
    square_loss,
)
from integrators import orthogonal_flow
from theory import RESULTS, crossing_times, saddle_jumps

_instance = orthogonal_instance


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
    sol = orthogonal_flow(X, y, model, ts, time_scale=10.0, save_trajectory=True)
    assert bool(sol.ok)
    c = jax.vmap(_balance)(sol.trajectory)
    scale = jnp.max(jnp.abs(sol.model.a)) ** 2
    np.testing.assert_allclose(c, jnp.broadcast_to(_balance(model), c.shape), atol=1e-6 * scale)
    assert sol.loss[-1] < 0.1 * sol.loss[0]  # it did move
    np.testing.assert_allclose(sol.trajectory.a[-1], sol.model.a)


@pytest.mark.slow  # the main job's --quick run checks the same in the default run
def test_flow_matches_algorithm_1_at_alpha_1e30():
    keys = jax.random.split(jax.random.PRNGKey(0), 6)
    X, y, model = jax.vmap(lambda k: _instance(k, 8, 16, 1e-30))(keys)
    pred = jax.vmap(saddle_jumps)(y, *jax.vmap(signs_and_directions)(model, X))
    ts = jax.vmap(lambda p: jnp.linspace(0.0, p.horizon(1.15), 1500))(pred)
    sol = jax.jit(
        jax.vmap(lambda X, y, m, ts: orthogonal_flow(X, y, m, ts, time_scale=jnp.log(1e30)))
    )(X, y, model, ts)
    assert bool(jnp.all(sol.ok))
    measured = jax.vmap(crossing_times)(ts, sol.loss, pred)
    real = jnp.isfinite(pred.times)
    rel = jnp.abs(measured / pred.times - 1)[real]
    assert not jnp.any(jnp.isnan(rel)), "every predicted jump must be seen in the simulation"
    assert jnp.median(rel) < 0.02 and jnp.max(rel) < 0.15
    cost = jax.vmap(half_squared_norm)(sol.model)
    assert jnp.max(jnp.abs(cost / pred.cost - 1)) < 0.05


def test_failed_solve_is_reported_not_nan():
    X, y, model = _instance(jax.random.PRNGKey(2), 6, 8, 1e-30)
    ts = jnp.linspace(0.0, 50.0, 20)
    sol = orthogonal_flow(X, y, model, ts, time_scale=69.0, max_steps=5)
    assert not bool(sol.ok) and sol.result == RESULTS.max_steps_reached
    assert int(sol.stats["num_steps"]) == 5
    assert not jnp.any(jnp.isnan(sol.loss))
    assert jnp.isinf(sol.loss[-1])
    with pytest.raises(Exception, match="maximum number of solver steps"):
        orthogonal_flow(X, y, model, ts, time_scale=69.0, max_steps=5, throw=True)


def test_flow_requires_orthonormal_rows():
    X, y, model = _instance(jax.random.PRNGKey(2), 6, 8, 1e-3)
    ts = jnp.linspace(0.0, 1.0, 3)
    with pytest.raises(ValueError, match="X"):
        orthogonal_flow(2.0 * X, y, model, ts)
    with pytest.raises(ValueError, match="`y`"):
        orthogonal_flow(X, y[:5], model, ts)
    with pytest.raises(ValueError, match="time_scale"):
        orthogonal_flow(X, y, model, ts, time_scale=0.0)


@pytest.mark.slow  # default-run budget: the capability keeps other default tests
def test_stats_and_solver_options():
    import diffrax

    X, y, model = _instance(jax.random.PRNGKey(2), 6, 8, 1e-3)
    ts = jnp.linspace(0.0, 2.0, 5)
    sol = orthogonal_flow(X, y, model, ts, time_scale=6.9)
    stats = sol.stats
    assert int(stats["num_steps"]) == int(stats["num_accepted_steps"] + stats["num_rejected_steps"])
    other = orthogonal_flow(
        X,
        y,
        model,
        ts,
        time_scale=6.9,
        solver=diffrax.Tsit5(),
        stepsize_controller=diffrax.PIDController(rtol=1e-9, atol=1e-9),
    )
    assert bool(other.ok)
    np.testing.assert_allclose(other.loss, sol.loss, rtol=1e-5)
    assert float(sol.time_scale) == pytest.approx(6.9)


def _plain_gd_losses(X, y, model, eta, checkpoints, every):
    """GD on (a, W) themselves with the given X (no data basis): the dynamics of that X."""
    grad = jax.grad(lambda m: square_loss(m, (X, y)))

    def checkpoint(m, _):
        m, _ = jax.lax.scan(
            lambda m, _: (jax.tree_util.tree_map(lambda p, g: p - eta * g, m, grad(m)), None),
            m,
            None,
            length=every,
        )
        return m, square_loss(m, (X, y))

    return jax.jit(lambda m: jax.lax.scan(checkpoint, m, None, length=checkpoints)[1])(model)


@pytest.mark.slow
@pytest.mark.parametrize("alpha, eta, agrees", [(1e-8, 0.02, True), (1e-30, 0.05, False)])
def test_which_dynamics_the_orthonormal_flow_integrates(alpha, eta, agrees):
    # The flow integrates the idealized dynamics of exactly orthonormal inputs. The flow of a
    # given X differs once max |X X^T - I| is not far below alpha: coupled frozen components
    # get pushed across the kink as neurons grow, waking samples the ideal flow never fits.
    n, d, m = 8, 12, 16
    kx, kw, ke = jax.random.split(jax.random.PRNGKey(0), 3)
    Q, y = orthogonal_data(n, d, key=kx)
    X = Q + 1e-14 * jax.random.normal(ke, Q.shape)  # coupling ~ 3e-14
    assert 1e-15 < float(jnp.max(jnp.abs(X @ X.T - jnp.eye(n)))) < 1e-13
    model = balanced_init(m, d, alpha, key=kw)
    tau = float(np.log(1 / alpha))
    pred = saddle_jumps(y, *signs_and_directions(model, Q))
    every = 100
    checkpoints = int(np.ceil(float(pred.horizon(1.3)) * tau / eta / every))
    gd = _plain_gd_losses(X, y, model, eta, checkpoints, every)
    ts = jnp.arange(1, checkpoints + 1) * every * eta / tau  # rescaled time of each checkpoint
    grid = jnp.concatenate([jnp.zeros(1), ts])  # the flow starts from `model` at grid[0] = 0
    flow = orthogonal_flow(Q, y, model, grid, time_scale=tau, rtol=1e-10, atol=1e-10)
    k = int(pred.num_jumps)
    t_gd, t_flow = crossing_times(ts, gd, pred)[:k], crossing_times(ts, flow.loss[1:], pred)[:k]
    rel = np.asarray(jnp.abs(t_gd / t_flow - 1))
    if agrees:  # coupling 3e-14 far below alpha = 1e-8: the same dynamics, to GD's step error
        assert np.nanmax(rel) < 0.01
    else:  # coupling 3e-14 far above alpha = 1e-30: the last jump comes many times earlier
        assert np.nanmax(rel) > 0.5


def _shift_runs():
    from dynamics import MeanFieldNet, TwoLayerReLU, square_loss, standard_target
    from integrators import gradient_flow, mean_field_flow, two_layer_flow, vanishing_flow

    X, y = jnp.eye(2), jnp.array([1.0, -0.5])
    model = TwoLayerReLU(jnp.array([0.3, -0.2]), jnp.array([[0.3, 0.1], [0.1, -0.2]]))
    return {
        "orthogonal_flow": lambda t: orthogonal_flow(X, y, model, t).loss,
        "two_layer_flow": lambda t: two_layer_flow(X, y, model, t).loss,
        "gradient_flow": lambda t: gradient_flow(model, square_loss, t, args=(X, y)).loss,
        "vanishing_flow": lambda t: (
            vanishing_flow(y, jnp.array([1.0, -1.0]), jnp.eye(2), t, time_scale=10.0).loss
        ),
        "mean_field_flow": lambda t: (
            mean_field_flow(standard_target(1, 3), MeanFieldNet(jnp.eye(2, 3)), t).loss
        ),
    }


@pytest.mark.parametrize(
    "name",
    ["orthogonal_flow"]
    + [
        pytest.param(n, marks=pytest.mark.slow)
        for n in ("two_layer_flow", "gradient_flow", "vanishing_flow", "mean_field_flow")
    ],
)
def test_every_flow_starts_at_the_first_save_time(name):
    # the flows are autonomous: a grid shifted by 1 gives the same path (all but gradient_flow
    # once started at t = 0 whatever ts[0] was)
    run = _shift_runs()[name]
    ts = jnp.array([0.0, 0.5, 1.0])
    np.testing.assert_allclose(run(ts + 1.0), run(ts), rtol=1e-6)
