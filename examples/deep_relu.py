"""A deep ReLU network through its loss drop: the flow, exact through the kinks, against
gradient descent.

An 8-16-16-16-1 ReLU MLP with biases (`eqx.nn.MLP`, its initialization scaled by 0.3) learns
a ReLU teacher on 32 Gaussian inputs. `gradient_flow` follows the gradient flow through the
network's kinks twice: by events (each kink held and, where gradient descent would chatter
across it, slid along: the Filippov flow) and by steps (levels of Euler extrapolated to step
0). Gradient descent at step eta is the flow's Euler discretization, with an error first
order in eta: the figure shows it closing in on the flow as eta shrinks.

python examples/deep_relu.py
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from _figure import figure, save  # noqa: E402

from integrators import gradient_flow  # noqa: E402

keys = jax.random.split(jax.random.PRNGKey(0), 3)
X = jax.random.normal(keys[0], (32, 8), jnp.float64)
teacher = eqx.nn.MLP(8, 1, 12, 2, activation=jax.nn.relu, key=keys[1])
teacher = jax.tree_util.tree_map(lambda x: 2.0 * x if eqx.is_array(x) else x, teacher)
y = jax.vmap(teacher)(X)[:, 0].astype(jnp.float64)
student = eqx.nn.MLP(8, 1, 16, 3, activation=jax.nn.relu, key=keys[2])
student = jax.tree_util.tree_map(
    lambda x: (0.3 * x).astype(jnp.float64) if eqx.is_array(x) else x, student
)


def mse(model, data):
    inputs, labels = data
    return 0.5 * jnp.mean((jax.vmap(model)(inputs)[:, 0] - labels) ** 2)


ts = jnp.linspace(0.0, 150.0, 151)
events = gradient_flow(student, mse, ts, args=(X, y), rtol=1e-8, atol=1e-10, method="events")
steps = gradient_flow(student, mse, ts, args=(X, y), rtol=1e-4, atol=1e-10, method="steps")
assert bool(events.ok) and bool(steps.ok), (events.result, steps.result)
print(f"loss {float(events.loss[0]):.4f} -> {float(events.loss[-1]):.2e} by t = 150")
print(f"events: {int(events.stats['num_steps'])} steps, "
      f"{int(events.stats['kink_crossings'])} kink crossings, "
      f"{int(events.stats['sliding_entries'])} entries slid")  # fmt: skip
print(f"steps: {int(steps.stats['num_levels'])} Euler levels, finest step "
      f"{float(steps.stats['finest_step']):.1e}")  # fmt: skip
gap = float(jnp.max(jnp.abs(steps.loss - events.loss) / events.loss))
print(f"events against steps: largest relative loss gap {gap:.1e}")


params, static = eqx.partition(student, eqx.is_inexact_array)


@eqx.filter_jit
def descend(params, eta, n):
    """Gradient descent at step eta, the loss after every unit of time (n = 1 / eta steps)."""

    def loss(p):
        return mse(eqx.combine(p, static), (X, y))

    def unit(p, _):
        def step(_, p):
            return jax.tree_util.tree_map(lambda a, g: a - eta * g, p, jax.grad(loss)(p))

        p = jax.lax.fori_loop(0, n, step, p)
        return p, loss(p)

    _, losses = jax.lax.scan(unit, params, None, length=ts.size - 1)
    return jnp.concatenate([loss(params)[None], losses])


fig, ax = figure()
ax.semilogy(ts, events.loss, "k", lw=2, label="flow (events)")
for eta in (0.1, 0.02, 0.005):
    curve = descend(params, eta, int(round(1 / eta)))
    error = float(np.max(np.abs(curve - events.loss) / events.loss))
    print(f"gradient descent at eta = {eta}: largest relative gap to the flow {error:.1e}")
    ax.semilogy(ts, curve, "--", label=f"GD, eta = {eta}")
ax.set_xlabel("t (GD: t / eta steps)")
ax.set_ylabel("training loss")
ax.legend()
save(fig, "deep_relu.png")
