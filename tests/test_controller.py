import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from integrators import gradient_flow


def test_a_rejected_crossing_is_retried_to_just_past_it():
    # d w_i/dt = 1 - 1(w_i > c_i) / 2: twenty gradient jumps, each crossed once at t = c_i.
    # LandingController retries a step that crossed one to just past it: about one
    # rejection a crossing (the PI controller alone took 283 rejections, 647 steps)
    c = 0.05 * jnp.arange(1, 21) + 0.013

    def loss(m, args):
        w = m.weight[:, 0]
        return jnp.sum(-w + 0.5 * jax.nn.relu(w - c))

    model = eqx.nn.Linear(1, 20, use_bias=False, key=jax.random.PRNGKey(0))
    model = eqx.tree_at(lambda m: m.weight, model, jnp.zeros((20, 1)))
    ts = jnp.linspace(0.0, 1.5, 7)
    sol = gradient_flow(model, loss, ts)
    w = jnp.where(ts[:, None] < c, ts[:, None], c + 0.5 * (ts[:, None] - c))
    exact = jnp.sum(-w + 0.5 * jax.nn.relu(w - c), axis=1)
    assert sol.ok and int(sol.stats["kink_crossings"]) == 20
    assert int(sol.stats["num_rejected_steps"]) <= 25 and int(sol.stats["num_steps"]) <= 80
    np.testing.assert_allclose(sol.loss, exact, atol=1e-6)
