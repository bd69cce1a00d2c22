"""Two-class mixtures x = y mu + z for the max-margin paper, and their label noise."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

NOISES = ("gaussian", "rademacher", "student_t")


def _noise(key, shape, noise: str, dof, dtype):
    """Unit-variance i.i.d. noise entries xi_jk."""
    if noise == "gaussian":
        return jax.random.normal(key, shape, dtype)
    if noise == "rademacher":
        return jax.random.rademacher(key, shape, dtype)
    # Student-t with dof > 2, scaled to unit variance: E|xi|^r < inf for r < dof, so
    # polynomial tails with E|xi|^r <= K for r in (2, 4] need dof > r (default dof = 4.5).
    t = jax.random.t(key, dof, shape, dtype)
    return t * jnp.sqrt((dof - 2.0) / dof)


def gaussian_mixture(
    n: int,
    d: int,
    *,
    signal,
    key: PRNGKeyArray,
    noise: str = "gaussian",
    noise_scale=1.0,
    dof: float = 4.5,
    label_noise=0.0,
    dtype=None,
) -> tuple[Float[Array, "n d"], Float[Array, " n"], Float[Array, " d"], Float[Array, " n"]]:
    """Samples x_i = y~_i mu + z_i of a two-class mixture, with labels y_i.

    - mu = `signal` e_1 (||mu|| = `signal`); clean labels y~_i uniform in {-1, +1}.
    - z_i = `noise_scale` xi_i with i.i.d. unit-variance entries: `noise="gaussian"`
      (sub-Gaussian), `"rademacher"` (sub-Gaussian, bounded), or `"student_t"` (polynomial
      tails: a Student-t with `dof` > 2 degrees of freedom scaled to unit variance, so
      E|xi|^r <= K exactly for r < `dof`; the paper's r in (2, 4] needs `dof` > r).
      Covariance Sigma = noise_scale^2 I_d.
    - Observed labels y_i = y~_i, flipped independently with probability `label_noise`.

    **Returns:** `(X, y, mu, clean_y)` with `X` (n, d), labels (n,) in {-1, +1} and `mu` (d,).

    ```python
    X, y, mu, _ = gaussian_mixture(20, 400, signal=10.0, key=jax.random.PRNGKey(0))
    ```
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"`n` must be a positive integer, got {n!r}")
    if not isinstance(d, int) or d < 1:
        raise ValueError(f"`d` must be a positive integer, got {d!r}")
    if noise not in NOISES:
        raise ValueError(f"`noise` must be one of {NOISES}, got {noise!r}")
    if noise == "student_t" and not dof > 2:
        raise ValueError(f"`dof` must be > 2 (finite variance) for student_t noise, got {dof}")
    if isinstance(label_noise, float | int) and not 0.0 <= label_noise < 0.5:
        raise ValueError(f"`label_noise` must lie in [0, 1/2), got {label_noise}")
    dtype = jnp.zeros(()).dtype if dtype is None else dtype
    ky, kz, kf = jax.random.split(key, 3)
    clean = jax.random.rademacher(ky, (n,), dtype)
    mu = jnp.zeros((d,), dtype).at[0].set(signal)
    X = clean[:, None] * mu[None, :] + noise_scale * _noise(kz, (n, d), noise, dof, dtype)
    flip = jax.random.bernoulli(kf, label_noise, (n,))
    y = jnp.where(flip, -clean, clean)
    return X, y, mu, clean
