"""Two-class mixtures x = y mu + z for the max-margin paper, and their label noise.

Paper: *Directional Convergence, Benign Overfitting of Gradient Descent in leaky ReLU two-layer
Neural Networks* (ICLR 2026, arXiv:2505.16204).
"""

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from theory.checks import (
    check_dtype,
    check_finite,
    check_key,
    check_label_noise,
    check_model,
    check_positive,
    check_positive_int,
    check_shape,
)

from ._leaky import LeakyReLUNet, leaky_relu

NOISES = ("gaussian", "rademacher", "student_t")


def _student_t(key, dof, shape, dtype):
    """Student-t variates by Bailey's polar method (exact): (u, v) uniform on the unit disc,
    w = u^2 + v^2, t = u sqrt(dof (w^(-2/dof) - 1) / w). Rejected pairs are redrawn in a
    while loop over the whole array, cheaper than `jax.random.t` (a gamma sampler)."""

    def draw(state):
        key, t, done = state
        key, ku, kv = jax.random.split(key, 3)
        u = jax.random.uniform(ku, shape, dtype, -1.0, 1.0)
        v = jax.random.uniform(kv, shape, dtype, -1.0, 1.0)
        w = u * u + v * v
        ok = (w < 1) & (w > 0) & ~done
        w = jnp.where(ok, w, 0.5)
        return key, jnp.where(ok, u * jnp.sqrt(dof * (w ** (-2.0 / dof) - 1.0) / w), t), done | ok

    init = (key, jnp.zeros(shape, dtype), jnp.zeros(shape, bool))
    return jax.lax.while_loop(lambda s: ~jnp.all(s[2]), draw, init)[1]


def _is_real_number(x) -> bool:
    return isinstance(x, int | float | np.integer | np.floating) and not isinstance(x, bool)


def _noise(key, shape, noise: str, dof, dtype):
    """Unit-variance i.i.d. noise entries xi_jk."""
    if noise == "gaussian":
        return jax.random.normal(key, shape, dtype)
    if noise == "rademacher":
        return jax.random.rademacher(key, shape, dtype)
    # Student-t with dof > 2, scaled to unit variance: E|xi|^r < inf for r < dof, so
    # polynomial tails with E|xi|^r <= K for r in (2, 4] need dof > r (default dof = 4.5).
    return _student_t(key, dof, shape, dtype) * jnp.sqrt((dof - 2.0) / dof)


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

    mu = `signal` e_1; the clean labels y~_i are uniform in {-1, +1}; z_i = `noise_scale` xi_i
    with i.i.d. unit-variance entries xi_ik (covariance Sigma = noise_scale^2 I_d); the
    observed labels are y_i = y~_i, each flipped independently with probability `label_noise`.

    **Arguments:**

    - `n`: number of samples, a positive int.
    - `d`: input dimension, a positive int.
    - `signal`: ||mu||, a finite number (mu = `signal` e_1).
    - `key`: a `jax.random.PRNGKey`.
    - `noise`: the law of the entries xi_ik: `"gaussian"` (default; sub-Gaussian),
      `"rademacher"` (sub-Gaussian, bounded) or `"student_t"` (polynomial tails: a Student-t
      with `dof` degrees of freedom scaled to unit variance, so E|xi|^r <= K exactly for
      r < `dof`; the paper's r in (2, 4] needs `dof` > r).
    - `noise_scale`: the noise's standard deviation per coordinate, finite and > 0
      (default 1).
    - `dof`: the Student-t degrees of freedom, a finite Python or NumPy number > 2 (default
      4.5); read (and checked) only with `noise="student_t"`.
    - `label_noise`: the probability of a flipped label, in [0, 1/2) (default 0).
    - `dtype`: floating dtype (default: JAX's default float).

    **Returns:** `(X, y, mu, clean_y)` with `X` (n, d), the observed labels `y` and the clean
    labels `clean_y` (n,) in {-1, +1}, and `mu` (d,).

    **Raises:** `ValueError` where `n` or `d` is not a positive int, `noise` is not one of
    `"gaussian"`, `"rademacher"`, `"student_t"`, `dof` is not a finite number > 2 with
    Student-t noise, `label_noise` is not in [0, 1/2), `signal` is not finite, `noise_scale`
    is not finite and > 0 (the value checks through `eqx.error_if` when traced), `key` is not
    a JAX PRNG key, or `dtype` is not floating (or is float64 without x64 enabled).

    >>> X, y, mu, clean = gaussian_mixture(20, 400, signal=10.0, key=jax.random.PRNGKey(0))
    >>> X.shape, float(mu[0]), bool(jnp.all(y == clean))
    ((20, 400), 10.0, True)
    """
    n, d = check_positive_int("n", n), check_positive_int("d", d)
    if noise not in NOISES:
        raise ValueError(f"`noise` must be one of {NOISES}, got {noise!r}")
    if noise == "student_t" and not (_is_real_number(dof) and math.isfinite(dof) and dof > 2):
        raise ValueError(
            "`dof` must be a finite number > 2 (finite variance) for student_t noise (the "
            f"Gaussian limit is noise='gaussian'), got {dof!r}"
        )
    label_noise = check_label_noise(label_noise)
    signal = check_finite("signal", signal)
    noise_scale = check_positive("noise_scale", noise_scale)
    dtype = jnp.zeros(()).dtype if dtype is None else check_dtype(dtype)
    dof = float(dof) if noise == "student_t" else None  # static: only Student-t reads it
    return _gaussian_mixture(
        check_key(key), signal, noise_scale, label_noise, n, d, noise, dof, dtype
    )


@functools.partial(jax.jit, static_argnums=(4, 5, 6, 7, 8))  # one program, not one per operation
def _gaussian_mixture(key, signal, noise_scale, label_noise, n, d, noise, dof, dtype):
    ky, kz, kf = jax.random.split(key, 3)
    clean = jax.random.rademacher(ky, (n,), dtype)
    mu = jnp.zeros((d,), dtype).at[0].set(signal)
    X = clean[:, None] * mu[None, :] + noise_scale * _noise(kz, (n, d), noise, dof, dtype)
    flip = jax.random.bernoulli(kf, label_noise, (n,))
    y = jnp.where(flip, -clean, clean)
    return X, y, mu, clean


def sampled_test_error(
    model,
    *,
    key: PRNGKeyArray,
    signal,
    num_batches: int = 10,
    batch_size: int = 2000,
    noise: str = "gaussian",
    noise_scale=1.0,
    dof: float = 4.5,
    label_noise=0.0,
) -> Float[Array, ""]:
    """Monte Carlo test error P(y f(x) <= 0) of `model` (anything with `predict(X)`) on
    `num_batches` x `batch_size` fresh samples of the mixture `gaussian_mixture` draws (same
    `signal`, noise and label noise; d from the model's first layer). Its standard error is
    sqrt(p (1 - p) / N) for N = num_batches x batch_size. Batched with `lax.scan`, so memory
    stays at one batch.

    **Arguments:**

    - `model`: the classifier f: anything with `predict(X)` and a first layer `W` (m, d),
      such as a `LeakyReLUNet`; its floating-point arrays must be finite. The samples are
      drawn in `model.W`'s dtype.
    - `key`: a `jax.random.PRNGKey`.
    - `signal`, `noise`, `noise_scale`, `dof`, `label_noise`: the mixture, as in
      `gaussian_mixture` (defaults Gaussian noise of scale 1, `dof` 4.5, no label noise).
    - `num_batches`: the number of batches, a positive int (default 10).
    - `batch_size`: the samples per batch, a positive int (default 2000).

    **Returns:** the fraction of the N samples with y f(x) <= 0, a scalar.

    **Raises:** `ValueError` where an array of `model` is not finite (through `eqx.error_if`
    when traced), `num_batches` or `batch_size` is not a positive int, `key` is not a JAX
    PRNG key, or on mixture parameters `gaussian_mixture` refuses.

    >>> from dynamics import LeakyReLUNet
    >>> net = LeakyReLUNet(jnp.zeros((2, 5)).at[0, 0].set(1.0), jnp.array([1.0, -1.0]), 0.1)
    >>> err = sampled_test_error(net, key=jax.random.PRNGKey(0), signal=3.0)
    >>> bool(0.0 < err < 0.01)  # Phi(-3) = 0.00135
    True
    """
    d = model.W.shape[-1]
    # NaN weights would count every sample as classified right (NaN <= 0 is False)
    model = jax.tree_util.tree_map(
        lambda x: check_finite("model", x) if eqx.is_inexact_array(x) else x, model
    )
    num_batches = check_positive_int("num_batches", num_batches)
    batch_size = check_positive_int("batch_size", batch_size)

    def batch(count, k):
        X, y, _, _ = gaussian_mixture(
            batch_size,
            d,
            signal=signal,
            key=k,
            noise=noise,
            noise_scale=noise_scale,
            dof=dof,
            label_noise=label_noise,
            dtype=model.W.dtype,
        )
        return count + jnp.sum(y * model.predict(X) <= 0, dtype=count.dtype), None

    wrong, _ = jax.lax.scan(
        batch, jnp.zeros((), jnp.int32), jax.random.split(check_key(key), num_batches)
    )
    return wrong / (num_batches * batch_size)


def projected_test_error(
    model,
    *,
    key: PRNGKeyArray,
    signal,
    num_samples: int = 20000,
    noise_scale=1.0,
    label_noise=0.0,
) -> Float[Array, ""]:
    """Monte Carlo test error P(y f(x) <= 0) of a `LeakyReLUNet` on the Gaussian mixture
    x = y~ mu + z, mu = `signal` e_1, z ~ N(0, sigma^2 I_d), sampled in the network's own
    m-dimensional view of the input: the pre-activations W x = y~ W mu + u with
    u ~ N(0, sigma^2 W W^T) are all that f sees, so they are drawn directly (through the
    eigendecomposition of W W^T). The same distribution as `sampled_test_error` with Gaussian
    noise, at a cost independent of d.

    **Arguments:**

    - `model`: a `LeakyReLUNet` with finite `W` (m, d) and `a` (m,).
    - `key`: a `jax.random.PRNGKey`.
    - `signal`: ||mu||, one finite number.
    - `num_samples`: the number of draws, a positive int (default 20000); the standard error
      is sqrt(p (1 - p) / num_samples).
    - `noise_scale`: sigma, one finite number > 0 (default 1).
    - `label_noise`: the probability of a flipped test label, in [0, 1/2) (default 0).

    **Returns:** the fraction of the `num_samples` draws with y f(x) <= 0, a scalar.

    **Raises:** `ValueError` where `model` is not a `LeakyReLUNet`, `num_samples` is not a
    positive int, `label_noise` is not in [0, 1/2), `noise_scale` is not one finite positive
    number, `signal` is not one finite number, `model.W` or `model.a` is not finite (the
    value checks through `eqx.error_if` when traced), or `key` is not a JAX PRNG key.

    >>> from dynamics import LeakyReLUNet
    >>> net = LeakyReLUNet(jnp.zeros((2, 5)).at[0, 0].set(1.0), jnp.array([1.0, -1.0]), 0.1)
    >>> err = projected_test_error(net, key=jax.random.PRNGKey(0), signal=3.0)
    >>> bool(0.0 < err < 0.01)  # Phi(-3) = 0.00135
    True
    """
    check_model("model", model, LeakyReLUNet)
    num_samples = check_positive_int("num_samples", num_samples)
    label_noise = check_label_noise(label_noise)
    noise_scale = check_positive("noise_scale", noise_scale, scalar=True)
    check_shape("signal", signal, ())
    signal = check_finite("signal", signal)
    W = check_finite("model.W", model.W)
    a = check_finite("model.a", model.a)
    m = W.shape[0]
    evals, evecs = jnp.linalg.eigh(W @ W.T)
    root = evecs * jnp.sqrt(jnp.maximum(evals, 0.0))[None, :]
    ky, kz, kf = jax.random.split(check_key(key), 3)
    clean = jax.random.rademacher(ky, (num_samples,), W.dtype)
    u = noise_scale * jax.random.normal(kz, (num_samples, m), W.dtype) @ root.T
    pre = clean[:, None] * (signal * W[:, 0])[None, :] + u
    f = leaky_relu(pre, model.gamma) @ a
    flip = jax.random.bernoulli(kf, label_noise, (num_samples,))
    y = jnp.where(flip, -clean, clean)
    return jnp.mean(y * f <= 0)
