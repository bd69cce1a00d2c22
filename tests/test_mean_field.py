import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics import MeanFieldNet, mean_field_init, population_loss, standard_target
from integrators import check_memory, mean_field_flow
from theory import RESULTS


@pytest.mark.slow
def test_flow_decreases_the_loss_and_follows_the_plain_gradient():
    target = standard_target(2, 6)
    net = mean_field_init(12, 6, key=jax.random.PRNGKey(0))
    ts = jnp.array([0.0, 1e-4, 2.0])
    sol = mean_field_flow(target, net, ts, weight_decay=0.1)
    assert bool(sol.ok) and sol.result == RESULTS.successful
    assert np.all(np.diff(np.asarray(sol.loss)) < 0)
    # the first short step is the Euler step of dW/dt = -lambda W - m grad L
    grad = jax.grad(lambda W: population_loss(MeanFieldNet(W), target))(net.W)
    field = -0.1 * net.W - 12 * grad
    np.testing.assert_allclose(
        population_loss(MeanFieldNet(net.W + 1e-4 * field), target), sol.loss[1], rtol=1e-6
    )
    assert int(sol.stats["num_steps"]) > 0 and isinstance(sol.model, MeanFieldNet)


@pytest.mark.slow
def test_finite_sample_flow_follows_the_population_flow():
    d, r, m, n = 10, 2, 24, 40_000
    target = standard_target(r, d)
    net = mean_field_init(m, d, key=jax.random.PRNGKey(0))
    X = jax.random.normal(jax.random.PRNGKey(1), (n, d))
    ts = jnp.linspace(0.0, 1.0, 11)
    pop = mean_field_flow(target, net, ts, weight_decay=0.5)
    fin = mean_field_flow(
        target, net, ts, weight_decay=0.5, samples=(X, target.predict(X)), batch_size=10_000
    )
    assert bool(pop.ok) and bool(fin.ok)
    np.testing.assert_allclose(fin.loss, pop.loss, rtol=0.05)
    np.testing.assert_allclose(fin.alpha, pop.alpha, rtol=0.02)


def test_bad_inputs_and_throw():
    target = standard_target(2, 4)
    ts = jnp.linspace(0, 1, 3)
    with pytest.raises(ValueError, match="weight_decay"):
        mean_field_flow(target, MeanFieldNet(jnp.ones((3, 4))), ts, weight_decay=-1.0)
    with pytest.raises(ValueError, match="activation"):
        mean_field_flow(target, MeanFieldNet(jnp.ones((3, 4)), "relu"), ts)
    net = mean_field_init(5, 4, key=jax.random.PRNGKey(0))
    with pytest.raises(Exception, match="maximum number"):
        mean_field_flow(target, net, jnp.array([0.0, 50.0]), max_steps=2, throw=True)


def test_memory_check_refuses_before_running():
    with pytest.raises(MemoryError, match="GiB"):
        check_memory(10**10, 100, 250, 5000)
    assert check_memory(1000, 10, 20, 100) > 0
