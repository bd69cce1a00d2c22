"""The jump process at alpha = 10^-1000, where alpha itself underflows float64.

python examples/vanishing_limit.py
"""

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)

from _figure import save_jump_times  # noqa: E402

from dynamics import balanced_init, orthogonal_data, signs_and_directions  # noqa: E402
from integrators import vanishing_flow  # noqa: E402
from theory import coverage_width, crossing_times, jump_time_grid, saddle_jumps  # noqa: E402

n, seeds = 16, 8
m = coverage_width(n)
tau = 1000 * jnp.log(10.0)  # log(1/alpha)


def one_seed(key):
    kx, kw = jax.random.split(key)
    X, y = orthogonal_data(n, key=kx, dtype=jnp.float64)
    # only the signs and directions of a balanced init matter; its scale is the time scale
    signs, dirs = signs_and_directions(balanced_init(m, n, 0.5, key=kw, dtype=jnp.float64), X)
    pred = saddle_jumps(y, signs, dirs)
    ts = jump_time_grid(pred, pred.horizon(1.3), time_scale=tau, num=1000, window_points=128)
    sol = vanishing_flow(y, signs, dirs, ts, time_scale=tau)
    return pred, crossing_times(ts, sol.loss, pred), sol.cost[-1], sol.stats["num_steps"], sol.ok


keys = jax.random.split(jax.random.PRNGKey(0), seeds)
pred, measured, cost, steps, ok = jax.jit(jax.vmap(one_seed))(keys)
assert bool(jnp.all(ok)), "a solve failed"
rel = jnp.abs(measured / pred.times - 1)
print(f"n = {n}, m = {m}, alpha = 1e-1000, {seeds} seeds")
print(f"median relative jump-time error {jnp.nanmedian(rel):.2e}, max {jnp.nanmax(rel):.2e}")
print(f"median relative cost error {jnp.median(jnp.abs(cost / pred.cost - 1)):.2e}")
print(f"solver steps per seed: {steps.tolist()}")

save_jump_times(pred.times, measured, "jumps at alpha = 1e-1000", "vanishing_limit.png")
