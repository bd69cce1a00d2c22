"""The orthogonal multi-index target and the two-homogeneous mean-field network.

Target f*(x) = sum_{j<=r} sigma(<w*_j, x>) with orthonormal w*_j; network
f_W(x) = (1/m) sum_i ||w_i||^2 sigma(<w_i / ||w_i||, x>); inputs x ~ N(0, I_d); loss
L = 1/2 E (f_W - f*)^2 (population, in closed form) or its mean over n samples. sigma is
`theory.activation(name)`: |z| by default, or the even part of ReLU, GeLU, Swish (what the
paper's symmetric initialization makes the network see; see `theory._hermite`).

**Population loss.** With k(rho) = E sigma(u.x) sigma(v.x) for unit u, v, rho = <u, v>,

    2 L = (1/m^2) sum_{i,k} n_i n_k k(rho_ik) - (2/m) sum_{i,j} n_i k(<u_i, w*_j>)
          + sum_{j,j'} k(delta_jj'),

n_i = ||w_i||^2. For |z| the arc-cosine kernel k(rho) = (2/pi)(sqrt(1 - rho^2) + rho arcsin rho)
(relu_e: k/4), whose derivative k'(rho) = (2/pi) arcsin rho stays finite at rho = +-1: the
kernel carries that derivative explicitly (`jax.custom_jvp`), so gradients stay finite when a
neuron aligns exactly with a target direction or another neuron. For GeLU and Swish,
k(rho) = sum_{k <= K} c_k^2 rho^k with K = 40, truncation error <= E sigma^2 - sum_{k<=K} c_k^2
for |rho| <= 1 (`kernel_truncation_error`).
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from theory import activation, hermite_coefficients, second_moment
from theory._hermite import check_activation

from ._checks import check_shape, check_value

SERIES_DEGREE = 40


@jax.custom_jvp
def arccos_kernel(rho):
    """(2/pi)(sqrt(1 - rho^2) + rho arcsin rho) = E|u.x||v.x| for unit u, v with <u, v> = rho."""
    rho = jnp.clip(rho, -1.0, 1.0)
    return (2.0 / math.pi) * (jnp.sqrt(1.0 - rho * rho) + rho * jnp.arcsin(rho))


@arccos_kernel.defjvp
def _arccos_kernel_jvp(primals, tangents):
    (rho,), (drho,) = primals, tangents
    slope = (2.0 / math.pi) * jnp.arcsin(jnp.clip(rho, -1.0, 1.0))
    return arccos_kernel(rho), slope * drho


def dual_kernel(name: str):
    """k(rho) = E sigma(u.x) sigma(v.x) for unit u, v at <u, v> = rho, for `activation(name)`."""
    check_activation(name)
    if name == "abs":
        return arccos_kernel
    if name == "relu":
        return lambda rho: 0.25 * arccos_kernel(rho)
    c2 = hermite_coefficients(name, SERIES_DEGREE) ** 2
    return lambda rho: jnp.polyval(c2[::-1], rho)


def kernel_truncation_error(name: str) -> Float[Array, ""]:
    """Bound on |k(rho) - series| for |rho| <= 1: the Hermite energy above degree 40 (0 for
    the closed-form kernels)."""
    if name in ("abs", "relu"):
        return jnp.zeros(())
    return second_moment(name) - jnp.sum(hermite_coefficients(name, SERIES_DEGREE) ** 2)


class MultiIndexTarget(eqx.Module):
    """f*(x) = sum_{j<=r} sigma(<w*_j, x>): `directions` (r, d) with orthonormal rows."""

    directions: Float[Array, "r d"]
    activation: str = eqx.field(static=True)

    def __init__(self, directions, activation: str = "abs"):
        check_activation(activation)
        directions = jnp.asarray(directions)
        check_shape("directions", directions, (None, None))
        r, d = directions.shape
        if r > d:
            raise ValueError(f"`directions` must have r <= d, got r = {r} > d = {d}")
        gram = directions @ directions.T
        err = jnp.max(jnp.abs(gram - jnp.eye(r, dtype=gram.dtype)))
        self.directions = check_value(
            directions, err <= 1e-6, "the target `directions` must be orthonormal"
        )
        self.activation = activation

    @property
    def rank(self) -> int:
        return self.directions.shape[0]

    def __call__(self, x: Float[Array, " d"]) -> Float[Array, ""]:
        return jnp.sum(activation(self.activation)(self.directions @ x))

    def predict(self, X: Float[Array, "n d"]) -> Float[Array, " n"]:
        return jnp.sum(activation(self.activation)(X @ self.directions.T), axis=1)


def standard_target(r: int, d: int, activation: str = "abs", dtype=None) -> MultiIndexTarget:
    """The target with w*_j = e_j, j <= r."""
    if not isinstance(r, int) or not isinstance(d, int) or not 1 <= r <= d:
        raise ValueError(f"need integers 1 <= r <= d, got r = {r!r}, d = {d!r}")
    dtype = jnp.zeros(()).dtype if dtype is None else dtype
    return MultiIndexTarget(jnp.eye(r, d, dtype=dtype), activation)


class MeanFieldNet(eqx.Module):
    """f_W(x) = (1/m) sum_i ||w_i||^2 sigma(<w_i / ||w_i||, x>), W (m, d), two-homogeneous."""

    W: Float[Array, "m d"]
    activation: str = eqx.field(static=True)

    def __init__(self, W, activation: str = "abs"):
        check_activation(activation)
        W = jnp.asarray(W)
        check_shape("W", W, (None, None))
        self.W, self.activation = W, activation

    def __call__(self, x: Float[Array, " d"]) -> Float[Array, ""]:
        return self.predict(x[None, :])[0]

    def predict(self, X: Float[Array, "n d"]) -> Float[Array, " n"]:
        norms = jnp.linalg.norm(self.W, axis=1)
        pre = (X @ self.W.T) / norms
        return activation(self.activation)(pre) @ (norms**2) / self.W.shape[0]


def mean_field_init(m: int, d: int, *, key: PRNGKeyArray, dtype=None) -> Float[Array, "m d"]:
    """w_i ~ N(0, I_d / d): the standard initialization, ||w_i|| ~ 1."""
    dtype = jnp.zeros(()).dtype if dtype is None else dtype
    return jax.random.normal(key, (m, d), dtype) / jnp.sqrt(d)


def _cross(A, B, k):
    """(1/(m_A m_B)) sum_{a,b} ||a||^2 ||b||^2 k(<a/||a||, b/||b||>) = E f_A(x) f_B(x)."""
    na, nb = jnp.sum(A * A, axis=1), jnp.sum(B * B, axis=1)
    rho = (A / jnp.sqrt(na)[:, None]) @ (B / jnp.sqrt(nb)[:, None]).T
    return na @ k(rho) @ nb / (A.shape[0] * B.shape[0])


def population_loss(W: Float[Array, "m d"], target: MultiIndexTarget) -> Float[Array, ""]:
    """L(W) = 1/2 E_{x ~ N(0, I)} (f_W(x) - f*(x))^2 in closed form (module docstring)."""
    check_shape("W", W, (None, target.directions.shape[1]))
    k = dual_kernel(target.activation)
    r = target.rank
    sq = jnp.sum(W * W, axis=1)
    cross = jnp.sum(sq @ k((W / jnp.sqrt(sq)[:, None]) @ target.directions.T)) / W.shape[0]
    const = r * k(jnp.ones(())) + r * (r - 1) * k(jnp.zeros(()))
    return 0.5 * (_cross(W, W, k) - 2.0 * cross + const)


def population_distance(
    W1: Float[Array, "m1 d"], W2: Float[Array, "m2 d"], activation_name: str
) -> Float[Array, ""]:
    """1/2 E_{x ~ N(0, I)} (f_W1(x) - f_W2(x))^2 in closed form, for two mean-field nets."""
    k = dual_kernel(activation_name)
    return 0.5 * (_cross(W1, W1, k) - 2.0 * _cross(W1, W2, k) + _cross(W2, W2, k))


def symmetrize(
    W: Float[Array, "m d"], r: int, *, key: PRNGKeyArray, num: int
) -> Float[Array, "M d"]:
    """Weights of f~_K(x) = (1/K) sum_k f_W(rho_k x) for K = `num` random elements rho_k of the
    group of coordinate sign flips and permutations of the d - r irrelevant coordinates.

    f_W(rho x) is the net with weights rho^T w_i, so f~_K is the mean-field net of the K m rows
    (rho_k^T w_i) (same 1/(Km) normalization). The exact group average f~ is the orthogonal
    projection of f_W on the group-invariant functions; f* is invariant, hence
    L(f) = 1/2 E (f~ - f*)^2 + 1/2 E (f - f~)^2 exactly, and for f~_K up to a cross term
    that vanishes as K grows.
    """
    m, d = W.shape
    ks, kp = jax.random.split(key)
    signs = jax.random.rademacher(ks, (num, d), W.dtype)
    perms = jax.vmap(
        lambda k: jnp.concatenate([jnp.arange(r), r + jax.random.permutation(k, d - r)])
    )(jax.random.split(kp, num))
    return jax.vmap(lambda s, p: (W * s[None, :])[:, p])(signs, perms).reshape(num * m, d)


def sample_loss(
    W: Float[Array, "m d"],
    X: Float[Array, "n d"],
    y: Float[Array, " n"],
    activation_name: str,
    batch_size: int | None = None,
) -> Float[Array, ""]:
    """1/(2n) sum_i (f_W(x_i) - y_i)^2, over batches of `batch_size` rows (n must divide)."""
    n = X.shape[0]
    net = MeanFieldNet(W, activation_name)
    if batch_size is None or batch_size >= n:
        r = net.predict(X) - y
        return 0.5 * jnp.mean(r * r)
    if n % batch_size:
        raise ValueError(f"`batch_size` must divide n = {n}, got {batch_size}")
    Xb = X.reshape(n // batch_size, batch_size, -1)
    yb = y.reshape(n // batch_size, batch_size)

    def chunk(total, xy):
        r = net.predict(xy[0]) - xy[1]
        return total + jnp.sum(r * r), None

    total, _ = jax.lax.scan(chunk, jnp.zeros((), X.dtype), (Xb, yb))
    return 0.5 * total / n
