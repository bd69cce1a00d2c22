"""The multi-index staircase in the population loss, against the predicted plateaus.

python examples/staircase.py
"""

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)

from _figure import figure, save  # noqa: E402

from dynamics import mean_field_init, standard_target  # noqa: E402
from integrators import mean_field_flow  # noqa: E402
from theory import hermite_energies  # noqa: E402

d, r, m = 40, 8, 100
target = standard_target(r, d)
net = mean_field_init(m, d, key=jax.random.PRNGKey(0))
curve = jnp.geomspace(1e-3, 40.0, 201)
sol = mean_field_flow(target, net, curve, weight_decay=0.0)  # no weight decay: the loss goes to 0
assert bool(sol.ok), sol.result
E = hermite_energies(activation="abs", r=r)
print(
    f"predicted plateaus: 1/2 E_>=2 = {float(E.plateau_0):.3f}, "
    f"1/2 E_>=4 = {float(E.plateau_2):.3f}"
)
every = slice(None, None, 25)  # 9 log-spaced times of the curve
for t, loss, b2 in zip(
    curve[every].tolist(), sol.loss[every].tolist(), sol.beta2[every].tolist(), strict=True
):
    print(f"t = {t:8.3f}: loss {loss:.4f}, irrelevant mass beta_2 {b2:.2e}")

fig, ax = figure()
ax.loglog(curve, sol.loss, label="population loss")
for value, name in ((E.plateau_0, "1/2 E_>=2"), (E.plateau_2, "1/2 E_>=4")):
    ax.axhline(float(value), ls="--", lw=1, color="gray")
    ax.annotate(name, (float(curve[0]), float(value)), va="bottom", fontsize=8)
ax.set_xlabel("t")
ax.set_ylabel("loss")
ax.legend()
save(fig, "staircase.png")
