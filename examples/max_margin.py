"""Normalized GD on a leaky-ReLU net converges in direction to the max-margin solution.

python examples/max_margin.py
"""

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)

from _figure import figure, save  # noqa: E402

from dynamics import gaussian_mixture, small_leaky_init  # noqa: E402
from integrators import margin_gradient_descent  # noqa: E402
from theory import max_margin, mixture_test_error, one_minus_cos, signal_regime  # noqa: E402

n, d, m, gamma, signal = 20, 400, 10, 0.1, 15.0
X, y, mu, _ = gaussian_mixture(n, d, signal=signal, key=jax.random.PRNGKey(0))
net = small_leaky_init(m, d, gamma, scale=1e-10, key=jax.random.PRNGKey(1))
mm = max_margin(X, y, net.a, gamma)
print(
    f"max_margin: relative duality gap {float(mm.relative_gap):.1e}, "
    f"every neuron activated: {bool(mm.pattern_consistent)}"
)
eta = 1.0 / jnp.max(jnp.sum(X * X, axis=1))
sol = margin_gradient_descent(X, y, net, learning_rate=eta, max_steps=10**5, normalized=True)
assert bool(sol.ok) and bool(mm.ok), (sol.result, mm.result)
for step, omc in zip(
    sol.steps[::10].tolist(), one_minus_cos(sol.trajectory.W, mm.W)[::10].tolist(), strict=True
):
    print(f"step {step:>6}: 1 - cos(W_t, W*) = {omc:.2e}")
print(
    f"regime n||mu||^2 / R = {float(signal_regime(n, signal, d)):.2f}, "
    f"closed-form test error {float(mixture_test_error(mm.W, net.a, mu)):.2e}"
)

fig, ax = figure()
ax.loglog(sol.steps, one_minus_cos(sol.trajectory.W, mm.W), "o-", ms=3)
ax.set_xlabel("normalized GD step")
ax.set_ylabel("1 - cos(W_t, W*)")
ax.set_title("direction of GD against the max-margin solution")
save(fig, "max_margin.png")
