"""Predict and simulate the saddle-to-saddle jump process for a batch of seeds.

python examples/jump_process.py
"""

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)

from _figure import save_jump_times  # noqa: E402

from dynamics import balanced_init, orthogonal_data, signs_and_directions  # noqa: E402
from integrators import orthogonal_flow  # noqa: E402
from theory import coverage_width, crossing_times, saddle_jumps  # noqa: E402

n, seeds, alpha = 16, 8, 1e-30
m = coverage_width(n)


def one_seed(key):
    kx, kw = jax.random.split(key)
    X, y = orthogonal_data(n, key=kx, dtype=jnp.float64)
    model = balanced_init(m, n, alpha, key=kw, dtype=jnp.float64)
    pred = saddle_jumps(y, *signs_and_directions(model, X))
    ts = jnp.linspace(0.0, pred.horizon(1.15), 2000)
    sol = orthogonal_flow(X, y, model, ts, time_scale=jnp.log(1 / alpha))
    return pred, crossing_times(ts, sol.loss, pred), sol.stats["num_steps"], sol.ok


keys = jax.random.split(jax.random.PRNGKey(0), seeds)
pred, measured, steps, ok = jax.jit(jax.vmap(one_seed))(keys)
assert bool(jnp.all(ok)), "a solve failed"
rel = jnp.abs(measured / pred.times - 1)
print(f"n = {n}, m = {m}, alpha = {alpha:g}, {seeds} seeds")
print(f"median relative jump-time error {jnp.nanmedian(rel):.2%}, max {jnp.nanmax(rel):.2%}")
print(f"solver steps per seed: {steps.tolist()}")

save_jump_times(pred.times, measured, "jumps of 8 seeds", "jump_process.png")
