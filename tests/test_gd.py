import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import orthogonal_instance

from dynamics import TwoLayerReLU, he_uniform_init, orthogonal_data
from integrators import (
    checkpoint_steps,
    gradient_descent,
    orthogonal_flow,
    stable_gradient_descent,
)
from theory import RESULTS

_instance = orthogonal_instance


@pytest.mark.slow
def test_gradient_descent_follows_the_flow_at_small_step():
    X, y, model = _instance(jax.random.PRNGKey(5), 8, 16, 0.05)
    eta = 0.01
    gd = gradient_descent(X, y, model, learning_rate=eta, tol=0.0, max_steps=30_000)
    flow = orthogonal_flow(X, y, model, gd.steps * eta)  # ordinary time t = k eta
    assert bool(flow.ok)
    assert gd.loss[-1] < 1e-8 * gd.loss[0]  # the run went through all its jumps
    np.testing.assert_allclose(gd.loss, flow.loss, atol=2e-3 * float(gd.loss[0]))
    big = flow.loss > 1e-4
    np.testing.assert_allclose(gd.loss[big], flow.loss[big], rtol=0.02)


def test_gradient_descent_stops_at_tolerance_and_vmaps():
    keys = jax.random.split(jax.random.PRNGKey(1), 3)
    X, y, model = jax.vmap(lambda k: _instance(k, 8, 20, 1e-10))(keys)
    run = jax.jit(
        jax.vmap(lambda X, y, m: gradient_descent(X, y, m, learning_rate=0.5, max_steps=100_000))
    )
    sol = run(X, y, model)
    assert sol.steps.shape == sol.loss.shape == (3, sol.loss.shape[1])
    for s in range(3):
        if sol.ok[s]:
            assert sol.final_loss[s] <= 1e-10 and sol.stats["num_steps"][s] < 100_000
            assert sol.loss[s, -1] == sol.final_loss[s]
        else:
            assert sol.result[s] == RESULTS.max_steps_reached
    assert bool(jnp.any(sol.ok))


def test_gradient_descent_refuses_underflowing_float32_parameters():

    X, y = orthogonal_data(4, key=jax.random.PRNGKey(0), dtype=jnp.float32)
    tiny = TwoLayerReLU(jnp.full(3, 1e-30, jnp.float32), jnp.full((3, 4), 1e-30, jnp.float32))
    with pytest.raises(ValueError, match="float32"):
        gradient_descent(X, y, tiny, learning_rate=0.5)


def test_gradient_descent_stops_when_it_diverges():
    X, y = orthogonal_data(8, key=jax.random.PRNGKey(3))
    model = he_uniform_init(16, 8, key=jax.random.PRNGKey(4))
    stable = gradient_descent(X, y, model, learning_rate=0.5, max_steps=2_000, max_loss=1e3)
    assert stable.result != RESULTS.diverged
    wild = gradient_descent(X, y, model, learning_rate=1e3, max_steps=100_000, max_loss=1e3)
    assert wild.result == RESULTS.diverged and not bool(wild.ok)
    assert int(wild.stats["num_steps"]) < 100  # it stopped at the blow-up, not at max_steps
    with pytest.raises(Exception, match="diverged"):
        gradient_descent(X, y, model, learning_rate=1e3, max_steps=1000, max_loss=1e3, throw=True)
    with pytest.raises(ValueError, match="learning_rate"):  # refused before any step
        gradient_descent(X, y, model, learning_rate=float("nan"), max_steps=1000)


def test_stable_step_search_halves_until_stable():
    X, y = orthogonal_data(8, key=jax.random.PRNGKey(3))
    model = he_uniform_init(16, 8, key=jax.random.PRNGKey(4))
    sol = stable_gradient_descent(X, y, model, max_steps=20_000)
    assert bool(sol.ok)
    from dynamics import tangent_kernel_max

    top = float(tangent_kernel_max(model, X))
    k = np.log2(1.0 / (top * float(sol.learning_rate)))
    assert k == pytest.approx(round(k)) and round(k) >= 0  # a power-of-two fraction of 1/lambda
    same = stable_gradient_descent(X, y, model, kernel_max=top, max_steps=20_000)
    assert float(same.learning_rate) == float(sol.learning_rate)


def test_checkpoints():
    assert checkpoint_steps(1000, 4).tolist() == [1, 10, 100, 1000]
    assert checkpoint_steps(5, 100).tolist() == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="num_checkpoints"):
        checkpoint_steps(10, 0)
    with pytest.raises(ValueError, match="max_steps"):
        checkpoint_steps(0, 3)


def _numpy_gd(X, y, a, W, eta, steps):
    """An independent reference: GD on (a, W) written out by hand in numpy, relu'(0) = 0."""
    X, y, a, W = (np.asarray(v, np.float64) for v in (X, y, a, W))
    n = len(y)
    for _ in range(steps):
        Z = W @ X.T
        act = np.maximum(Z, 0.0)
        r = a @ act - y
        ga = act @ r / n
        gW = (a[:, None] * (Z > 0) * r[None, :] / n) @ X
        a, W = a - eta * ga, W - eta * gW
    r = a @ np.maximum(W @ X.T, 0.0) - y
    return a, W, 0.5 * np.mean(r * r)


@pytest.mark.parametrize("inputs", ["more_samples", "correlated", "duplicated"])
def test_gradient_descent_on_any_inputs_is_gd_on_those_inputs(inputs):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(7), 3)
    n, d = {"more_samples": (12, 5), "correlated": (6, 6), "duplicated": (6, 8)}[inputs]
    X = jax.random.normal(k1, (n, d)) / np.sqrt(d)
    if inputs == "correlated":
        X = X + 0.8 * X[:1]
    if inputs == "duplicated":
        X = X.at[3].set(X[0])
    y = jax.random.normal(k2, (n,))
    model = he_uniform_init(10, d, key=k3)
    sol = gradient_descent(X, y, model, learning_rate=0.05, max_steps=300, tol=0.0)
    a, W, loss = _numpy_gd(X, y, model.a, model.W, 0.05, 300)
    assert int(sol.stats["num_steps"]) == 300
    np.testing.assert_allclose(sol.model.a, a, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sol.model.W, W, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sol.final_loss, loss, rtol=1e-10)
    # the same run under jit and vmap (X traced: say which dynamics)
    run = jax.jit(
        lambda X: (
            gradient_descent(
                X, y, model, learning_rate=0.05, max_steps=300, tol=0.0, orthonormal=False
            ).final_loss
        )
    )
    np.testing.assert_allclose(run(X), loss, rtol=1e-10)
    np.testing.assert_allclose(jax.vmap(run)(jnp.stack([X, X])), [loss, loss], rtol=1e-10)


def test_gradient_descent_picks_the_data_basis_on_orthonormal_inputs():
    X, y = orthogonal_data(8, key=jax.random.PRNGKey(3))
    model = he_uniform_init(16, 8, key=jax.random.PRNGKey(4))
    basis = gradient_descent(X, y, model, learning_rate=0.3, max_steps=500, tol=0.0)
    plain = gradient_descent(
        X, y, model, learning_rate=0.3, max_steps=500, tol=0.0, orthonormal=False
    )
    np.testing.assert_allclose(basis.final_loss, plain.final_loss, rtol=1e-9)
    np.testing.assert_allclose(basis.model.W, plain.model.W, rtol=1e-8, atol=1e-12)
    # inside jit X is traced: the data basis by default, refused for other inputs
    with pytest.raises(Exception, match="orthonormal=False"):
        eqx.filter_jit(lambda X: gradient_descent(X, y, model, learning_rate=0.3).final_loss)(2 * X)
