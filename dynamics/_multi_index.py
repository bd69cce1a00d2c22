"""The orthogonal multi-index target and the two-homogeneous mean-field network.

Target f*(x) = sum_{j<=r} sigma(<w*_j, x>) with orthonormal w*_j; network
f_W(x) = (1/m) sum_i ||w_i||^2 sigma(<w_i / ||w_i||, x>); inputs x ~ N(0, I_d); loss
L = 1/2 E (f_W - f*)^2 (population, in closed form) or its mean over n samples. sigma is
`theory.activation_function(activation)`: |z| by default, ReLU, GeLU, Swish, or their even
parts "relu_even", "gelu_even", "swish_even" (what the paper's symmetric initialization makes
the network see, and what the staircase predictions assume).

**Population loss.** With k(rho) = E sigma(u.x) sigma(v.x) for unit u, v, rho = <u, v>,

    2 L = (1/m^2) sum_{i,k} n_i n_k k(rho_ik) - (2/m) sum_{i,j} n_i k(<u_i, w*_j>)
          + sum_{j,j'} k(delta_jj'),

n_i = ||w_i||^2. For |z| the arc-cosine kernel k(rho) = (2/pi)(sqrt(1 - rho^2) + rho arcsin rho)
(relu_even: k/4; ReLU: (k + rho)/4), whose derivative k'(rho) = (2/pi) arcsin rho stays
finite at rho = +-1: the kernel carries that derivative explicitly (`jax.custom_jvp`), so
gradients stay finite when a neuron aligns exactly with a target direction or another neuron.
For GeLU and Swish (and their even parts),
k(rho) = sum_{k <= K} c_k^2 rho^k with K = 40, truncation error <= E sigma^2 - sum_{k<=K} c_k^2
for |rho| <= 1 (`theory.kernel_truncation_error`).

Paper: *Learning Orthogonal Multi-Index Models Beyond Small Initialization: Incremental
Learning, Competitive Dynamics and Symmetry* (NeurIPS 2026, arXiv:2609.10879).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from theory import Readable, activation_function, dual_kernel
from theory.checks import (
    check_activation,
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


class MultiIndexTarget(eqx.Module):
    """f*(x) = sum_{j<=r} sigma(<w*_j, x>): `directions` (r, d) with orthonormal rows.

    >>> target = MultiIndexTarget(jnp.eye(2, 3))
    >>> target.predict(jnp.array([[1.0, -2.0, 5.0]])).tolist(), target.rank
    ([3.0], 2)
    """

    directions: Float[Array, "r d"]
    activation: str = eqx.field(static=True)

    def __init__(self, directions, activation: str = "abs"):
        check_activation(activation)
        directions = inexact(directions, name="directions")
        check_shape("directions", directions, (None, None))
        r, d = directions.shape
        if r > d:
            raise ValueError(f"`directions` must have r <= d, got r = {r} > d = {d}")
        self.directions = check_orthonormal_rows("directions", directions)
        self.activation = activation

    @property
    def rank(self) -> int:
        """The number r of target directions."""
        return self.directions.shape[0]

    def __call__(self, x: Float[Array, " d"]) -> Float[Array, ""]:
        return jnp.sum(activation_function(self.activation)(self.directions @ x))

    def predict(self, X: Float[Array, "n d"]) -> Float[Array, " n"]:
        """f*(x_i) for every row of `X`."""
        return jnp.sum(activation_function(self.activation)(X @ self.directions.T), axis=1)


def standard_target(r: int, d: int, activation: str = "abs", dtype=None) -> MultiIndexTarget:
    """The target with w*_j = e_j, j <= r.

    **Arguments:**

    - `r`: number of target directions, a positive int.
    - `d`: input dimension, an int >= r.
    - `activation`: sigma, one of `theory.checks.ACTIVATIONS` (default `"abs"`).
    - `dtype`: floating dtype (default: JAX's default float).

    **Returns:** a `MultiIndexTarget` whose `directions` (r, d) are the first r rows of I_d.

    **Raises:** `ValueError` where `r` is not a positive int, `d` is not an int >= r,
    `activation` is not one of `ACTIVATIONS`, or `dtype` is not floating (or is float64
    without x64 enabled).

    >>> standard_target(2, 5).directions.shape
    (2, 5)
    """
    r = check_positive_int("r", r)
    d = check_positive_int("d", d, minimum=r)
    dtype = jnp.zeros(()).dtype if dtype is None else check_dtype(dtype)
    return MultiIndexTarget(jnp.eye(r, d, dtype=dtype), activation)


class MeanFieldNet(eqx.Module):
    """f_W(x) = (1/m) sum_i ||w_i||^2 sigma(<w_i / ||w_i||, x>), W (m, d), two-homogeneous.

    >>> net = MeanFieldNet(jnp.array([[2.0, 0.0], [0.0, 1.0]]))
    >>> net.predict(jnp.array([[1.0, -1.0]])).tolist()  # (4 |1| + 1 |-1|) / 2
    [2.5]
    """

    W: Float[Array, "m d"]
    activation: str = eqx.field(static=True)

    def __init__(self, W, activation: str = "abs"):
        check_activation(activation)
        W = inexact(W, name="W")
        check_shape("W", W, (None, None))
        if W.shape[0] == 0 or W.shape[1] == 0:
            raise ValueError(f"`W` must hold at least one neuron of dimension >= 1, got {W.shape}")
        self.W, self.activation = W, activation

    @property
    def width(self) -> int:
        """The number of neurons m."""
        return self.W.shape[0]

    def __call__(self, x: Float[Array, " d"]) -> Float[Array, ""]:
        return self.predict(x[None, :])[0]

    def predict(self, X: Float[Array, "n d"]) -> Float[Array, " n"]:
        """f_W(x_i) for every row of `X`."""
        # f is 2-homogeneous: formed on W / 2^e (max |W| / 2^e in [1, 2), exact) and scaled
        # back by 4^e, so ||w||^2 neither over- nor underflows (1e200 gave 0 x inf = NaN)
        e = binary_exponent(self.W)
        W = times_power_of_two(self.W, -e)
        norms = jnp.linalg.norm(W, axis=1)
        pre = (X @ W.T) / jnp.where(norms > 0, norms, 1.0)  # a zero neuron adds 0
        value = activation_function(self.activation)(pre) @ (norms**2) / W.shape[0]
        return times_power_of_two(times_power_of_two(value, e), e)


def mean_field_init(
    m: int, d: int, *, key: PRNGKeyArray, activation: str = "abs", dtype=None
) -> MeanFieldNet:
    """w_i ~ N(0, I_d / d): the standard initialization, ||w_i|| ~ 1.

    **Arguments:**

    - `m`: number of neurons, a positive int.
    - `d`: input dimension, a positive int.
    - `key`: a `jax.random.PRNGKey`.
    - `activation`: sigma, one of `theory.checks.ACTIVATIONS` (default `"abs"`).
    - `dtype`: floating dtype (default: JAX's default float).

    **Returns:** a `MeanFieldNet` with `W` of shape (m, d).

    **Raises:** `ValueError` where `m` or `d` is not a positive int, `key` is not a JAX PRNG
    key, `dtype` is not floating (or is float64 without x64 enabled), or `activation` is not
    one of `ACTIVATIONS`.

    >>> net = mean_field_init(250, 100, key=jax.random.PRNGKey(0))
    >>> net.W.shape, net.activation
    ((250, 100), 'abs')
    """
    m, d = check_positive_int("m", m), check_positive_int("d", d)
    dtype = jnp.zeros(()).dtype if dtype is None else check_dtype(dtype)
    key = check_key(key)
    return MeanFieldNet(jax.random.normal(key, (m, d), dtype) / jnp.sqrt(d), activation)


def _unit(W):
    """The rows of W divided by their norms (0 for a zero row, which carries no mass)."""
    top = jnp.max(jnp.abs(W), axis=1, keepdims=True)  # no over/underflow of ||w||^2
    W = W / jnp.where(top > 0, top, 1.0)
    sq = jnp.sum(W * W, axis=1, keepdims=True)
    return W / jnp.sqrt(jnp.where(sq > 0, sq, 1.0))


def _cross(A, B, k):
    """(1/(m_A m_B)) sum_{a,b} ||a||^2 ||b||^2 k(<a/||a||, b/||b||>) = E f_A(x) f_B(x)."""
    na, nb = jnp.sum(A * A, axis=1), jnp.sum(B * B, axis=1)
    rho = _unit(A) @ _unit(B).T
    return na @ k(rho) @ nb / (A.shape[0] * B.shape[0])


def population_loss(model: MeanFieldNet, target: MultiIndexTarget) -> Float[Array, ""]:
    """L(W) = 1/2 E_{x ~ N(0, I)} (f_W(x) - f*(x))^2 in closed form (module docstring).

    **Arguments:**

    - `model`: a `MeanFieldNet` with finite `W` (m, d).
    - `target`: a `MultiIndexTarget` with `directions` (r, d) and the model's activation.

    **Returns:** the population loss L(W), a scalar.

    **Raises:** `ValueError` where `model` is not a `MeanFieldNet`, `model.W` is not of shape
    (m, d) for the target's d, the activations differ, or `model.W` is not finite (through
    `eqx.error_if` when traced).

    A net equal to the target has loss 0:

    >>> target = standard_target(2, 3)
    >>> round(float(population_loss(MeanFieldNet(jnp.sqrt(2.0) * jnp.eye(2, 3)), target)), 12)
    0.0
    """
    check_model("model", model, MeanFieldNet)
    check_shape("model.W", model.W, (None, target.directions.shape[1]))
    check_activation(model.activation, expected=target.activation)
    return _population_loss(check_finite("model.W", model.W), target)


@eqx.filter_jit  # one program per call shape, not one per eager operation
def _population_loss(W, target):
    """`population_loss` of the weights W, without the checks (for a flow's field)."""
    k = dual_kernel(target.activation)
    r = target.rank
    sq = jnp.sum(W * W, axis=1)
    cross = jnp.sum(sq @ k(_unit(W) @ target.directions.T)) / W.shape[0]
    const = r * k(jnp.ones(())) + r * (r - 1) * k(jnp.zeros(()))
    return 0.5 * (_cross(W, W, k) - 2.0 * cross + const)


def population_distance(model1: MeanFieldNet, model2: MeanFieldNet) -> Float[Array, ""]:
    """1/2 E_{x ~ N(0, I)} (f_1(x) - f_2(x))^2 in closed form, for two mean-field nets.

    **Arguments:**

    - `model1`: a `MeanFieldNet` with `W` (m1, d).
    - `model2`: a `MeanFieldNet` with `W` (m2, d) and the activation of `model1`.

    **Returns:** the population distance, a scalar.

    **Raises:** `ValueError` where either is not a `MeanFieldNet`, their dimensions d or
    activations differ, or a `W` is not finite (through `eqx.error_if` when traced).

    >>> net = MeanFieldNet(jnp.eye(2))
    >>> round(float(population_distance(net, MeanFieldNet(jnp.eye(2)[::-1]))), 12)
    0.0
    """
    check_model("model1", model1, MeanFieldNet)
    check_model("model2", model2, MeanFieldNet)
    check_shape("model1.W", model1.W, (None, None))
    check_shape("model2.W", model2.W, (None, jnp.shape(model1.W)[1]))
    check_activation(model2.activation, expected=model1.activation)
    W1, W2 = check_finite("model1.W", model1.W), check_finite("model2.W", model2.W)
    return _population_distance(W1, W2, model1.activation)


@eqx.filter_jit
def _population_distance(W1, W2, activation):
    k = dual_kernel(activation)
    return 0.5 * (_cross(W1, W1, k) - 2.0 * _cross(W1, W2, k) + _cross(W2, W2, k))


def sample_loss(
    model: MeanFieldNet, data: tuple, *, batch_size: int | None = None
) -> Float[Array, ""]:
    """1/(2n) sum_i (f_W(x_i) - y_i)^2 on `data` = (X, y), over batches of `batch_size` rows
    (n must divide): a `loss(model, args)` for `integrators.gradient_flow`.

    **Arguments:**

    - `model`: a `MeanFieldNet` with finite `W` (m, d).
    - `data`: the pair `(X, y)` (a tuple or list) of arrays: `X` (n, d) and `y` (n,), both
      finite.
    - `batch_size`: rows per batch, a positive int that divides n; `None` (default) or a
      value >= n sums all n rows at once.

    **Returns:** the sample loss, a scalar.

    **Raises:** `ValueError` where `model` is not a `MeanFieldNet`, `data` is not a pair, `y`
    is not of shape (n,), `model.W`, `X` or `y` is not finite (through `eqx.error_if` when
    traced), or `batch_size` is not a positive int or does not divide n.

    >>> net = MeanFieldNet(jnp.eye(2))
    >>> float(sample_loss(net, (jnp.eye(2), jnp.array([0.5, 0.5])), batch_size=1))
    0.0
    """
    check_model("model", model, MeanFieldNet)
    X, y = check_data(data, d=jnp.shape(model.W)[-1])
    W = check_finite("model.W", model.W)
    X, y = check_finite("X", X), check_finite("y", y)
    return _sample_loss(MeanFieldNet(W, model.activation), X, y, batch_size)


@eqx.filter_jit  # one program per call shape, not one per eager operation
def _sample_loss(model, X, y, batch_size):
    """`sample_loss` without the checks (for a flow's field)."""

    def part(Xb, yb):
        r = model.predict(Xb) - yb
        return jnp.sum(r * r)

    return 0.5 * _summed_over_batches(part, X, y, batch_size) / X.shape[0]


def _summed_over_batches(part, X, y, batch_size):
    """sum_b part(X_b, y_b) over batches of `batch_size` rows (a pytree of sums): one call
    when `batch_size` is None or >= n, else a `lax.scan`; `batch_size` must divide n."""
    n = X.shape[0]
    if batch_size is not None:
        batch_size = check_positive_int("batch_size", batch_size)
    if batch_size is None or batch_size >= n:
        return part(X, y)
    if n % batch_size:
        raise ValueError(f"`batch_size` must divide n = {n}, got {batch_size}")
    Xb = X.reshape(n // batch_size, batch_size, -1)
    yb = y.reshape(n // batch_size, batch_size)
    zero = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), jax.eval_shape(part, Xb[0], yb[0]))

    def chunk(total, xy):
        return jax.tree.map(jnp.add, total, part(*xy)), None

    return jax.lax.scan(chunk, zero, (Xb, yb))[0]


def sample_loss_gradient(
    model: MeanFieldNet, data: tuple, *, batch_size: int | None = None
) -> Float[Array, "m d"]:
    """grad_W of `sample_loss`, 1/(2n) sum_x (f_W(x) - y)^2, written out so that it costs the
    two matmuls U = X (W / nu)^T and S^T X (4 n d m FLOP) and one elementwise pass: with
    nu_i = ||w_i||, u = <w_i, x> / nu_i and r = (f_W(x) - y) / n,

        dL/dw_i = (1/m) sum_x r [(2 sigma(u) - u sigma'(u)) w_i + nu_i sigma'(u) x]

    (sigma' by one forward-mode pass). Equal to `jax.grad(sample_loss)` to rounding, about 3x
    faster (`benchmarks.throughput`); over batches the sums are accumulated, which keeps the
    (batch, m) arrays in cache.

    **Arguments:**

    - `model`: a `MeanFieldNet` with finite `W` (m, d).
    - `data`: the pair `(X, y)` (a tuple or list): `X` (n, d) with n >= 1 and `y` (n,), real
      and finite; both are cast to `model.W`'s dtype.
    - `batch_size`: rows per batch, a positive int that divides n; `None` (default) or a
      value >= n sums all n rows at once.

    **Returns:** grad_W of `sample_loss`, shape (m, d), in `model.W`'s dtype.

    **Raises:** `ValueError` where `model` is not a `MeanFieldNet`, `data` is not a pair, `X`
    is not of shape (n, d) for the model's d or has no rows, `y` is not of shape (n,),
    `model.W`, `X` or `y` is not real or not finite (through `eqx.error_if` when traced), or
    `batch_size` is not a positive int or does not divide n.

    >>> net = MeanFieldNet(jnp.array([[1.0, 0.0], [0.0, 2.0]]))
    >>> X = jnp.array([[1.0, 1.0], [1.0, -1.0]]); y = jnp.array([0.5, 0.0])
    >>> g = sample_loss_gradient(net, (X, y), batch_size=1)
    >>> bool(jnp.allclose(g, jax.grad(lambda W: sample_loss(MeanFieldNet(W), (X, y)))(net.W)))
    True
    """
    check_model("model", model, MeanFieldNet)
    W = check_finite("model.W", inexact(model.W, name="model.W"))
    X, y = check_data(data, d=W.shape[1])
    # the gradient has W's dtype; complex X or y is refused, not cast to its real part
    X, y = check_finite("X", inexact(X, W.dtype, "X")), check_finite("y", inexact(y, W.dtype, "y"))
    return _sample_loss_gradient(MeanFieldNet(W, model.activation), X, y, batch_size)


@eqx.filter_jit  # one program per call shape, not one per eager operation
def _sample_loss_gradient(model, X, y, batch_size):
    """`sample_loss_gradient` without the checks (for a flow's field)."""
    W = model.W
    m = W.shape[0]
    n = X.shape[0]
    sigma = activation_function(model.activation)
    norms = jnp.linalg.norm(W, axis=1)
    safe = jnp.where(norms > 0, norms, 1.0)
    directions = W / safe[:, None]  # 1 / nu folded into W: no pass over the (n, m) array
    mass = norms**2 / m

    def part(Xb, yb):
        # neuron-major (m, b) pre-activations: both matmuls are then plain (not transposed)
        # products for the BLAS, U^T = W X_b^T and G = S^T (r X_b); a transposed left operand
        # of the second ran at half the speed
        U = directions @ Xb.T
        s, ds = jax.jvp(sigma, (U,), (jnp.ones_like(U),))
        r = (mass @ s - yb) / n
        coef = (2.0 * s - U * ds) @ r  # (m,)
        return coef, ds @ (r[:, None] * Xb)  # r scales the (b, d) rows, not the (m, b)

    coef, G = _summed_over_batches(part, X, y, batch_size)
    return (coef[:, None] * W + norms[:, None] * G) / m


class Observables(Readable):
    """The staircase paper's observables of a mean-field net against a target: the mass
    `alpha` alpha~ = (1/m) sum ||w_i||^2, `beta1` and `beta2` (mean squared coordinate over
    the r relevant / d - r irrelevant directions) and per target direction the best neuron's
    `alignment` max_i <w_i / ||w_i||, w*_k>^2 (r,).

    >>> observables(MeanFieldNet(jnp.eye(2)), standard_target(1, 2)).alignment.tolist()
    [1.0]
    """

    alpha: Float[Array, ""]
    beta1: Float[Array, ""]
    beta2: Float[Array, ""]
    alignment: Float[Array, " r"]


def observables(model: MeanFieldNet, target: MultiIndexTarget) -> Observables:
    """alpha~, beta_1, beta_2 and the per-direction alignment of `model` against `target`
    (coordinates in the basis of the target's directions; the rest is irrelevant mass).

    **Arguments:**

    - `model`: a `MeanFieldNet` with finite `W` (m, d).
    - `target`: a `MultiIndexTarget` with `directions` (r, d) and the model's activation.

    **Returns:** an `Observables` with scalars `alpha`, `beta1`, `beta2` (0 where d = r) and
    `alignment` of shape (r,).

    **Raises:** `ValueError` where `model` is not a `MeanFieldNet`, the activations differ,
    `model.W` is not finite (through `eqx.error_if` when traced) or is not of shape (m, d)
    for the target's d.

    >>> obs = observables(MeanFieldNet(jnp.array([[2.0, 0.0, 0.0]])), standard_target(1, 3))
    >>> float(obs.alpha), float(obs.beta1), float(obs.beta2), obs.alignment.tolist()
    (4.0, 4.0, 0.0, [1.0])
    """
    check_model("model", model, MeanFieldNet)
    check_activation(model.activation, expected=target.activation)
    W = check_finite("model.W", model.W)
    check_shape("model.W", W, (None, target.directions.shape[1]))
    return _observables(W, target)


@eqx.filter_jit
def _observables(W, target):
    r = target.rank
    d = W.shape[1]
    rel = W @ target.directions.T  # (m, r)
    off = W - rel @ target.directions  # the irrelevant part, without alpha - rel_mass
    alpha = jnp.mean(jnp.sum(W * W, axis=1))
    rel_mass = jnp.mean(jnp.sum(rel * rel, axis=1))
    cos = _unit(W) @ target.directions.T  # scale-free: ||w||^2 under- or overflows at 1e-+200
    return Observables(
        alpha=alpha,
        beta1=rel_mass / r,
        beta2=jnp.mean(jnp.sum(off * off, axis=1)) / (d - r) if d > r else jnp.zeros((), W.dtype),
        alignment=jnp.max(cos * cos, axis=0),
    )
