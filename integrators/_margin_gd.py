"""Gradient descent on margin losses for the leaky-ReLU net with a fixed second layer.

Only W moves, and every gradient of W lies in the span of the samples: dL/dw_j =
sum_i (dL/dp_ji) x_i with p_ji = <w_j, x_i>. So GD is run exactly on the coefficients C of
W_t = W_0 + C_t X, with pre-activations P_t = P_0 + C_t X X^T: one step costs O(m n^2) instead
of O(m n d). The update C <- C - eta dL/dP is `optax.sgd` applied to the gradient with respect
to P, which is exactly GD on W. The normalized variant replaces L by log L (the step divided
by the loss), so the margin grows linearly in t instead of like log t.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Bool, Float, Int

from dynamics import LeakyReLUNet, leaky_relu, log_margin_loss, margin_loss
from dynamics._checks import check_shape
from dynamics._leaky import LOSSES, check_labels

from ._gd import checkpoint_steps


class MarginGDSolution(eqx.Module):
    """Result of `margin_gradient_descent`.

    - `steps` (C,): log-spaced checkpoint step counts (static; the first is step 1).
    - `loss` (C,), `log_loss` (C,): L and log L there (log L stays finite where L underflows).
    - `W` (C, m, d): the first layer at every checkpoint; `patterns` (C, m, n): the activation
      pattern [<w_j, x_i> > 0] there; `activated` (C,): whether a_j y_i <x_i, w_j> > 0 for all.
    - `model`: the final network; `min_margin` (C,): min_i y_i f(x_i; W_t) / ||W_t||_F.
    """

    steps: Int[Array, " C"]
    loss: Float[Array, " C"]
    log_loss: Float[Array, " C"]
    W: Float[Array, "C m d"]
    patterns: Bool[Array, "C m n"]
    activated: Bool[Array, " C"]
    min_margin: Float[Array, " C"]
    model: LeakyReLUNet


def margin_gradient_descent(
    model: LeakyReLUNet,
    X: Float[Array, "n d"],
    y: Float[Array, " n"],
    *,
    learning_rate,
    max_steps: int = 1_000_000,
    num_checkpoints: int = 60,
    loss: str = "exponential",
    normalized: bool = False,
) -> MarginGDSolution:
    """W_{t+1} = W_t - eta grad L(W_t), or - eta grad log L(W_t) when `normalized`.

    L(W) = (1/n) sum_i l(y_i f(x_i; W)) with l(u) = exp(-u) (default) or log(1 + exp(-u)),
    computed overflow-safe (`dynamics.margin_loss`). The second layer `model.a` stays fixed.
    One compiled loop of `max_steps` steps, recorded at `num_checkpoints` log-spaced steps
    (`checkpoint_steps`); pure and `jax.vmap`-able over models and data; `learning_rate` may be
    an array.

    ```python
    net = small_leaky_init(10, 400, 0.1, scale=1e-8, key=key)
    sol = margin_gradient_descent(net, X, y, learning_rate=0.05, max_steps=10**5)
    sol.activated[0]  # every neuron activated after the first step
    ```
    """
    n, d = X.shape
    check_shape("y", y, (n,))
    check_shape("model.W", model.W, (None, d))
    if loss not in LOSSES:
        raise ValueError(f"`loss` must be one of {LOSSES}, got {loss!r}")
    if max_steps < 1:
        raise ValueError(f"`max_steps` must be >= 1, got {max_steps}")
    y = check_labels(y)
    a, gamma = model.a, model.gamma
    gram = X @ X.T
    P0 = model.W @ X.T

    def margins_of(P):
        return y * (a @ leaky_relu(P, gamma))  # y_i f(x_i) from the pre-activations

    def objective(P):
        margins = margins_of(P)
        return log_margin_loss(margins, loss) if normalized else margin_loss(margins, loss)

    grad = jax.grad(objective)
    optimizer = optax.sgd(learning_rate)

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
        record = (
            log_margin_loss(margins, loss),
            W,
            P > 0,
            jnp.all(a[:, None] * y[None, :] * P > 0),
            jnp.min(margins) / jnp.linalg.norm(W),
        )
        return carry, record

    targets = checkpoint_steps(max_steps, num_checkpoints)
    starts = jnp.concatenate([jnp.zeros(1, int), jnp.asarray(targets[:-1])])
    C0 = jnp.zeros((model.W.shape[0], n), model.W.dtype)
    (C, _), (log_loss, W, patterns, activated, min_margin) = jax.lax.scan(
        run_to, (C0, optimizer.init(C0)), (starts, jnp.asarray(targets))
    )
    return MarginGDSolution(
        steps=jnp.asarray(targets),
        loss=jnp.exp(log_loss),
        log_loss=log_loss,
        W=W,
        patterns=patterns,
        activated=activated,
        min_margin=min_margin,
        model=LeakyReLUNet(model.W + C @ X, a, gamma),
    )


def one_minus_cos(W: Float[Array, "... m d"], W_star: Float[Array, "m d"]) -> Float[Array, "..."]:
    """1 - cos(W, W*) = ||W/||W|| - W*/||W*|| ||^2 / 2, accurate down to 1e-32 (no cancellation)."""
    u = W / jnp.linalg.norm(W, axis=(-2, -1), keepdims=True)
    v = W_star / jnp.linalg.norm(W_star)
    return 0.5 * jnp.sum((u - v) ** 2, axis=(-2, -1))
