"""Full-batch gradient descent with optax, in one compiled loop, on any inputs (in the data
basis where they are orthonormal).

Paper: *Mildly Overparameterized ReLU Networks on Orthogonal Data: Incremental Learning and
Implicit Bias* (NeurIPS 2026, arXiv:2605.27097).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, Int

from dynamics import TwoLayerReLU, square_loss, tangent_kernel_max
from theory import RESULTS, AbstractSolution
from theory.checks import (
    check_finite,
    check_flag,
    check_matrix,
    check_model,
    check_orthonormal_rows,
    check_positive,
    check_positive_int,
    check_representable,
    check_shape,
    check_value,
    inexact,
    is_concrete,
)


class GradientDescentSolution(AbstractSolution):
    """Result of `gradient_descent` and `stable_gradient_descent`.

    - `steps` (C,): the log-spaced checkpoint step counts (static, the same for every seed).
    - `loss` (C,): L after that many steps; once stopped, the last loss is repeated.
    - `model`: the final parameters; `final_loss`: L at the end; `learning_rate`: the step.
    - `result`: `RESULTS.successful` when L fell to `tol`; `RESULTS.diverged` when the run
      stopped because L became non-finite or exceeded `max_loss`; `RESULTS.max_steps_reached`
      when `max_steps` ran out first. `stats`: `{"num_steps": steps taken}`.

    >>> model = TwoLayerReLU(jnp.array([0.1]), jnp.array([[0.1, 0.0]]))
    >>> sol = gradient_descent(jnp.eye(2), jnp.array([1.0, 0.0]), model, learning_rate=0.5,
    ...                        max_steps=10)
    >>> sol.result == RESULTS.max_steps_reached, int(sol.stats["num_steps"])
    (Array(True, dtype=bool), 10)
    """

    result: RESULTS
    stats: dict
    steps: Int[Array, " C"]
    loss: Float[Array, " C"]
    model: TwoLayerReLU
    final_loss: Float[Array, ""]
    learning_rate: Float[Array, ""]


def checkpoint_steps(max_steps: int, num_checkpoints: int) -> np.ndarray:
    """Log-spaced, distinct step counts 1 <= k <= max_steps, ending at max_steps.

    **Arguments:** `max_steps`: the last step count (at least 1); `num_checkpoints`: how many
    (at least 1; fewer come back where the log-spaced counts repeat).

    **Returns:** a NumPy int array of the step counts, ascending.

    **Raises:** `ValueError` on a non-positive `max_steps` or `num_checkpoints`.

    >>> checkpoint_steps(1000, 4).tolist()
    [1, 10, 100, 1000]
    """
    max_steps = check_positive_int("max_steps", max_steps)  # True is not 1
    num_checkpoints = check_positive_int("num_checkpoints", num_checkpoints)
    grid = np.geomspace(1, max_steps, num_checkpoints)
    return np.unique(np.round(grid).astype(np.int64))


def _basis_loss(params, y):
    """L = 1/(2n) sum_i (sum_j a_j relu(v_ji) - y_i)^2 with v_ji = <w_j, x_i>."""
    a, V = params
    r = a @ jax.nn.relu(V) - y
    return 0.5 * jnp.mean(r * r)


def _input_loss(params, X, y):
    """L = 1/(2n) sum_i (sum_j a_j relu(<w_j, x_i>) - y_i)^2 in the parameters (a, W)."""
    a, W = params
    return _basis_loss((a, W @ X.T), y)


def _is_orthonormal(X, atol=1e-6) -> bool | None:
    """Whether the rows of a concrete X are orthonormal to `atol`; None for a traced X."""
    if not is_concrete(X):
        return None
    X = np.asarray(X, dtype=np.float64)
    return bool(np.max(np.abs(X @ X.T - np.eye(X.shape[0]))) <= atol)


def gradient_descent(
    X: Float[Array, "n d"],
    y: Float[Array, " n"],
    model: TwoLayerReLU,
    *,
    learning_rate,
    tol: float = 1e-10,
    max_steps: int = 1_000_000,
    num_checkpoints: int = 100,
    max_loss=jnp.inf,
    orthonormal: bool | None = None,
    throw: bool = False,
) -> GradientDescentSolution:
    """theta_{k+1} = theta_k - eta grad L(theta_k) (`optax.sgd`) until L <= `tol` or `max_steps`.

    A run whose loss becomes non-finite or exceeds `max_loss` (an unstable step) stops there
    with `result = RESULTS.diverged`, instead of spending the remaining steps.

    L = 1/(2n) sum_i (h(x_i) - y_i)^2 on inputs `X` (n, d), any: n > d, correlated or
    duplicated rows. **Which dynamics** (`orthonormal`):

    - `True`: X has orthonormal rows (`ValueError` otherwise, max |X X^T - I| <= 1e-6), and GD
      is run exactly in the data basis v_ji = <w_j, x_i>: the gradient of w_j lies in
      span{x_i}, so the part of w_j orthogonal to the data never moves, and one step costs
      O(m n) instead of O(m n d). The coupling |X X^T - I| <= 1e-6 is ignored: this is GD for
      exactly orthonormal inputs (the dynamics of `orthogonal_flow`); at small alpha, GD on
      the given float64 X differs once that coupling is not far below alpha (measured in
      `orthogonal_flow`'s docstring).
    - `False`: GD on the given X itself, coupling and all (the dynamics of `two_layer_flow`
      with `gram_tol=0`), in the parameters (a, W): O(m n d) per step.
    - `None` (default): `True` where X is concrete with orthonormal rows, else `False`;
      inside `jit`/`vmap` (X traced) `True`, checked (pass `orthonormal=False` there for
      other inputs).

    One compiled loop: a
    `lax.scan` over log-spaced checkpoints (`checkpoint_steps`), each a `lax.while_loop` of
    steps that stops early once converged. GD with step eta follows the gradient flow at
    ordinary time t = k eta, i.e. rescaled time k eta / log(1/alpha). Pure and `jax.vmap`-able
    over models and data; `learning_rate` may be an array, so an eta sweep does not recompile.

    **Arguments:**

    - `X` (n, d): inputs; `y` (n,): labels (no broadcasting).
    - `model`: the `TwoLayerReLU` start.
    - `learning_rate`: eta > 0 (an array under `vmap`).
    - `tol`: stop once L <= `tol`; `max_steps`: the step budget.
    - `num_checkpoints`: log-spaced save points (`checkpoint_steps`).
    - `max_loss`: a loss above it (or non-finite) is divergence.
    - `orthonormal`: which dynamics (above).
    - `throw`: raise unless the run converged.

    **Returns:** a `GradientDescentSolution` (the loss at the checkpoints, the final loss
    and model, `result`: successful, `max_steps_reached` or `diverged`; `stats`).

    **Raises:** `ValueError` on bad shapes or dtypes, non-finite data, a non-positive
    `learning_rate`, `tol` or `max_steps`, or `orthonormal=True` with rows that are not
    orthonormal.

    >>> X, y = jnp.eye(2), jnp.array([1.0, -1.0])
    >>> model = TwoLayerReLU(jnp.array([0.1, -0.1]), 0.1 * jnp.eye(2))
    >>> sol = gradient_descent(X, y, model, learning_rate=0.5)
    >>> bool(sol.ok), bool(sol.final_loss <= 1e-10), int(sol.stats["num_steps"]) < 200
    (True, True, True)

    Correlated inputs (n > d here) run GD on X itself:

    >>> X = jnp.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
    >>> sol = gradient_descent(X, jnp.array([1.0, 1.4, 0.8]), model, learning_rate=0.5)
    >>> bool(sol.ok)
    True
    """
    check_model("model", model, TwoLayerReLU)
    X = check_matrix("X", X)
    n, d = X.shape
    if orthonormal is None:
        orthonormal = _is_orthonormal(X) is not False
    orthonormal = check_flag("orthonormal", orthonormal)
    check_shape("y", y, (n,))
    check_shape("model.W", model.W, (None, d))
    check_representable(model.a, model.W)
    targets = checkpoint_steps(max_steps, num_checkpoints)
    X = check_finite("X", inexact(X, model.a.dtype, name="X"))
    if orthonormal:
        hint = "; for GD on other inputs pass `orthonormal=False`"
        X = check_orthonormal_rows("X", X, hint=hint)
    y = check_finite("y", inexact(y, model.a.dtype, name="y"))
    tol = check_positive("tol", tol, allow_zero=True, scalar=True)
    max_loss = check_value(
        max_loss, jnp.asarray(max_loss) >= 0, f"`max_loss` must be >= 0 (inf: none), got {max_loss}"
    )
    a0 = check_finite("model.a", model.a)
    eta = jnp.asarray(check_positive("learning_rate", learning_rate, scalar=True), model.a.dtype)
    W0 = check_finite("model.W", model.W)
    out = _descend(X, y, a0, W0, eta, tol, max_loss, jnp.asarray(targets), orthonormal)
    return out.raise_if_failed(throw)


@functools.partial(jax.jit, static_argnums=8)
def _descend(X, y, a0, W0, eta, tol, max_loss, targets, orthonormal):
    """`gradient_descent` past its checks, one program per call shape."""
    optimizer = optax.sgd(eta)
    if orthonormal:
        value_and_grad = jax.value_and_grad(_basis_loss)
    else:
        value_and_grad = jax.value_and_grad(lambda params, y: _input_loss(params, X, y))

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

    V0 = W0 @ X.T if orthonormal else W0
    params0 = (a0, V0)
    loss0, grad0 = value_and_grad(params0, y)
    carry0 = (params0, optimizer.init(params0), jnp.zeros((), jnp.int32), loss0, grad0)
    ((a, V), _, step, loss, _), losses = jax.lax.scan(run_to, carry0, targets)
    result = RESULTS.where(
        loss <= tol,
        RESULTS.successful,
        RESULTS.where(loss <= max_loss, RESULTS.max_steps_reached, RESULTS.diverged),
    )
    return GradientDescentSolution(
        steps=targets,
        loss=losses,
        model=TwoLayerReLU(a, W0 + (V - V0) @ X if orthonormal else V),
        final_loss=loss,
        learning_rate=eta,
        result=result,
        stats={"num_steps": step},
    )


def stable_gradient_descent(
    X: Float[Array, "n d"],
    y: Float[Array, " n"],
    model: TwoLayerReLU,
    *,
    kernel_max=None,
    halvings: int = 16,
    tol: float = 1e-10,
    max_steps: int = 1_000_000,
    num_checkpoints: int = 100,
    orthonormal: bool | None = None,
    throw: bool = False,
) -> GradientDescentSolution:
    """`gradient_descent` at the largest stable step found by halving:
    eta = 2^-k / lambda_max(K(theta_0)) for the smallest k in 0..`halvings` whose run neither
    blows up (L > 10 L_0 or non-finite, where it stops at once) nor ends above L_0.

    K is the tangent kernel (`dynamics.tangent_kernel`); 1 / lambda_max is half the edge of
    stability 2 / lambda_max, and the kernel can grow during training at small width, hence
    the halving.

    **Arguments:**

    - `X` (n, d), `y` (n,), `model` (a `dynamics.TwoLayerReLU`): as for `gradient_descent`.
    - `kernel_max`: lambda_max(K(theta_0)) > 0 where it is already known (inside a sharded
      sweep on XLA:CPU, compute it outside: LAPACK there can deadlock, see
      `integrators.sweep`); None computes it (`dynamics.tangent_kernel_max`).
    - `halvings` >= 0: the most halvings of the step tried.
    - `tol`, `max_steps`, `num_checkpoints`, `orthonormal`, `throw`: `gradient_descent`'s.

    **Returns:** the `GradientDescentSolution` of the run at the step that was used (its
    `learning_rate`).

    **Raises:** `ValueError` where `model` is not a `TwoLayerReLU`, `kernel_max` is not
    finite and > 0 (0 at a flat saddle: no step can be read from it), `halvings` is not a
    non-negative int, or on anything `gradient_descent` refuses.

    >>> X, y = jnp.eye(2), jnp.array([1.5, -0.5])
    >>> model = TwoLayerReLU(jnp.array([1.0, -1.0]), jnp.eye(2))
    >>> sol = stable_gradient_descent(X, y, model, max_steps=10_000)
    >>> bool(sol.ok), float(sol.learning_rate)  # lambda_max(K) = 1 here
    (True, 1.0)
    """
    check_model("model", model, TwoLayerReLU)
    if kernel_max is None:
        kernel_max = tangent_kernel_max(model, X)
    kernel_max = check_positive("kernel_max", kernel_max, scalar=True)  # 0 at a flat saddle
    halvings = check_positive_int("halvings", halvings, minimum=0)
    eta0 = 1.0 / kernel_max
    loss0 = square_loss(model, (X, y))

    def attempt(k):
        return gradient_descent(
            X,
            y,
            model,
            learning_rate=eta0 * 0.5**k,
            tol=tol,
            max_steps=max_steps,
            num_checkpoints=num_checkpoints,
            max_loss=10 * loss0,
            orthonormal=orthonormal,
        )

    def unstable(sol):
        return (sol.result == RESULTS.diverged) | ~(sol.final_loss < loss0)

    _, out = jax.lax.while_loop(
        lambda c: (c[0] < halvings) & unstable(c[1]),
        lambda c: (c[0] + 1, attempt(c[0] + 1)),
        (jnp.zeros((), int), attempt(0)),
    )
    return out.raise_if_failed(throw)
