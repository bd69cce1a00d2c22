"""Full-batch gradient descent with optax, in one compiled loop, on orthonormal data."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Bool, Float, Int

from dynamics import TwoLayerReLU
from dynamics._checks import check_orthonormal_rows, check_representable, check_shape


class GDSolution(eqx.Module):
    """Result of `gradient_descent`.

    - `steps` (C,): the log-spaced checkpoint step counts (static, the same for every seed).
    - `loss` (C,): L after that many steps; once converged, the converged loss is repeated.
    - `model`: the final parameters; `num_steps`: steps taken; `final_loss`: L at the end.
    - `converged`: whether L fell to `tol` within `max_steps`.
    - `diverged`: whether the run stopped because L became non-finite or exceeded `max_loss`.
    """

    steps: Int[Array, " C"]
    loss: Float[Array, " C"]
    model: TwoLayerReLU
    num_steps: Int[Array, ""]
    final_loss: Float[Array, ""]
    converged: Bool[Array, ""]
    diverged: Bool[Array, ""]


def checkpoint_steps(max_steps: int, num_checkpoints: int) -> np.ndarray:
    """Log-spaced, distinct step counts 1 <= k <= max_steps, ending at max_steps."""
    grid = np.geomspace(1, max_steps, num_checkpoints)
    return np.unique(np.round(grid).astype(np.int64))


def _basis_loss(params, y):
    """L = 1/(2n) sum_i (sum_j a_j relu(v_ji) - y_i)^2 with v_ji = <w_j, x_i>."""
    a, V = params
    r = a @ jax.nn.relu(V) - y
    return 0.5 * jnp.mean(r * r)


def gradient_descent(
    model: TwoLayerReLU,
    X: Float[Array, "n d"],
    y: Float[Array, " n"],
    *,
    learning_rate=0.5,
    tol: float = 1e-10,
    max_steps: int = 1_000_000,
    num_checkpoints: int = 100,
    max_loss=jnp.inf,
) -> GDSolution:
    """theta_{k+1} = theta_k - eta grad L(theta_k) (`optax.sgd`) until L <= `tol` or `max_steps`.

    A run whose loss becomes non-finite or exceeds `max_loss` (an unstable step) stops there
    and reports `diverged`, instead of spending the remaining steps.

    L = 1/(2n) sum_i (h(x_i) - y_i)^2 on inputs `X` with orthonormal rows (`ValueError`
    otherwise). Because the rows are orthonormal, GD is run exactly in the data basis
    v_ji = <w_j, x_i>: the gradient of w_j lies in span{x_i}, so the part of w_j orthogonal to
    the data never moves, and one step costs O(m n) instead of O(m n d). One compiled loop: a
    `lax.scan` over log-spaced checkpoints (`checkpoint_steps`), each a `lax.while_loop` of
    steps that stops early once converged. GD with step eta follows the gradient flow at
    ordinary time t = k eta, i.e. rescaled time k eta / log(1/alpha). Pure and `jax.vmap`-able
    over models and data; `learning_rate` may be an array, so an eta sweep does not recompile.

    ```python
    sol = jax.jit(lambda m: gradient_descent(m, X, y, learning_rate=0.5))(model)
    sol.converged, sol.num_steps
    ```
    """
    n, d = X.shape
    check_shape("y", y, (n,))
    check_shape("model.W", model.W, (None, d))
    check_representable(model)
    if max_steps < 1:
        raise ValueError(f"`max_steps` must be >= 1, got {max_steps}")
    X = check_orthonormal_rows("X", X)
    optimizer = optax.sgd(learning_rate)
    value_and_grad = jax.value_and_grad(_basis_loss)

    def body(carry):
        params, opt_state, step, _, grad = carry
        updates, opt_state = optimizer.update(grad, opt_state, params)
        params = optax.apply_updates(params, updates)
        loss, grad = value_and_grad(params, y)
        return params, opt_state, step + 1, loss, grad

    def run_to(carry, target):
        carry = jax.lax.while_loop(
            lambda c: (c[2] < target) & (c[3] > tol) & (c[3] <= max_loss), body, carry
        )
        return carry, carry[3]

    V0 = model.W @ X.T
    params0 = (model.a, V0)
    loss0, grad0 = value_and_grad(params0, y)
    carry0 = (params0, optimizer.init(params0), jnp.zeros((), jnp.int32), loss0, grad0)
    targets = checkpoint_steps(max_steps, num_checkpoints)
    ((a, V), _, step, loss, _), losses = jax.lax.scan(run_to, carry0, jnp.asarray(targets))
    return GDSolution(
        steps=jnp.asarray(targets),
        loss=losses,
        model=TwoLayerReLU(a, model.W + (V - V0) @ X),
        num_steps=step,
        final_loss=loss,
        converged=loss <= tol,
        diverged=~(loss <= max_loss),
    )
