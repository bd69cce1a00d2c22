"""Data models: orthonormal inputs with Gaussian labels, equicorrelated inputs, and the
nearest orthonormal rows of any inputs (Loewdin).

Paper: *Mildly Overparameterized ReLU Networks on Orthogonal Data: Incremental Learning and
Implicit Bias* (NeurIPS 2026, arXiv:2605.27097).
"""

import functools

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from theory.checks import (
    check_dtype,
    check_finite,
    check_key,
    check_matrix,
    check_positive_int,
    check_value,
    inexact,
)


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
    return _orthogonal_data(check_key(key), n, d, dtype, labels)


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4))  # one program, not one per operation
def _orthogonal_data(key, n, d, dtype, labels):
    kq, ky = jax.random.split(key)
    g = jax.random.normal(kq, (d, d), dtype=dtype)
    q, r = jnp.linalg.qr(g)
    q = q * jnp.sign(jnp.diagonal(r))[None, :]  # Haar measure, not only orthogonal
    X = q.T[:n]
    y = jax.random.normal(ky, (n,), dtype=dtype)
    return X, (jnp.where(y >= 0, 1.0, -1.0).astype(dtype) if labels == "sign" else y)


def correlated_data(n: int, c, *, key: PRNGKeyArray, dtype=None) -> Float[Array, "n n+1"]:
    """n unit inputs in R^(n+1) with every pairwise correlation x_i . x_k = c (i != k):
    x_i = sqrt(1 - c) q_i + sqrt(c) q_0 for orthonormal q_0..q_n (the rows of a Haar-random
    rotation).

    **Arguments:**

    - `n`: number of samples, a positive int (the inputs live in R^(n+1)).
    - `c`: the pairwise correlation, one real number in [0, 1): c = 0 gives orthonormal
      inputs; c -> 1 makes them nearly parallel.
    - `key`: a `jax.random.PRNGKey`.
    - `dtype`: floating dtype (default: JAX's default float).

    **Returns:** `X` of shape (n, n + 1) with unit rows and X X^T = (1 - c) I + c 1 1^T.

    **Raises:** `ValueError` where `n` is not a positive int, `c` is not one real number in
    [0, 1) (through `eqx.error_if` when traced), `key` is not a JAX PRNG key, or `dtype` is
    not floating (or is float64 without x64 enabled).

    >>> X = correlated_data(4, 0.3, key=jax.random.PRNGKey(0), dtype=jnp.float64)
    >>> X.shape, [round(v, 12) for v in (X @ X.T)[0].tolist()]
    ((4, 5), [1.0, 0.3, 0.3, 0.3])
    """
    n = check_positive_int("n", n)
    dtype = jnp.zeros(()).dtype if dtype is None else check_dtype(dtype)
    c = inexact(c, dtype, "c")
    if c.shape != ():
        raise ValueError(f"`c` must be one correlation, got shape {c.shape}")
    c = check_value(c, (c >= 0) & (c < 1), f"`c` must lie in [0, 1), got {c}")
    g = jax.random.normal(check_key(key), (n + 1, n + 1), dtype)
    q, r = jnp.linalg.qr(g)
    Q = (q * jnp.sign(jnp.diagonal(r))[None, :]).T
    return jnp.sqrt(1.0 - c) * Q[1:] + jnp.sqrt(c) * Q[:1]


def loewdin(X: Float[Array, "n d"]) -> Float[Array, "n d"]:
    """(X X^T)^(-1/2) X: the orthonormal rows nearest to those of X (Loewdin's symmetric
    orthonormalization). On such inputs `integrators.orthogonal_flow` and
    `theory.saddle_jumps` apply; `benchmarks.beyond_orthogonal` compares them with the flow on
    X itself.

    **Arguments:**

    - `X`: inputs, shape (n, d) with 1 <= n <= d and linearly independent rows; real and
      finite (integers and nested lists are converted to a floating array).

    **Returns:** the orthonormalized inputs, shape (n, d), in `X`'s floating dtype.

    **Raises:** `ValueError` where `X` is not 2-D, not real or not finite, has no rows or more
    rows than columns, or has (numerically) linearly dependent rows: the smallest eigenvalue
    of X X^T at most n eps times the largest (through `eqx.error_if` when traced).

    >>> Q = loewdin(jnp.array([[1.0, 0.0], [1.0, 1.0]]))
    >>> bool(jnp.allclose(Q @ Q.T, jnp.eye(2), atol=1e-12))
    True
    """
    X = check_finite("X", inexact(check_matrix("X", X), name="X"))
    if X.shape[0] == 0 or X.shape[0] > X.shape[1]:
        raise ValueError(f"`X` must have 1 <= n <= d rows to be orthonormalized, got {X.shape}")
    vals, vecs = jnp.linalg.eigh(X @ X.T)
    floor = X.shape[0] * jnp.finfo(X.dtype).eps * jnp.max(jnp.abs(vals))
    vals = check_value(
        vals, jnp.min(vals) > floor, "`X` must have linearly independent rows, got a singular X X^T"
    )
    return (vecs / jnp.sqrt(vals)) @ vecs.T @ X
