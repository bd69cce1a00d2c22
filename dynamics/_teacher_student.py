"""Gaussian teacher-student: the population (infinite-data) loss of a two-layer student
against a two-layer teacher on x ~ N(0, I_d).

    f(x) = sum_j a_j sigma(w_j . x + b_j),   f*(x) = sum_k c_k sigma*(v_k . x + e_k),
    L = 1/2 E_x (f(x) - f*(x))^2 = 1/2 (a^T K_ss a - 2 a^T K_st c + c^T K_tt c),

with K_ij = E[sigma(u_i) sigma'(u_j)] over the jointly Gaussian pre-activations
u_i = w_i . x + b_i: means b_i, variances q_i = |w_i|^2, covariances w_i . w_j. The kernel of
two units depends on (q_1, q_2, c = w_1 . w_2, b_1, b_2) only. Derived here (the standard
Gaussian integrals; Cho and Saul 2009 for the arc-cosine forms, Williams 1997 for erf):

- No biases, with rho = c / sqrt(q_1 q_2) and G(rho) = sqrt(1 - rho^2) + rho arcsin(rho):
  relu: sqrt(q_1 q_2) / (2 pi) (G(rho) + pi rho / 2); |x|: 2 sqrt(q_1 q_2) / pi G(rho);
  erf: 2/pi arcsin(2 c / sqrt((1 + 2 q_1)(1 + 2 q_2))); linear: c. G'(rho) = arcsin(rho)
  is written out, so gradients stay finite at rho = +-1 (a student unit on a teacher unit).
- With biases, one variable is integrated in closed form and the other by quadrature:
  writing u_2 = b_2 + s_2 (rho z + sqrt(1 - rho^2) z'), K = E_z[sigma(b_1 + s_1 z)
  g(b_2 + s_2 rho z, s_2 sqrt(1 - rho^2))] with g(mu, s) = E sigma(mu + s Z): relu
  mu Phi(mu/s) + s phi(mu/s); |x| mu (2 Phi(mu/s) - 1) + 2 s phi(mu/s); erf
  erf(mu / sqrt(1 + 2 s^2)); linear mu. The outer integral is split at z = -b_1 / s_1
  (sigma's kink, or erf's steepest point, a layer of width 1 / s_1) and each piece done by
  128-point Gauss-Legendre on [-L, L], L = 9.5 (the Gaussian tail beyond carries ~1e-21):
  exact to rounding for these four activations (against the no-bias closed forms: 1e-14 up
  to |w|^2 = 50, 3e-13 at |w|^2 = 1000 for erf; and against Monte Carlo). Linear with
  biases: c + b_1 b_2.
- Any other activation (a name of `theory.activation_function`, tanh, sigmoid, softplus, or
  a callable): a tensor Gauss-Hermite rule with `nodes` points per dimension;
  `teacher_student_quadrature_error` estimates its error from the changes to `2 nodes` and
  `4 nodes` points (a geometric series; `inf` where the rule does not yet converge).
  `nodes` runs from 4 to 360 (numpy's weights overflow from 380 on).

This is the setting of MLPGradientFlow.jl (Brea, Martinelli, Gerstner, Simsek), which
computes the same population losses in Julia.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erf, ndtr
from jaxtyping import Array, Float

from theory import OrderParameters, activation_function as _named_activation
from theory.checks import (
    check_finite,
    check_flag,
    check_model,
    check_shape,
    check_value,
    inexact,
)

EXACT = ("relu", "abs", "erf", "linear")
_SMOOTH_NAMED = {
    "tanh": jnp.tanh,
    "sigmoid": jax.nn.sigmoid,
    "softplus": jax.nn.softplus,
    "erf": erf,
    "linear": lambda z: z,
}
_HALF_WIDTH = 9.5  # the Gaussian tail beyond carries ~1e-21
_GL_NODES = 128


def _activation(activation):
    if callable(activation):
        return activation
    if activation in _SMOOTH_NAMED:
        return _SMOOTH_NAMED[activation]
    return _named_activation(activation)


class TwoLayerNet(eqx.Module):
    """x -> sum_j a_j sigma(w_j . x + b_j): a student or a teacher of any width.

    `W` (m, d), `a` (m,), `b` (m,) or None (no biases), `activation`: "relu", "abs", "erf",
    "linear" (exact population kernels), another name ("tanh", "sigmoid", "softplus", or one
    of `theory.activation_function`'s) or a callable (Gauss-Hermite). `train_second_layer`:
    False holds `a` fixed under `teacher_student_loss`'s gradient (a stop-gradient).

    >>> net = TwoLayerNet(jnp.eye(2), jnp.array([1.0, -1.0]), activation="relu")
    >>> float(net(jnp.array([2.0, 1.0])))
    1.0
    """

    W: Float[Array, "m d"]
    a: Float[Array, " m"]
    b: Float[Array, " m"] | None = None
    activation: object = eqx.field(static=True, default="relu")
    train_second_layer: bool = eqx.field(static=True, default=True)

    def __check_init__(self):
        # a string such as "no" was truthy: the second layer trained silently
        check_flag("train_second_layer", self.train_second_layer)

    def __call__(self, x: Float[Array, "... d"]) -> Float[Array, "..."]:
        z = x @ self.W.T + (0.0 if self.b is None else self.b)
        return self.sigma(z) @ self.a

    def sigma(self, z):
        """The activation, elementwise."""
        return _activation(self.activation)(z)


def _G(rho):
    return jnp.sqrt(jnp.maximum(1.0 - rho * rho, 0.0)) + rho * jnp.arcsin(rho)


_G = jax.custom_jvp(_G)


@_G.defjvp
def _G_jvp(primals, tangents):
    (rho,), (dr,) = primals, tangents
    return _G(rho), jnp.arcsin(rho) * dr


def _safe_sqrt(x):
    """sqrt with a finite gradient at 0 (the gradient there is taken as 0)."""
    pos = x > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def _no_bias_kernel(activation: str, q1, q2, c):
    if activation == "linear":
        return c
    if activation == "erf":
        return 2.0 / jnp.pi * jnp.arcsin(2.0 * c / jnp.sqrt((1.0 + 2.0 * q1) * (1.0 + 2.0 * q2)))
    norm = _safe_sqrt(q1) * _safe_sqrt(q2)  # sqrt(q1 q2) underflowed at |w| ~ 1e-100
    rho = jnp.clip(c / jnp.where(norm > 0, norm, 1.0), -1.0, 1.0)
    if activation == "relu":
        return norm / (2.0 * jnp.pi) * (_G(rho) + 0.5 * jnp.pi * rho)
    return 2.0 * norm / jnp.pi * _G(rho)  # abs


def _mean_activation(activation: str, mu, s):
    """g(mu, s) = E sigma(mu + s Z), Z ~ N(0, 1) (s = 0 gives sigma(mu))."""
    if activation == "linear":
        return mu
    if activation == "erf":
        return erf(mu / jnp.sqrt(1.0 + 2.0 * s * s))
    pos = s > 0
    ss = jnp.where(pos, s, 1.0)
    t = mu / ss
    phi = jnp.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)
    if activation == "relu":
        return jnp.where(pos, mu * ndtr(t) + ss * phi, jnp.maximum(mu, 0.0))
    return jnp.where(pos, mu * (2.0 * ndtr(t) - 1.0) + 2.0 * ss * phi, jnp.abs(mu))  # abs


def _gauss_legendre(k: int):
    x, w = np.polynomial.legendre.leggauss(k)
    return jnp.asarray(x), jnp.asarray(w)


def _biased_kernel(act1: str, act2: str, q1, q2, c, b1, b2):
    """K = E_z[sigma1(b1 + s1 z) g2(b2 + s2 rho z, s2 sqrt(1 - rho^2))] by Gauss-Legendre,
    split at sigma1's kink."""
    if act1 == "linear" and act2 == "linear":
        return c + b1 * b2
    s1, s2 = _safe_sqrt(q1), _safe_sqrt(q2)
    rho = jnp.clip(c / jnp.where(s1 * s2 > 0, s1 * s2, 1.0), -1.0, 1.0)
    rest = s2 * _safe_sqrt(1.0 - rho * rho)
    f1 = _activation(act1)
    x, w = _gauss_legendre(_GL_NODES)
    L = _HALF_WIDTH
    kink = jnp.clip(-b1 / jnp.where(s1 > 0, s1, 1.0), -L, L)

    def piece(lo, hi):
        z = 0.5 * (hi - lo) * x + 0.5 * (hi + lo)
        h = f1(b1 + s1 * z) * _mean_activation(act2, b2 + s2 * rho * z, rest)
        h = h * jnp.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
        return 0.5 * (hi - lo) * jnp.sum(w * h)

    if act1 == "linear":
        value = piece(-L, L)
    else:  # a kink, or erf's steepest point (a boundary layer of width 1 / s1)
        value = piece(-L, kink) + piece(kink, L)
    # a zero first-layer vector: the unit is the constant sigma1(b1)
    return jnp.where(s1 > 0, value, f1(b1) * _mean_activation(act2, b2, s2))


def _gauss_hermite_kernel(f1, f2, q1, q2, c, b1, b2, nodes: int):
    """E[f1(u1) f2(u2)] by a tensor Gauss-Hermite rule (probabilists' weights)."""
    z, w = np.polynomial.hermite_e.hermegauss(nodes)
    z, w = jnp.asarray(z), jnp.asarray(w / w.sum())
    s1 = _safe_sqrt(q1)
    # u1 = b1 + s1 z1, u2 = b2 + (c / s1) z1 + sqrt(q2 - c^2 / q1) z2 (s1 = 0: u2 = b2 + s2 z2)
    beta = jnp.where(s1 > 0, c / jnp.where(s1 > 0, s1, 1.0), 0.0)
    rest = _safe_sqrt(jnp.maximum(q2 - beta * beta, 0.0))
    u1 = b1 + s1 * z
    u2 = b2 + beta * z[:, None] + rest * z[None, :]
    return jnp.sum(w[:, None] * w[None, :] * f1(u1)[:, None] * f2(u2))


def _pair_kernel(act1, act2, w1, w2, b1, b2, biased: bool, nodes: int):
    q1, q2, c = w1 @ w1, w2 @ w2, w1 @ w2
    if act1 in EXACT and act2 in EXACT:
        if not biased and act1 == act2:
            return _no_bias_kernel(act1, q1, q2, c)
        return _biased_kernel(act1, act2, q1, q2, c, b1, b2)
    return _gauss_hermite_kernel(_activation(act1), _activation(act2), q1, q2, c, b1, b2, nodes)


def _kernel_matrix(net1: TwoLayerNet, net2: TwoLayerNet, nodes: int):
    biased = net1.b is not None or net2.b is not None
    b1 = jnp.zeros(net1.W.shape[0], net1.W.dtype) if net1.b is None else net1.b
    b2 = jnp.zeros(net2.W.shape[0], net2.W.dtype) if net2.b is None else net2.b

    def one(w1, bb1, w2, bb2):
        return _pair_kernel(net1.activation, net2.activation, w1, w2, bb1, bb2, biased, nodes)

    inner = jax.vmap(one, in_axes=(None, None, 0, 0))
    return jax.vmap(inner, in_axes=(0, 0, None, None))(net1.W, b1, net2.W, b2)


@eqx.filter_jit  # one program per call shape: eager calls would compile op by op
def _loss(model: TwoLayerNet, teacher: TwoLayerNet, nodes: int):
    a = model.a if model.train_second_layer else jax.lax.stop_gradient(model.a)
    c = jax.lax.stop_gradient(teacher.a)
    teacher = jax.lax.stop_gradient(teacher)
    ss = _kernel_matrix(model, model, nodes)
    st = _kernel_matrix(model, teacher, nodes)
    tt = _kernel_matrix(teacher, teacher, nodes)
    return 0.5 * (a @ ss @ a - 2.0 * a @ st @ c + c @ tt @ c)


def _check_net(name: str, net, d=None):
    check_model(name, net, TwoLayerNet)
    W = inexact(net.W, name=f"{name}.W")
    check_shape(f"{name}.W", W, (None, d))
    m = W.shape[0]
    if m == 0:
        raise ValueError(f"`{name}.W` must hold at least one unit, got shape {W.shape}")
    check_shape(f"{name}.a", net.a, (m,))
    if net.b is not None:
        check_shape(f"{name}.b", net.b, (m,))
    if not (callable(net.activation) or net.activation in EXACT or net.activation in _SMOOTH_NAMED):
        _named_activation(net.activation)  # raises for an unknown name
    W = check_finite(f"{name}.W", W)
    a = check_finite(f"{name}.a", inexact(net.a, name=f"{name}.a"))
    b = None if net.b is None else check_finite(f"{name}.b", inexact(net.b, name=f"{name}.b"))
    return TwoLayerNet(W, a, b, net.activation, net.train_second_layer)


# numpy's Gauss-Hermite weights overflow from 380 nodes on (NaN losses, silently)
MAX_NODES = 360


def _checked(model, teacher, nodes, most=MAX_NODES):
    model = _check_net("model", model)
    teacher = _check_net("teacher", teacher, model.W.shape[1])
    if not isinstance(nodes, int | np.integer) or isinstance(nodes, bool) or not 4 <= nodes <= most:
        raise ValueError(
            f"`nodes` must be an integer from 4 to {most} (Gauss-Hermite weights overflow "
            f"beyond), got {nodes!r}"
        )
    return model, teacher


def teacher_student_loss(
    model: TwoLayerNet, teacher: TwoLayerNet, *, nodes: int = 48
) -> Float[Array, ""]:
    """L = 1/2 E_{x ~ N(0, I_d)} (model(x) - teacher(x))^2, the population loss (module
    docstring): exact for relu, |x|, erf and linear units (with or without biases), tensor
    Gauss-Hermite with `nodes` points per dimension otherwise. A `loss(model, args)` for
    `integrators.gradient_flow` and `critical_point` with `args=teacher`; jit, vmap and
    autodiff go through it (the teacher is held fixed). The loss is smooth in the parameters
    (the Gaussian average smooths the kinks away), so integrate it with
    `gradient_flow(..., hold_kinks=False)`: the held-kink machinery would evaluate the
    kernels' own branch selections (a safe square root, a clip) on stale patterns. The flow
    also evaluates trial states, where this function's checks raise on an overflow:
    `dynamics.unchecked.teacher_student_loss` is the same loss without them.

    **Arguments:**

    - `model`: the student, a `TwoLayerNet` with `W` (m, d), m >= 1, `a` (m,) and `b` (m,)
      or `None`, all real and finite, and an activation that is a known name or a callable.
    - `teacher`: the teacher, a `TwoLayerNet` of the same kind with `W` (M, d) (held fixed
      under autodiff).
    - `nodes`: Gauss-Hermite points per dimension, an int from 4 to 360 (default 48); used
      only where an activation is not relu, |x|, erf or linear.

    **Returns:** the population loss L, a scalar.

    **Raises:** `ValueError` where `model` or `teacher` is not a `TwoLayerNet`, its `W` is not
    2-D with at least one unit (the teacher's of the student's d), its `a` or `b` is not of
    shape (m,), its activation is an unknown name, its parameters are not real and finite,
    `nodes` is not an int from 4 to 360, or the loss is not finite (an overflow, or a
    callable activation returning non-finite values); the value checks go through
    `eqx.error_if` when traced.

    A student equal to its teacher has loss 0; one zero unit against a relu unit w has
    1/2 E relu(w . x)^2 = |w|^2 / 4:

    >>> teacher = TwoLayerNet(jnp.array([[1.0, 2.0]]), jnp.array([1.0]))
    >>> float(teacher_student_loss(teacher, teacher))
    0.0
    >>> student = TwoLayerNet(jnp.zeros((1, 2)), jnp.array([1.0]))
    >>> round(float(teacher_student_loss(student, teacher)), 12)
    1.25
    """
    model, teacher = _checked(model, teacher, nodes)
    return _finite_loss(_loss(model, teacher, nodes))


def _finite_loss(value):
    """The loss, refused where it overflows (a weight near 1e154 or larger gave inf or nan)."""
    return check_value(
        value,
        jnp.isfinite(value),
        "the population loss is not finite (inf or nan): it overflows from weights near "
        "1e154 or larger (their second moments pass float's range: scale `model` and "
        "`teacher`), or a callable activation returns non-finite values",
    )


def _unchecked_loss(model: TwoLayerNet, teacher: TwoLayerNet, nodes: int = 48):
    """`teacher_student_loss` without its checks (`dynamics.unchecked`).

    It checks nothing, and that is its point: a flow's vector field evaluates it at every
    step, trial states included, where a check would run each time (and, traced, be a host
    callback); check the arguments once outside the loop, or use the checked
    `dynamics.teacher_student_loss`. Invalid input is not refused: it gives wrong numbers,
    inf or nan, or whatever error JAX meets on the way.

    **Arguments:**

    - `model`: the student, a `TwoLayerNet` with `W` (m, d), `a` (m,) and `b` (m,) or `None`
      (`a` held fixed where `train_second_layer` is False).
    - `teacher`: the teacher, a `TwoLayerNet` with `W` (M, d) (held fixed under autodiff).
    - `nodes`: Gauss-Hermite points per dimension, a Python int (default 48; positional or
      keyword here), used only where an activation is not relu, |x|, erf or linear. Not
      checked (the checked version takes 4 to 360): from 380 on numpy's weights overflow and
      the loss comes out nan.

    **Returns:** the population loss L, a scalar (jit-compiled, one program per call shape);
    inf or nan where it overflows (not refused, unlike `dynamics.teacher_student_loss`).
    """
    return _loss(model, teacher, nodes)


def teacher_student_quadrature_error(
    model: TwoLayerNet, teacher: TwoLayerNet, *, nodes: int = 48
) -> Float[Array, ""]:
    """The Gauss-Hermite error estimate of `teacher_student_loss` at `nodes`: with
    e1 = |L(n) - L(2n)| and e2 = |L(2n) - L(4n)|, the sum of a geometric series of
    corrections, e1 / (1 - q) with q = e2 / e1, where the rule converges (q < 1/2); `inf`
    where it does not (a steep unit, tanh(30 w . x): e1 alone was 10 times below the error
    at 48 nodes); 0 where every kernel is exact.

    **Arguments:**

    - `model`, `teacher`: the student and the teacher, as in `teacher_student_loss`.
    - `nodes`: Gauss-Hermite points per dimension, an int from 4 to 90 (default 48; 4 x 90 =
      360, `teacher_student_loss`'s most).

    **Returns:** the estimated error of `teacher_student_loss(model, teacher, nodes=nodes)`,
    a scalar: 0, finite or `inf` as above.

    **Raises:** `ValueError` where `teacher_student_loss` refuses `model` or `teacher`,
    `nodes` is not an int from 4 to 90, or the loss at `nodes` is not finite (through
    `eqx.error_if` when traced).

    >>> teacher = TwoLayerNet(jnp.array([[1.0, 0.5]]), jnp.array([1.0]), activation="tanh")
    >>> student = TwoLayerNet(jnp.array([[0.5, 0.5]]), jnp.array([1.0]), activation="tanh")
    >>> [bool(teacher_student_quadrature_error(student, teacher, nodes=k) < 1e-6) for k in (16, 64)]
    [False, True]
    """  # noqa: E501
    model, teacher = _checked(model, teacher, nodes, MAX_NODES // 4)
    coarse = _finite_loss(_loss(model, teacher, nodes))
    middle, fine = _loss(model, teacher, 2 * nodes), _loss(model, teacher, 4 * nodes)
    e1, e2 = jnp.abs(coarse - middle), jnp.abs(middle - fine)
    q = e2 / jnp.where(e1 > 0, e1, 1.0)
    converging = (e1 > 0) & (q < 0.5)
    estimate = jnp.where(converging, e1 / (1.0 - jnp.where(converging, q, 0.0)), jnp.inf)
    return jnp.where((e1 == 0) & (e2 == 0), 0.0, estimate)


def order_parameters(model: TwoLayerNet, teacher: TwoLayerNet) -> OrderParameters:
    """The order parameters of a student and its teacher (no biases, one activation):
    Q = W W^T, R = W W*^T, T = W* W*^T, a and c, the state of `theory.online_sgd_ode`.

    **Arguments:**

    - `model`: the student, a `TwoLayerNet` with `W` (K, d) and `a` (K,), real and finite.
    - `teacher`: the teacher, a `TwoLayerNet` with `W*` (M, d), `c` = its `a` (M,), and the
      student's activation.

    Biases are not refused: a `b` of either net is checked like the others and then ignored.

    **Returns:** an `OrderParameters` with Q (K, K), R (K, M), T (M, M), a (K,) and c (M,), in
    the student's dtype.

    **Raises:** `ValueError` where `model` or `teacher` fails `teacher_student_loss`'s checks
    of the nets (not a `TwoLayerNet`, wrong shapes, an unknown activation name, parameters
    not real and finite) or the two activations differ.

    >>> teacher = TwoLayerNet(jnp.eye(2), jnp.ones(2), activation="erf")
    >>> student = TwoLayerNet(jnp.array([[2.0, 0.0]]), jnp.ones(1), activation="erf")
    >>> order_parameters(student, teacher).R.tolist()
    [[2.0, 0.0]]
    """
    model = _check_net("model", model)
    teacher = _check_net("teacher", teacher, model.W.shape[1])
    if model.activation != teacher.activation:
        raise ValueError(
            f"`model` and `teacher` must share one activation, got {model.activation!r} and "
            f"{teacher.activation!r}"
        )
    W, V = model.W, teacher.W.astype(model.W.dtype)
    return OrderParameters(
        Q=W @ W.T, R=W @ V.T, T=V @ V.T, a=model.a, c=teacher.a.astype(model.a.dtype)
    )
