"""Hessian spectra of a network at a saddle and at the end of training: certified Morse
indices, and the spectral density by stochastic Lanczos quadrature against the dense one.

A 16-120-1 tanh MLP (2,040 parameters) from a 1e-4-scaled initialization learns two
orthonormal tanh teacher units on 256 Gaussian inputs. At the start it sits at the origin
saddle, whose Morse index is the width (a 120-fold cluster of negative eigenvalues that
Lanczos alone does not resolve: `certify=True` counts every eigenvalue); `critical_point`
polishes it to ||grad|| below 1e-12. At the end of the flow `spectral_density` estimates the
whole spectrum from Hessian-vector products, held against `jnp.linalg.eigvalsh` of the dense
Hessian by the Wasserstein-1 distance.

python examples/spectra.py
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

jax.config.update("jax_enable_x64", True)

from _figure import figure, save  # noqa: E402

from integrators import (  # noqa: E402
    certify_morse,
    critical_point,
    gradient_flow,
    hessian_spectrum,
    neuron_units,
    spectral_density,
    wasserstein1,
)

keys = jax.random.split(jax.random.PRNGKey(0), 3)
X = jax.random.normal(keys[0], (256, 16), jnp.float64)
V = jnp.linalg.qr(jax.random.normal(keys[1], (16, 2), jnp.float64))[0].T
y = jnp.sum(jnp.tanh(X @ V.T), axis=1)
net = eqx.nn.MLP(16, 1, 120, 1, activation=jnp.tanh, use_bias=False, use_final_bias=False,
                 key=keys[2])  # fmt: skip
net = jax.tree_util.tree_map(lambda x: 1e-4 * x.astype(jnp.float64) if eqx.is_array(x) else x, net)


def loss(model, data):
    inputs, labels = data
    return 0.5 * jnp.mean((jax.vmap(model)(inputs)[:, 0] - labels) ** 2)


lanczos = hessian_spectrum(net, loss, args=(X, y), k=8)
spec = certify_morse(lanczos, net, loss, args=(X, y))
print(f"at the initialization: Lanczos (k = 8) certifies the index >= "
      f"{int(lanczos.morse_lower)} only; counting every eigenvalue: Morse index "
      f"{int(spec.morse_index)} (certified: {bool(spec.morse_exact)})")  # fmt: skip
cp = critical_point(net, loss, args=(X, y), kind="any")
print(f"the saddle: ||grad|| {float(cp.grad_norm):.1e}, index {int(cp.morse_index)}, "
      f"loss {float(cp.loss):.4f} (1/2 mean y^2 = {float(0.5 * jnp.mean(y**2)):.4f})")  # fmt: skip

sol = gradient_flow(net, loss, jnp.linspace(0.0, 40.0, 41), args=(X, y), units=neuron_units(net))
assert bool(sol.ok), sol.result
final = sol.model
params, static = eqx.partition(final, eqx.is_inexact_array)
flat, unravel = ravel_pytree(params)
H = jax.hessian(lambda x: loss(eqx.combine(unravel(x), static), (X, y)))(flat)
dense = np.linalg.eigvalsh(np.asarray(H))
density = spectral_density(final, loss, args=(X, y))
scale = float(np.max(np.abs(dense)))
w1 = wasserstein1(density.nodes, density.weights, dense) / scale
print(f"after the flow (loss {float(sol.loss[-1]):.2e}): {flat.size} parameters, "
      f"W1(SLQ, dense) / ||H|| = {w1:.1e}")  # fmt: skip
# counts in intervals wide against the quadrature's resolution (a Gauss rule of `steps`
# nodes cannot split eigenvalues 1e-6 ||H|| apart: its error bars are the probes' spread)
edges = np.array([-np.inf, -0.01 * scale, 0.01 * scale, np.inf])
counts, errors = density.counts(edges)
exact = np.histogram(dense, bins=edges)[0]
names = ("below -0.01 ||H||", "within 0.01 ||H||", "above 0.01 ||H||")
for name, c, e, n in zip(names, counts, errors, exact, strict=True):
    print(f"  {name}: SLQ {c:7.1f} +- {e:.1f}, dense {n}")

fig, ax = figure()
order = np.argsort(np.asarray(density.nodes))
cdf = np.cumsum(np.asarray(density.weights)[order])
ax.step(np.asarray(density.nodes)[order], cdf, where="post", label="SLQ (spectral_density)")
ax.step(np.sort(dense), np.arange(1, dense.size + 1) / dense.size, where="post", ls="--",
        label="dense eigvalsh")  # fmt: skip
ax.set_xscale("symlog", linthresh=1e-6 * scale)
ax.set_xticks([-1e-2, -1e-4, 0.0, 1e-4, 1e-2, 1.0])
ax.set_xlabel("eigenvalue")
ax.set_ylabel("fraction of eigenvalues below")
ax.set_title(f"Hessian spectrum after training (W1 / ||H|| = {w1:.0e})")
ax.legend()
save(fig, "spectra.png")
