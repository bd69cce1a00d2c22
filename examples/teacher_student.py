"""Gaussian teacher-student: a student learns its teacher on the population loss.

An erf student of width 4 from small initialization learns a width-2 teacher on
x ~ N(0, I_8) by gradient flow on the exact population loss; the plateaus are found by
`theory.loss_plateaus` and the first one is polished into a saddle by `critical_point`.

python examples/teacher_student.py
"""

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from _figure import figure, save  # noqa: E402

from dynamics import TwoLayerNet, unchecked  # noqa: E402
from integrators import critical_point, gradient_flow  # noqa: E402
from theory import loss_plateaus  # noqa: E402

teacher = TwoLayerNet(jnp.eye(2, 8), jnp.ones(2), activation="erf")
keys = jax.random.split(jax.random.PRNGKey(0), 2)
student = TwoLayerNet(
    1e-3 * jax.random.normal(keys[0], (4, 8)), 1e-3 * jax.random.normal(keys[1], (4,)),
    activation="erf",
)  # fmt: skip
loss = unchecked.teacher_student_loss
ts = jnp.concatenate([jnp.zeros(1), jnp.geomspace(1e-2, 3e3, 400)])
sol = gradient_flow(student, loss, ts, args=teacher, hold_kinks=False, save_trajectory=True)
assert bool(sol.ok), sol.result
found = loss_plateaus(np.asarray(ts), np.maximum(np.asarray(sol.loss), 1e-300))
print(f"plateaus at loss {np.round(found['levels'], 4).tolist()}, jumps at t = "
      f"{np.round(found['times'], 2).tolist()}")  # fmt: skip
i = int(np.argmin(np.abs(np.asarray(ts) - 0.5 * found["times"][0])))
at = jax.tree_util.tree_map(lambda x: x[i], sol.trajectory)
cp = critical_point(at, loss, args=teacher)
print(
    f"saddle of the first plateau: loss {float(cp.loss):.4f}, ||grad|| {float(cp.grad_norm):.1e}, "
    f"Morse index {int(cp.morse_index)}"
)
print(f"final loss {float(sol.loss[-1]):.1e}")

fig, ax = figure()
ax.loglog(ts[1:], sol.loss[1:], label="gradient flow")
for t in found["times"]:
    ax.axvline(t, ls=":", lw=1, color="gray")
ax.plot(ts[i], float(cp.loss), "rx", label=f"saddle (index {int(cp.morse_index)})")
ax.set_xlabel("t")
ax.set_ylabel("population loss")
ax.legend()
save(fig, "teacher_student.png")
