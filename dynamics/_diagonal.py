"""Diagonal linear networks: beta = u * u - v * v, the canonical saddle-to-saddle model.

Pesme and Flammarion, "Saddle-to-Saddle Dynamics in Diagonal Linear Networks", NeurIPS 2023
(arXiv 2304.00488). `theory.diagonal_jumps` predicts the alpha -> 0 limit of the gradient
flow from u = v = alpha 1; `integrators.diagonal_flow` integrates it exactly in log form;
`integrators.gradient_flow` integrates this module directly (`units=diagonal_units(model)`
puts every coordinate on its own log scale).
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from theory.checks import (
    check_alpha,
    check_data,
    check_dtype,
    check_finite,
    check_model,
    check_positive_int,
    check_shape,
    check_value,
)


class DiagonalNet(eqx.Module):
    """The diagonal linear network x -> <beta, x> with beta = u * u - v * v.

    >>> net = DiagonalNet(jnp.array([1.0, 2.0]), jnp.array([0.5, 3.0]))
    >>> net.beta.tolist(), float(net(jnp.array([1.0, 1.0])))
    ([0.75, -5.0], -4.25)
    """

    u: Float[Array, " d"]
    v: Float[Array, " d"]

    @property
    def beta(self) -> Float[Array, " d"]:
        return self.u * self.u - self.v * self.v

    def __call__(self, x: Float[Array, "... d"]) -> Float[Array, "..."]:
        return x @ self.beta


def diagonal_init(d: int, alpha, *, dtype=None) -> DiagonalNet:
    """u = v = alpha 1 (beta = 0), the initialization of the saddle-to-saddle regime.

    **Arguments:**

    - `d`: input dimension, a positive int.
    - `alpha`: the initialization scale, one real number in (0, 1) whose square does not
      underflow `dtype` (alpha = 1e-30 needs float64).
    - `dtype`: floating dtype (default: JAX's default float).

    **Returns:** a `DiagonalNet` with u = v = alpha 1, both of shape (d,).

    **Raises:** `ValueError` where `d` is not a positive int, `alpha` is not one real number in
    (0, 1) or alpha**2 underflows `dtype`, or `dtype` is not floating (or is float64 without
    x64 enabled).

    >>> diagonal_init(3, 1e-3).u.tolist()
    [0.001, 0.001, 0.001]
    """
    d = check_positive_int("d", d)
    dtype = jnp.zeros(()).dtype if dtype is None else check_dtype(dtype)
    alpha = jnp.asarray(check_alpha(alpha, dtype), dtype)
    u = jnp.full(d, alpha, dtype)
    return DiagonalNet(u, u)


def diagonal_loss(model: DiagonalNet, data: tuple) -> Float[Array, ""]:
    """L(beta) = 1/(2n) ||X beta - y||^2 on `data` = (X, y), X (n, d) and y (n,): a
    `loss(model, args)` for `integrators.gradient_flow`. The flow evaluates it at trial states
    too, and a trial state that overflows raises here: pass `dynamics.unchecked.diagonal_loss`
    to the flow and let its step control reject the step.

    **Arguments:**

    - `model`: a `DiagonalNet` with finite `u` and `v`, both of shape (d,).
    - `data`: the pair `(X, y)` (a tuple or list): `X` (n, d) with n >= 1 and `y` (n,), real
      and finite (integers and nested lists are converted to floating arrays).

    **Returns:** the loss L(beta), a scalar.

    **Raises:** `ValueError` where `model` is not a `DiagonalNet`, `data` is not a pair, `u`,
    `v`, `X` or `y` are not real or not of these shapes, `X` has no rows, any of them is not
    finite, or the loss overflows (inf or nan); the value checks go through `eqx.error_if`
    when traced.

    >>> net = DiagonalNet(jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0]))
    >>> float(diagonal_loss(net, (jnp.eye(2), jnp.array([1.0, 1.0]))))
    1.0
    """
    check_model("model", model, DiagonalNet)
    check_shape("model.u", model.u, (None,))
    d = jnp.shape(model.u)[0]
    check_shape("model.v", model.v, (d,))
    X, y = check_data(data, d=d)  # (n, d) and (n,), n >= 1; nested lists are arrays too
    u, v = check_finite("model.u", model.u), check_finite("model.v", model.v)
    data = (check_finite("X", X), check_finite("y", y))
    value = _diagonal_loss(DiagonalNet(u, v), data)
    return check_value(
        value,
        jnp.isfinite(value),
        "the loss overflows (inf or nan: u*u, v*v or the residuals pass float's range; u near "
        "1e154 or larger): scale the model or the data",
    )


def _diagonal_loss(model: DiagonalNet, data: tuple) -> Float[Array, ""]:
    """`diagonal_loss` without its checks (`dynamics.unchecked`).

    It checks nothing, and that is its point: a flow's vector field evaluates it at every
    step, trial states included, where a check would run each time (and, traced, be a host
    callback); check the arguments once outside the loop, or use the checked
    `dynamics.diagonal_loss`. Invalid input is not refused: it gives wrong numbers, inf or
    nan, or whatever error JAX meets on the way.

    **Arguments:**

    - `model`: a `DiagonalNet` (its type is not checked: anything with `u` and `v`), `u` and
      `v` of shape (d,).
    - `data`: the pair `(X, y)` of arrays (not converted: nested lists fail), `X` (n, d) with
      n >= 1 and `y` (n,).

    **Returns:** L(beta) = 1/(2n) ||X beta - y||^2 with beta = u * u - v * v, a scalar; inf or
    nan where it overflows (not refused, unlike `dynamics.diagonal_loss`).
    """
    X, y = data
    r = X @ (model.u * model.u - model.v * model.v) - y
    return 0.5 * jnp.mean(r * r)


def diagonal_units(model: DiagonalNet) -> DiagonalNet:
    """Unit labels for `integrators.gradient_flow(..., units=...)`: every u_i and v_i its own
    unit (each has its own log scale at small initialization).

    **Arguments:**

    - `model`: a `DiagonalNet` with `u` and `v` of shape (d,).

    **Returns:** a `DiagonalNet` of integer labels: `u` = 0, ..., d - 1 and `v` = d, ...,
    2d - 1.

    **Raises:** `ValueError` where `model` is not a `DiagonalNet` or `u` and `v` are not both
    of shape (d,).

    >>> diagonal_units(diagonal_init(2, 0.1)).v.tolist()
    [2, 3]
    """
    check_model("model", model, DiagonalNet)
    check_shape("model.u", model.u, (None,))
    d = jnp.shape(model.u)[0]
    check_shape("model.v", model.v, (d,))
    labels: Int[Array, " d"] = jnp.arange(2 * d)
    return DiagonalNet(labels[:d], labels[d:])
