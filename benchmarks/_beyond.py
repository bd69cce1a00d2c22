"""The instances of `benchmarks.beyond_orthogonal` (also solved by `correlated_vs_gd`):
correlated or Gaussian inputs, Gaussian labels, a balanced init at alpha, and the Loewdin
problem whose Algorithm 1 is the reference."""

import jax
import jax.numpy as jnp

from dynamics import TwoLayerReLU, balanced_init, correlated_data

HORIZON = 1.5  # integrate to 1.5 x Algorithm 1's last jump on the Loewdin problem


def inputs(key, family, n, d, c):
    """The inputs X (n, d) of one seed (module docstring)."""
    if family == "correlated":
        return correlated_data(n, c, key=key, dtype=jnp.float64)
    return jax.random.normal(key, (n, d), jnp.float64) / jnp.sqrt(d)


def make(key, family, n, d, c, log10_inv_alpha, width):
    kx, ky, kw = jax.random.split(key, 3)
    X = inputs(kx, family, n, d, c)
    y = jax.random.normal(ky, (n,), jnp.float64)
    model = balanced_init(width, X.shape[1], 0.5, key=kw, dtype=jnp.float64)
    alpha = 10.0**-log10_inv_alpha
    return X, y, TwoLayerReLU(alpha * model.a / 0.5, alpha * model.W / 0.5)
