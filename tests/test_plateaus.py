import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theory import loss_plateaus


def test_a_synthetic_staircase_on_a_nonuniform_grid():
    ts = np.r_[np.linspace(0.0, 2.0, 50), np.geomspace(2.01, 20.0, 3000)]
    drops = [(3.0, 0.5), (7.0, 0.3), (12.0, 0.15)]
    loss = 1.0 - sum(h / (1 + np.exp(-6 * (ts - t))) for t, h in drops)
    found = loss_plateaus(ts, loss)
    np.testing.assert_allclose(found["levels"], [1.0, 0.5, 0.2, 0.05], atol=1e-6)
    # the midpoint crossing of a logistic drop of h from L_0: solve L = L_0 - h / 2
    np.testing.assert_allclose(found["times"], [t for t, _ in drops], atol=2e-3)
    assert np.all(found["starts"] < found["times"]) and np.all(found["times"] < found["ends"])
    # a tiny wiggle is not a jump
    assert loss_plateaus(ts, 1.0 + 0.01 * np.sin(ts))["times"].size == 0


@pytest.mark.slow
def test_the_flows_plateaus_are_algorithm_1s():
    from dynamics import balanced_init, orthogonal_data, signs_and_directions
    from integrators import orthogonal_flow
    from theory import crossing_times, saddle_jumps

    X, y = orthogonal_data(8, key=jax.random.PRNGKey(0), dtype=jnp.float64)
    model = balanced_init(17, 8, 1e-30, key=jax.random.PRNGKey(1), dtype=jnp.float64)
    pred = saddle_jumps(y, *signs_and_directions(model, X))
    ts = jnp.linspace(0.0, float(pred.horizon(1.15)), 4000)
    sol = orthogonal_flow(X, y, model, ts, time_scale=np.log(1e30))
    found = loss_plateaus(np.asarray(ts), np.asarray(sol.loss))
    k = int(pred.num_jumps)
    expected = np.r_[float(pred.initial_plateau), np.asarray(pred.plateaus[:k])]
    # every jump drops the loss by > 5% here, so every one is found without the theory
    assert found["times"].size == k
    np.testing.assert_allclose(found["levels"][:-1], expected[:-1], rtol=2e-2)
    np.testing.assert_allclose(found["times"], crossing_times(ts, sol.loss, pred)[:k], rtol=2e-2)
