"""Data models: orthonormal inputs with Gaussian labels.

Paper: *Mildly Overparameterized ReLU Networks on Orthogonal Data: Incremental Learning and
Implicit Bias* (NeurIPS 2026, arXiv:2605.27097).
"""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from theory.checks import check_dtype, check_key, check_positive_int


def orthogonal_data(
    n: int, d: int | None = None, *, key: PRNGKeyArray, dtype=None, labels: str = "gaussian"
) -> tuple[Float[Array, "n d"], Float[Array, " n"]]:
    """Orthonormal inputs x_1..x_n in R^d and standard Gaussian (or +-1) labels.

    The inputs are the first n rows of a Haar-random orthogonal d x d matrix (a random rotation
    of the standard basis), so x_i . x_k = 1[i = k]; the labels are y_i ~ N(0, 1), or with
    `labels="sign"` their signs (+-1 labels, the same key giving the same signs), where
    neurons covering equally many samples jump simultaneously.

    **Arguments:**

    - `n`: number of samples.
    - `d`: input dimension, `d >= n` (default `n`).
    - `key`: a `jax.random.PRNGKey`.
    - `dtype`: floating dtype (default: JAX's default float).
    - `labels`: `"gaussian"` (default) or `"sign"`.

    **Returns:** `(X, y)` with `X` of shape (n, d) and `y` of shape (n,).

    >>> X, y = orthogonal_data(32, key=jax.random.PRNGKey(0), dtype=jnp.float64)
    >>> bool(jnp.allclose(X @ X.T, jnp.eye(32), atol=1e-12)), y.shape
    (True, (32,))
    >>> sorted(set(orthogonal_data(8, key=jax.random.PRNGKey(0), labels="sign")[1].tolist()))
    [-1.0, 1.0]
    """
    if labels not in ("gaussian", "sign"):
        raise ValueError(f"`labels` must be 'gaussian' or 'sign', got {labels!r}")
    n = check_positive_int("n", n)
    d = check_positive_int("d", n if d is None else d, minimum=n)
    dtype = jnp.zeros(()).dtype if dtype is None else check_dtype(dtype)
    kq, ky = jax.random.split(check_key(key))
    g = jax.random.normal(kq, (d, d), dtype=dtype)
    q, r = jnp.linalg.qr(g)
    q = q * jnp.sign(jnp.diagonal(r))[None, :]  # Haar measure, not only orthogonal
    X = q.T[:n]
    y = jax.random.normal(ky, (n,), dtype=dtype)
    return X, (jnp.where(y >= 0, 1.0, -1.0).astype(dtype) if labels == "sign" else y)
