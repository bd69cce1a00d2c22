"""Gradient descent on margin losses for the leaky-ReLU net with a fixed second layer.

Only W moves, and every gradient of W lies in the span of the samples: dL/dw_j =
sum_i (dL/dp_ji) x_i with p_ji = <w_j, x_i>. So GD is run exactly on the coefficients C of
W_t = W_0 + C_t X, with pre-activations P_t = P_0 + C_t X X^T: one step costs O(m n^2) instead
of O(m n d). The update C <- C - eta dL/dP is `optax.sgd` applied to the gradient with respect
to P, which is exactly GD on W. The normalized variant replaces L by log L (the step divided
by the loss), so the margin grows linearly in t instead of like log t.

Paper: *Directional Convergence, Benign Overfitting of Gradient Descent in leaky ReLU two-layer
Neural Networks* (ICLR 2026, arXiv:2505.16204).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Bool, Float, Int

from dynamics import LeakyReLUNet, check_margin_loss, leaky_relu
from dynamics.unchecked import log_margin_loss, margin_loss
from theory import RESULTS, AbstractSolution
from theory.checks import (
    check_finite,
    check_flag,
    check_matrix,
    check_model,
    check_plus_minus_one,
    check_positive,
    check_shape,
    inexact,
)

from ._gd import checkpoint_steps


class MarginGradientDescentSolution(AbstractSolution):
    """Result of `margin_gradient_descent`.

    - `steps` (C,): log-spaced checkpoint step counts (static; the first is step 1).
    - `loss` (C,), `log_loss` (C,): L and log L there (log L stays finite where L underflows).
    - `trajectory`: the network at every checkpoint (a `LeakyReLUNet` whose `W` is (C, m, d));
      `patterns` (C, m, n): the activation pattern [<w_j, x_i> > 0] there; `activated` (C,):
      whether a_j y_i <x_i, w_j> > 0 for all; `min_margin` (C,):
      min_i y_i f(x_i; W_t) / ||W_t||_F.
    - `model`: the final network; `learning_rate`: the step.
    - `result`: `RESULTS.successful`, or `RESULTS.diverged` where the weights or the loss
      became non-finite. `stats`: `{"num_steps": max_steps}`.

    >>> net = LeakyReLUNet(jnp.zeros((2, 2)), jnp.array([1.0, -1.0]), 0.1)
    >>> sol = margin_gradient_descent(jnp.eye(2), jnp.array([1.0, -1.0]), net,
    ...                               learning_rate=0.1, max_steps=100, num_checkpoints=3)
    >>> sol.steps.tolist(), sol.trajectory.W.shape
    ([1, 10, 100], (3, 2, 2))
    """

    result: RESULTS
    stats: dict
    steps: Int[Array, " C"]
    loss: Float[Array, " C"]
    log_loss: Float[Array, " C"]
    trajectory: LeakyReLUNet
    patterns: Bool[Array, "C m n"]
    activated: Bool[Array, " C"]
    min_margin: Float[Array, " C"]
    model: LeakyReLUNet
    learning_rate: Float[Array, ""]


def margin_gradient_descent(
    X: Float[Array, "n d"],
    y: Float[Array, " n"],
    model: LeakyReLUNet,
    *,
    learning_rate,
    max_steps: int = 1_000_000,
    num_checkpoints: int = 60,
    loss: str = "exponential",
    normalized: bool = False,
    throw: bool = False,
) -> MarginGradientDescentSolution:
    """W_{t+1} = W_t - eta grad L(W_t), or - eta grad log L(W_t) when `normalized`.

    L(W) = (1/n) sum_i l(y_i f(x_i; W)) with l(u) = exp(-u) (default) or log(1 + exp(-u)),
    computed overflow-safe (`dynamics.margin_loss`). The second layer `model.a` stays fixed.

    **Arguments:**

    - `X` (n, d): real, finite inputs; `y` (n,): labels, each +1 or -1.
    - `model`: a `dynamics.LeakyReLUNet` with `W` (m, d), finite; its `a` is not trained.
    - `learning_rate`: eta > 0, finite (a scalar; an array under `jax.vmap`).
    - `max_steps` >= 1: the steps of the one compiled loop; `num_checkpoints` >= 1: how many
      log-spaced steps are recorded (`checkpoint_steps`).
    - `loss`: `"exponential"` (l(u) = exp(-u)) or `"logistic"` (log(1 + exp(-u))).
    - `normalized`: step on log L instead of L.
    - `throw`: raise where the run diverged instead of saying so through `result`.

    **Returns:** a `MarginGradientDescentSolution` (loss, trajectory, activation patterns and
    normalized margins at the checkpoints). Pure and `jax.vmap`-able over models and data.

    **Raises:** `ValueError` where `model` is not a `LeakyReLUNet`, `X` is not a real 2-D
    array, `y` is not (n,) of +-1, `model.W` is not (m, d), `loss` is another name,
    `normalized` is not a bool, a checkpoint count is not positive, or `X`, `model.W`,
    `model.a` or `learning_rate` are not finite (`learning_rate` not > 0).

    >>> X = jnp.array([[3.0, 1.0], [-3.0, 1.0]]); y = jnp.array([1.0, -1.0])
    >>> net = LeakyReLUNet(jnp.zeros((2, 2)), jnp.array([1.0, -1.0]), 0.1)
    >>> sol = margin_gradient_descent(X, y, net, learning_rate=0.1, max_steps=1000)
    >>> bool(sol.ok), bool(sol.activated[-1]), bool(sol.loss[-1] < sol.loss[0])
    (True, True, True)
    """
    check_model("model", model, LeakyReLUNet)
    X = check_matrix("X", X)
    n, d = X.shape
    check_shape("y", y, (n,))
    check_shape("model.W", model.W, (None, d))
    check_margin_loss(loss)
    normalized = check_flag("normalized", normalized)
    targets = checkpoint_steps(max_steps, num_checkpoints)
    y = check_plus_minus_one("y", y)
    X = check_finite("X", inexact(X, model.W.dtype, name="X"))
    model = LeakyReLUNet(
        check_finite("model.W", model.W), check_finite("model.a", model.a), model.gamma
    )
    eta = jnp.asarray(check_positive("learning_rate", learning_rate, scalar=True), model.W.dtype)
    out = _descend(X, y, model, eta, jnp.asarray(targets), loss, normalized)
    return out.raise_if_failed(throw)


@eqx.filter_jit
def _descend(X, y, model, eta, targets, loss, normalized):
    """`margin_gradient_descent` past its checks, one program per call shape."""
    a, gamma = model.a, model.gamma
    gram = X @ X.T
    P0 = model.W @ X.T

    def margins_of(P):
        return y * (a @ leaky_relu(P, gamma))  # y_i f(x_i) from the pre-activations

    def objective(P):
        margins = margins_of(P)
        return log_margin_loss(margins, loss) if normalized else margin_loss(margins, loss)

    grad = jax.grad(objective)
    optimizer = optax.sgd(eta)

    def body(_, carry):
        C, opt_state = carry
        updates, opt_state = optimizer.update(grad(P0 + C @ gram), opt_state, C)
        return optax.apply_updates(C, updates), opt_state

    def run_to(carry, bounds):
        start, stop = bounds
        carry = jax.lax.fori_loop(start, stop, body, carry)
        C = carry[0]
        P = P0 + C @ gram
        margins = margins_of(P)
        W = model.W + C @ X
        top = jnp.max(jnp.abs(W))  # f is 1-homogeneous in W: the normalized margin is formed
        top = jnp.where(top > 0, top, 1.0)  # on W / max |W| (||W|| overflowed at 1e200)
        record = (
            log_margin_loss(margins, loss),
            W,
            P > 0,
            jnp.all(a[:, None] * y[None, :] * P > 0),
            jnp.min(margins_of(P / top)) / jnp.linalg.norm(W / top),
        )
        return carry, record

    starts = jnp.concatenate([jnp.zeros(1, int), targets[:-1]])
    C0 = jnp.zeros((model.W.shape[0], X.shape[0]), model.W.dtype)
    (C, _), (log_loss, W, patterns, activated, min_margin) = jax.lax.scan(
        run_to, (C0, optimizer.init(C0)), (starts, targets)
    )
    finite = jnp.all(jnp.isfinite(C)) & jnp.all(~jnp.isnan(log_loss))
    return MarginGradientDescentSolution(
        steps=targets,
        loss=jnp.exp(log_loss),
        log_loss=log_loss,
        trajectory=jax.vmap(lambda w: LeakyReLUNet(w, a, gamma))(W),
        patterns=patterns,
        activated=activated,
        min_margin=min_margin,
        model=LeakyReLUNet(model.W + C @ X, a, gamma),
        learning_rate=eta,
        result=RESULTS.where(finite, RESULTS.successful, RESULTS.diverged),
        stats={"num_steps": targets[-1]},
    )
