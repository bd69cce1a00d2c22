"""`gradient_flow(method="steps")`: Euler levels extrapolated to step 0 (`integrators._stepped`),
and `method="auto"`'s choice."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import relu_mlp_problem

from integrators import gradient_flow, neuron_units
from theory import RESULTS


def _linear():
    model = eqx.nn.Linear(2, 1, use_bias=False, key=jax.random.PRNGKey(0))
    model = jax.tree_util.tree_map(lambda x: x.astype(jnp.float64) if eqx.is_array(x) else x, model)
    x = jnp.array([1.0, 0.0])

    def loss(m, y):
        return 0.5 * jnp.sum((m(x) - y) ** 2)

    return model, loss


def test_a_smooth_flow_is_right_to_its_tolerance():
    # loss(t) = loss(0) exp(-2 tau t) for a linear model fitting one point
    model, loss = _linear()
    ts = jnp.linspace(0.0, 2.0, 5)
    sol = gradient_flow(model, loss, ts, args=jnp.array([3.0]), time_scale=1.5, rtol=1e-6,
                        atol=1e-12, method="steps")  # fmt: skip
    assert sol.ok and sol.method == "steps"
    exact = sol.loss[0] * jnp.exp(-3.0 * ts)
    np.testing.assert_allclose(sol.loss, exact, rtol=1e-6)
    assert sol.stats["num_levels"] >= 4 and sol.stats["error_estimate"] <= 1


def test_a_relu_mlp_through_its_kinks_against_solve_ivp():
    # 3-6-6-1 ReLU MLP with biases, 16 samples, to t = 6, through its kinks: the
    # extrapolated steps within their tolerance (relative, loss and parameters) of scipy's
    # DOP853 at 1e-12
    from jax.flatten_util import ravel_pytree
    from scipy.integrate import solve_ivp

    mlp, loss, data = relu_mlp_problem(16, 6, bias=True)
    ts = jnp.linspace(0.0, 6.0, 13)
    sol = gradient_flow(mlp, loss, ts, args=data, rtol=1e-4, atol=1e-10, method="steps")
    assert sol.ok and sol.method == "steps"
    params, static = eqx.partition(mlp, eqx.is_inexact_array)
    flat, unravel = ravel_pytree(params)
    value = jax.jit(lambda x: loss(eqx.combine(unravel(x), static), data))
    grad = jax.jit(jax.grad(lambda x: loss(eqx.combine(unravel(x), static), data)))
    ref = solve_ivp(lambda t, x: -np.asarray(grad(jnp.asarray(x))), (0.0, 6.0), np.asarray(flat),
                    method="DOP853", t_eval=np.asarray(ts), rtol=1e-12, atol=1e-12)  # fmt: skip
    ref_loss = np.array([float(value(jnp.asarray(x))) for x in ref.y.T])
    np.testing.assert_allclose(sol.loss, ref_loss, rtol=1e-4)
    final = ravel_pytree(eqx.filter(sol.model, eqx.is_inexact_array))[0]
    assert np.linalg.norm(final - ref.y[:, -1]) <= 1e-4 * np.linalg.norm(ref.y[:, -1])


def test_auto_steps_on_kinks_at_a_loose_tolerance_and_holds_them_otherwise():
    from integrators._generic import _choose_method

    # 3-32-32-1, 64 samples: 4,096 kink entries, the fewest auto steps on
    mlp, loss, data = relu_mlp_problem(64, 32, bias=False)
    ts = jnp.linspace(0.0, 0.5, 3)
    assert gradient_flow(mlp, loss, ts, args=data, rtol=1e-4).method == "steps"
    small = relu_mlp_problem(63, 32, bias=False)[2]  # 4,032 entries
    params, static = eqx.partition(mlp, eqx.is_inexact_array)
    assert _choose_method("auto", {}, True, 1e-4, loss, params, static, small) == "events"

    def choose(model=mlp, hold=True, rtol=1e-4, **given):
        params, static = eqx.partition(model, eqx.is_inexact_array)
        return _choose_method("auto", given, hold, rtol, loss, params, static, data)

    assert choose(rtol=1e-8) == "events"
    assert choose(hold=False) == "events"
    assert choose(units=neuron_units(mlp)) == "events"
    assert choose(model=eqx.tree_at(lambda m: m.activation, mlp, jnp.tanh)) == "events"


def test_a_step_budget_too_small_is_not_ok():
    mlp, loss, data = relu_mlp_problem(8, 4, bias=False)
    ts = jnp.linspace(0.0, 4.0, 3)
    sol = gradient_flow(mlp, loss, ts, args=data, rtol=1e-7, method="steps", max_steps=50)
    assert not sol.ok and sol.result == RESULTS.max_steps_reached
    assert sol.stats["error_estimate"] > 1
    with pytest.raises(Exception, match="max_steps"):
        gradient_flow(mlp, loss, ts, args=data, rtol=1e-7, method="steps", max_steps=50,
                      throw=True)  # fmt: skip


def test_under_jit_with_observables_and_the_trajectory():
    mlp, loss, data = relu_mlp_problem(8, 4, bias=False)
    ts = jnp.linspace(0.0, 1.0, 4)

    @eqx.filter_jit
    def run(mlp, data):
        def seen(t, m, d):
            return loss(m, d)

        return gradient_flow(mlp, loss, ts, args=data, rtol=1e-4, method="steps",
                             observables=seen, save_trajectory=True)  # fmt: skip

    sol = run(mlp, data)
    assert sol.ok
    np.testing.assert_allclose(sol.observables, sol.loss, rtol=1e-12)
    last = jax.tree_util.tree_map(lambda x: x[-1], eqx.filter(sol.trajectory, eqx.is_array))
    assert jax.tree_util.tree_all(jax.tree_util.tree_map(jnp.array_equal, last,
                                  eqx.filter(sol.model, eqx.is_array)))  # fmt: skip


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(method="leapfrog"), "`method` must be one of"),
        (dict(method="steps", units=0), "`units` is an option of method='events' only"),
        (dict(method="steps", steady_state=1e-3), "`steady_state` is an option"),
        (dict(method="steps", max_sliding=4), "`max_sliding` is an option"),
    ],
)
def test_bad_method_options_are_refused(kwargs, fragment):
    mlp, loss, data = relu_mlp_problem(8, 4, bias=False)
    if "units" in kwargs:
        kwargs["units"] = neuron_units(mlp)
    with pytest.raises(ValueError, match=fragment):
        gradient_flow(mlp, loss, jnp.linspace(0.0, 1.0, 3), args=data, **kwargs)
