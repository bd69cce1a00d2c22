"""Diagonal linear networks: the alpha -> 0 jump process against the exact flow.

Sparse regression with beta = u * u - v * v from u = v = alpha: `theory.diagonal_jumps`
predicts the jumps and saddles, `integrators.diagonal_flow` integrates the exact flow in
log form (here at alpha = 1e-30 and 1e-1000), and the final saddle is the minimum-l1
interpolator.

python examples/diagonal_networks.py
"""

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from _figure import figure, save  # noqa: E402

from integrators import diagonal_flow  # noqa: E402
from theory import crossing_times, diagonal_jumps  # noqa: E402

n, d = 20, 60
X = jax.random.normal(jax.random.PRNGKey(0), (n, d))
y = X[:, :3] @ jnp.array([1.0, -2.0, 1.5])
pred = diagonal_jumps(X, y)
k = int(pred.num_jumps)
assert bool(pred.ok), pred.result
print(f"{k} jumps at t = {np.round(np.asarray(pred.times[:k]), 4).tolist()} (t / log(1/alpha))")
print(f"final saddle: l1 norm {float(pred.l1_norm):.6f}, loss {float(pred.final_loss):.1e}")

ts = jnp.linspace(0.0, 1.3 * float(pred.times[k - 1]), 4001)
fig, ax = figure()
for log10 in (30, 1000):
    sol = diagonal_flow(X, y, ts, time_scale=log10 * np.log(10.0))
    assert bool(sol.ok), sol.result
    measured = crossing_times(ts, sol.loss, pred)[:k]  # midpoints between the plateaus
    error = float(jnp.max(jnp.abs(measured / pred.times[:k] - 1.0)))
    beta_error = float(jnp.max(jnp.abs(sol.final_beta - pred.final_beta)))
    print(
        f"alpha = 1e-{log10}: max relative jump-time error {error:.1e}, "
        f"final beta within {beta_error:.1e} of the limit"
    )
    ax.semilogy(ts, sol.loss, label=f"flow at alpha = 1e-{log10}")
for t in pred.times[:k]:
    ax.axvline(float(t), ls=":", lw=1, color="gray")
ax.set_xlabel("t / log(1/alpha)")
ax.set_ylabel("loss")
ax.set_title("dotted: the predicted jumps")
ax.legend()
save(fig, "diagonal_networks.png")
