"""The two-layer ReLU network h(x) = sum_j a_j relu(w_j . x), its initializations and loss.

Paper: *Mildly Overparameterized ReLU Networks on Orthogonal Data: Incremental Learning and
Implicit Bias* (NeurIPS 2026, arXiv:2605.27097).
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from theory.checks import (
    check_alpha,
    check_data,
    check_dtype,
    check_finite,
    check_key,
    check_model,
    check_orthonormal_rows,
    check_positive_int,
    check_shape,
    inexact,
)
from theory.numerics import binary_exponent, times_power_of_two


class TwoLayerReLU(eqx.Module):
    """Two-layer ReLU network without biases,

        h(x) = sum_{j=1}^m a_j relu(w_j . x),   relu'(0) = 0,

    with trainable second layer `a` (m,) and first layer `W` (m, d). `__call__` takes one input
    x (d,); batch with `jax.vmap` or use `predict`.

    >>> model = TwoLayerReLU(jnp.array([1.0, -1.0]), jnp.array([[1.0, 0.0], [0.0, 1.0]]))
    >>> model.predict(jnp.array([[2.0, 1.0], [-1.0, 3.0]])).tolist()
    [1.0, -3.0]
    """

    a: Float[Array, " m"]
    W: Float[Array, "m d"]

    def __init__(self, a, W):
        dtype = jnp.result_type(jnp.asarray(a), jnp.asarray(W), float)
        a, W = inexact(a, dtype, "a"), inexact(W, dtype, "W")  # integer parameters are converted
        check_shape("a", a, (None,))
        check_shape("W", W, (a.shape[0], None))
        self.a, self.W = a, W

    @property
    def width(self) -> int:
        """The number of neurons m."""
        return self.a.shape[-1]

    def __call__(self, x: Float[Array, " d"]) -> Float[Array, ""]:
        return jnp.dot(self.a, jax.nn.relu(self.W @ x))

    def predict(self, X: Float[Array, "n d"]) -> Float[Array, " n"]:
        """h(x_i) for every row of `X`."""
        return jax.nn.relu(X @ self.W.T) @ self.a


def balanced_init(m: int, d: int, alpha, *, key: PRNGKeyArray, dtype=None) -> TwoLayerReLU:
    """Balanced small initialization |a_j| = ||w_j|| = alpha.

        a_j = alpha s_j,  w_j = alpha u_j,  s_j ~ U{-1, +1},  u_j ~ U(S^{d-1}).

    **Arguments:**

    - `m`: number of neurons, a positive int.
    - `d`: input dimension, a positive int.
    - `alpha`: the initialization scale, one real number in (0, 1) whose square does not
      underflow `dtype` (alpha = 1e-30 needs float64).
    - `key`: a `jax.random.PRNGKey`.
    - `dtype`: floating dtype (default: JAX's default float).

    **Returns:** a `TwoLayerReLU` with `a` of shape (m,) and `W` of shape (m, d).

    **Raises:** `ValueError` where `m` or `d` is not a positive int, `alpha` is not one real
    number in (0, 1) or alpha**2 underflows `dtype`, `key` is not a JAX PRNG key, or `dtype`
    is not floating (or is float64 without x64 enabled).

    >>> model = balanced_init(45, 32, 1e-30, key=jax.random.PRNGKey(0), dtype=jnp.float64)
    >>> bool(jnp.allclose(jnp.abs(model.a), 1e-30)), model.W.shape
    (True, (45, 32))
    """
    m, d = check_positive_int("m", m), check_positive_int("d", d)
    dtype = jnp.zeros(()).dtype if dtype is None else check_dtype(dtype)
    alpha = check_alpha(alpha, dtype)
    return _balanced_init(check_key(key), jnp.asarray(alpha, dtype), m, d, dtype)


@functools.partial(jax.jit, static_argnums=(2, 3, 4))  # one program, not one per operation
def _balanced_init(key, alpha, m, d, dtype):
    ks, ku = jax.random.split(key)
    s = jax.random.rademacher(ks, (m,), dtype=dtype)
    g = jax.random.normal(ku, (m, d), dtype=dtype)
    u = g / jnp.linalg.norm(g, axis=1, keepdims=True)
    return TwoLayerReLU(alpha * s, alpha * u)


def he_uniform_init(m: int, d: int, *, key: PRNGKeyArray, dtype=None) -> TwoLayerReLU:
    """PyTorch's `nn.Linear` default initialization (Kaiming-uniform with a = sqrt(5)):

    W_jk ~ U(-1/sqrt(d), 1/sqrt(d)),   a_j ~ U(-1/sqrt(m), 1/sqrt(m)).

    **Arguments:**

    - `m`: number of neurons, a positive int.
    - `d`: input dimension, a positive int.
    - `key`: a `jax.random.PRNGKey`.
    - `dtype`: floating dtype (default: JAX's default float).

    **Returns:** a `TwoLayerReLU` with `a` of shape (m,) and `W` of shape (m, d).

    **Raises:** `ValueError` where `m` or `d` is not a positive int, `key` is not a JAX PRNG
    key, or `dtype` is not floating (or is float64 without x64 enabled).

    >>> model = he_uniform_init(10, 4, key=jax.random.PRNGKey(0))
    >>> bool(jnp.all(jnp.abs(model.W) <= 0.5))
    True
    """
    m, d = check_positive_int("m", m), check_positive_int("d", d)
    dtype = jnp.zeros(()).dtype if dtype is None else check_dtype(dtype)
    ka, kw = jax.random.split(check_key(key))
    bw, ba = 1.0 / jnp.sqrt(d), 1.0 / jnp.sqrt(m)
    W = jax.random.uniform(kw, (m, d), dtype=dtype, minval=-bw, maxval=bw)
    a = jax.random.uniform(ka, (m,), dtype=dtype, minval=-ba, maxval=ba)
    return TwoLayerReLU(a, W)


def square_loss(model: TwoLayerReLU, data: tuple) -> Float[Array, ""]:
    """L(theta) = 1/(2n) sum_i (h(x_i) - y_i)^2 on `data` = (X, y), X (n, d) and y (n,): a
    `loss(model, args)` for `integrators.gradient_flow` and `critical_point` as it stands.

    **Arguments:**

    - `model`: a `TwoLayerReLU` with finite `a` (m,) and `W` (m, d).
    - `data`: the pair `(X, y)` (a tuple or list) of arrays: `X` (n, d) with n >= 1 and `y`
      (n,), both finite.

    **Returns:** the loss L(theta), a scalar.

    **Raises:** `ValueError` where `data` is not a pair, `y` is not of shape (n,), `X` has no
    rows, `model` is not a `TwoLayerReLU`, or `model.a`, `model.W`, `X` or `y` is not finite
    (through `eqx.error_if` when traced).

    >>> model = TwoLayerReLU(jnp.array([1.0]), jnp.array([[1.0, 0.0]]))
    >>> float(square_loss(model, (jnp.eye(2), jnp.array([1.0, 2.0]))))
    1.0
    """
    check_model("model", model, TwoLayerReLU)
    X, y = check_data(data, d=jnp.shape(model.W)[-1])
    model, X = _finite_model_and_inputs(model, X)
    r = model.predict(X) - check_finite("y", y)
    return 0.5 * jnp.mean(r * r)


def _finite_model_and_inputs(model, X):
    """`model` (a TwoLayerReLU: its a and W) and `X`, checked finite (eagerly, or by
    `eqx.error_if`)."""
    check_model("model", model, TwoLayerReLU)
    a, W = check_finite("model.a", model.a), check_finite("model.W", model.W)
    return eqx.tree_at(lambda m: (m.a, m.W), model, (a, W)), check_finite("X", X)


def signs_and_directions(
    model: TwoLayerReLU, X: Float[Array, "n d"]
) -> tuple[Float[Array, " m"], Float[Array, "m n"]]:
    """The instance that `theory.saddle_jumps` reads off a balanced initialization.

    **Arguments:**

    - `model`: a `TwoLayerReLU` with finite `a` (m,) and `W` (m, d).
    - `X`: inputs, shape (n, d), finite, with orthonormal rows (X X^T = I_n to 1e-6).

    **Returns:** `(signs, directions)`: `signs` s_j = sign(a_j), shape (m,), and
    `directions[j, i] = <u_j, x_i>`, shape (m, n), with u_j = w_j / ||w_j|| (0 for a zero
    neuron, which never moves).

    **Raises:** `ValueError` where `X` is not of shape (n, d) for the model's d, `model` is
    not a `TwoLayerReLU`, `model.a`, `model.W` or `X` is not finite, or `X` has no rows or
    rows that are not orthonormal (the value checks through `eqx.error_if` when traced).

    >>> model = TwoLayerReLU(jnp.array([-2.0]), jnp.array([[3.0, -4.0]]))
    >>> signs, directions = signs_and_directions(model, jnp.eye(2))
    >>> signs.tolist(), [round(v, 12) for v in directions[0].tolist()]
    ([-1.0], [0.6, -0.8])
    """
    check_model("model", model, TwoLayerReLU)
    check_shape("X", X, (None, model.W.shape[1]))
    model, X = _finite_model_and_inputs(model, X)
    X = check_orthonormal_rows("X", X)
    W = model.W
    scale = jnp.max(jnp.abs(W), axis=1, keepdims=True)  # avoids underflow of ||w||^2
    scale = jnp.where(scale > 0, scale, 1.0)
    norm = jnp.linalg.norm(W / scale, axis=1, keepdims=True)
    u = (W / scale) / jnp.where(norm > 0, norm, 1.0)  # a zero neuron has direction 0
    return jnp.sign(model.a), u @ X.T


def tangent_kernel(model: TwoLayerReLU, X: Float[Array, "n d"]) -> Float[Array, "n n"]:
    """The tangent kernel K = J J^T / n of the square loss at `model` (J_i = d h(x_i)/d theta):

        K_ii' = (1/n) sum_j [relu(v_ji) relu(v_ji') + a_j^2 1[v_ji > 0] 1[v_ji' > 0] <x_i, x_i'>],

    v_ji = <w_j, x_i>. Gradient descent on L is stable for steps below 2 / lambda_max(K).

    **Arguments:**

    - `model`: a `TwoLayerReLU` with finite `a` (m,) and `W` (m, d).
    - `X`: inputs, shape (n, d), finite.

    **Returns:** the kernel K, shape (n, n).

    **Raises:** `ValueError` where `X` is not of shape (n, d) for the model's d, `model` is
    not a `TwoLayerReLU`, or `model.a`, `model.W` or `X` is not finite (through
    `eqx.error_if` when traced).

    >>> model = TwoLayerReLU(jnp.array([1.0]), jnp.array([[1.0, 0.0]]))
    >>> tangent_kernel(model, jnp.eye(2)).tolist()
    [[1.0, 0.0], [0.0, 0.0]]
    """
    check_model("model", model, TwoLayerReLU)
    check_shape("X", X, (None, model.W.shape[1]))
    model, X = _finite_model_and_inputs(model, X)
    V = model.W @ X.T
    act, mask = jax.nn.relu(V), (V > 0).astype(V.dtype)
    K = act.T @ act + ((model.a**2)[:, None] * mask).T @ mask * (X @ X.T)
    return K / X.shape[0]


def tangent_kernel_max(model: TwoLayerReLU, X: Float[Array, "n d"]) -> Float[Array, ""]:
    """lambda_max of `tangent_kernel(model, X)`: gradient descent on L with step eta is
    linearly stable at `model` for eta < 2 / lambda_max.

    **Arguments:**

    - `model`: a `TwoLayerReLU` with finite `a` (m,) and `W` (m, d).
    - `X`: inputs, shape (n, d) with n >= 1, finite.

    **Returns:** lambda_max(K), a scalar (computed on rescaled parameters and inputs, so that
    K itself does not overflow; inf where lambda_max does).

    **Raises:** `ValueError` where `X` is not of shape (n, d) for the model's d, `model` is
    not a `TwoLayerReLU`, or `model.a`, `model.W` or `X` is not finite (through
    `eqx.error_if` when traced).

    >>> float(tangent_kernel_max(TwoLayerReLU(jnp.array([1.0]), jnp.array([[1.0, 0.0]])), jnp.eye(2)))
    1.0
    """  # noqa: E501
    # K is 2-homogeneous in (a, W): its spectrum is taken at (a, W) / 2^e, e the binary exponent
    # of their largest entry, and scaled back by 4^e (exact; at 1e200 K overflowed and
    # the eigenvalue read NaN, now inf)
    check_model("model", model, TwoLayerReLU)
    check_shape("X", X, (None, model.W.shape[1]))
    model, X = _finite_model_and_inputs(model, X)

    e, ex = binary_exponent(model.a, model.W), binary_exponent(X)  # also 2-homogeneous in X
    scaled = TwoLayerReLU(times_power_of_two(model.a, -e), times_power_of_two(model.W, -e))
    lam = jnp.linalg.eigvalsh(tangent_kernel(scaled, times_power_of_two(X, -ex)))[-1]
    return times_power_of_two(times_power_of_two(lam, e + ex), e + ex)


def half_squared_norm(model) -> Float[Array, ""]:
    """1/2 ||theta||^2: half the sum of squares of every inexact array of any Equinox model
    (for `TwoLayerReLU`, 1/2 (||a||^2 + ||W||_F^2), the cost Algorithm 1 predicts).

    **Arguments:**

    - `model`: any Equinox model (or pytree) holding at least one floating-point array.

    **Returns:** 1/2 ||theta||^2 over those arrays, a scalar.

    **Raises:** `ValueError` where `model` holds no floating-point array.

    >>> float(half_squared_norm(TwoLayerReLU(jnp.array([1.0]), jnp.array([[1.0, 1.0]]))))
    1.5
    """
    leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    if not leaves:
        raise ValueError(
            f"`model` must hold floating-point arrays (its parameters), got {type(model).__name__}"
        )
    return 0.5 * sum(jnp.sum(leaf * leaf) for leaf in leaves)
