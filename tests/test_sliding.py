import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import relu_mlp_problem

from integrators import gradient_flow
from theory import RESULTS


def _zero_linear(out):
    model = eqx.nn.Linear(1, out, use_bias=False, key=jax.random.PRNGKey(0))
    return eqx.tree_at(lambda m: m.weight, model, jnp.zeros((out, 1)))


@pytest.mark.slow  # default-run budget: the capability keeps other default tests
def test_a_kink_pushed_from_both_sides_is_slid_on():
    # d w/dt = -sign(w - 1/2): w reaches the kink at t = 1/2 and stays there (Filippov)
    def loss(m, args):
        return jnp.abs(m.weight[0, 0] - 0.5)

    ts = jnp.linspace(0.0, 2.0, 5)
    sol = gradient_flow(_zero_linear(1), loss, ts)
    assert sol.ok and int(sol.stats["sliding_entries"]) == 1
    np.testing.assert_allclose(sol.loss, [0.5, 0.0, 0.0, 0.0, 0.0], atol=1e-6)
    assert sol.stats["num_steps"] < 200


@pytest.mark.slow  # default-run budget: the regrowth above keeps the capability's default test
def test_max_sliding_caps_the_slots():
    # the same 40 entries with `max_sliding=8`: the ninth to slide ends the solve, t ~ 0.45
    c = 0.05 * jnp.arange(1, 41)

    def loss(m, args):
        return jnp.sum(jnp.abs(m.weight[:, 0] - c))

    cut = gradient_flow(_zero_linear(40), loss, jnp.linspace(0.0, 2.5, 6), max_sliding=8)
    assert cut.result == RESULTS.kink_limited
    assert 0.45 <= float(cut.stats["kink_time"]) < 0.5


@pytest.mark.slow
def test_a_sliding_relu_mlp_against_gradient_descent_extrapolated_to_step_0():
    # a ReLU MLP with biases whose flow slides on two entries (plain Tsit5 at tol 1e-9 runs
    # out of 100,000 steps there): against GD at lr 2e-4 and 1e-4, extrapolated
    mlp, loss, (X, y) = relu_mlp_problem(16, 8, bias=True)
    ts = np.linspace(0.0, 3.0, 31)
    sol = gradient_flow(mlp, loss, jnp.asarray(ts), args=(X, y), rtol=1e-9, atol=1e-9)
    assert sol.ok and int(sol.stats["sliding_entries"]) >= 1
    params, static = eqx.partition(mlp, eqx.is_inexact_array)

    def gd(lr):
        def body(p, _):
            g = jax.grad(lambda q: loss(eqx.combine(q, static), (X, y)))(p)
            return jax.tree_util.tree_map(lambda a, b: a - lr * b, p, g), loss(
                eqx.combine(p, static), (X, y)
            )

        steps = np.rint(ts / lr).astype(int)
        _, losses = jax.lax.scan(body, params, None, length=int(steps[-1]) + 1)
        return np.asarray(losses)[steps]

    reference = 2 * gd(1e-4) - gd(2e-4)
    np.testing.assert_allclose(sol.loss, reference, rtol=2e-5)
