"""Critical points of any Equinox model's loss: the Hessian's spectrum and their polishing.

`hessian_spectrum` gives the eigenvalues of H = d^2 loss / d theta^2 over the model's inexact
arrays: all of them from the dense Hessian for small models, or the k extreme ones by Lanczos
on Hessian-vector products (forward-over-reverse, never forming H). `critical_point` polishes
a point to the nearest critical point grad L = 0 by Levenberg-Marquardt on the gradient
(optimistix), which converges to saddles as well as minima, and reports the gradient norm, the
loss and the Morse index (the number of negative eigenvalues: 0 at a minimum, >= 1 at a
saddle). The loss must be twice differentiable where it is evaluated (a ReLU net is, away
from its kinks).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, Float, Int

from theory import RESULTS, Solution
from theory.checks import check_positive, check_positive_int


def _flat(model, loss, args):
    if not isinstance(model, eqx.Module):
        raise ValueError(f"`model` must be an Equinox module, got {type(model).__name__}")
    if not callable(loss):
        raise ValueError(f"`loss` must be callable as loss(model, args), got {loss!r}")
    params, static = eqx.partition(model, eqx.is_inexact_array)
    if not jax.tree_util.tree_leaves(params):
        raise ValueError("`model` has no inexact arrays (theta is empty)")
    flat, unravel = ravel_pytree(params)

    def f(x):
        return loss(eqx.combine(unravel(x), static), args)

    shape = jax.eval_shape(f, flat)
    if shape.shape != ():
        raise ValueError(f"`loss(model, args)` must return a scalar, got shape {shape.shape}")
    return flat, f, lambda x: eqx.combine(unravel(x), static)


def _lanczos(hvp, dim, num, key, dtype):
    """`num` Lanczos steps with full reorthogonalization; returns the Ritz values. Where the
    Krylov space closes (an invariant subspace: beta ~ 0), it restarts from a random vector
    orthogonal to the basis, with beta = 0 (T splits into blocks; its eigenvalues stay exact)."""
    v0 = jax.random.normal(key, (dim,), dtype)
    v0 = v0 / jnp.linalg.norm(v0)
    eps = jnp.finfo(dtype).eps

    def orthogonalize(V, w):
        w = w - V.T @ (V @ w)  # twice is enough
        return w - V.T @ (V @ w)

    def step(carry, i):
        V, alphas, betas, scale = carry
        v = V[i]
        w = hvp(v)
        a = jnp.dot(w, v)
        scale = jnp.maximum(scale, jnp.linalg.norm(w))
        w = orthogonalize(V, w)
        b = jnp.linalg.norm(w)
        breakdown = b <= 1e3 * eps * jnp.maximum(scale, 1.0)
        fresh = orthogonalize(V, jax.random.normal(jax.random.fold_in(key, i), (dim,), dtype))
        nxt = jnp.where(breakdown, fresh / jnp.linalg.norm(fresh), w / jnp.where(b > 0, b, 1.0))
        V = V.at[i + 1].set(nxt)
        b = jnp.where(breakdown, 0.0, b)
        return (V, alphas.at[i].set(a), betas.at[i].set(b), scale), None

    V = jnp.zeros((num + 1, dim), dtype).at[0].set(v0)
    init = (V, jnp.zeros((num,), dtype), jnp.zeros((num,), dtype), jnp.zeros((), dtype))
    (V, alphas, betas, _), _ = jax.lax.scan(step, init, jnp.arange(num))
    T = jnp.diag(alphas) + jnp.diag(betas[:-1], 1) + jnp.diag(betas[:-1], -1)
    return jnp.linalg.eigvalsh(T)


def hessian_spectrum(
    model, loss, args=None, *, k: int | None = None, steps: int | None = None, key=None
):
    """Eigenvalues of the loss Hessian over the model's inexact arrays, ascending.

    `k=None`: all of them, from the dense Hessian (P x P for P parameters). `k`: the k
    smallest and the k largest (2k values, ascending), from `steps` (default
    min(P, 2k + 40)) Lanczos steps on Hessian-vector products with full reorthogonalization
    (`key` starts it; default PRNGKey(0)). Ritz values converge to the extremes fastest where
    they are well separated from the rest of the spectrum; for clustered extremes raise
    `steps` (at `steps` = P they are exact).

    >>> model = eqx.nn.Linear(2, 1, use_bias=False, key=jax.random.PRNGKey(0))
    >>> loss = lambda m, x: 0.5 * jnp.sum(m(x) ** 2)  # H = x x^T
    >>> [round(v, 6) for v in hessian_spectrum(model, loss, jnp.array([3.0, 4.0])).tolist()]
    [0.0, 25.0]
    """
    flat, f, _ = _flat(model, loss, args)
    dim = flat.shape[0]
    if k is None:
        return jnp.linalg.eigvalsh(jax.hessian(f)(flat))
    k = check_positive_int("k", k)
    if 2 * k > dim:
        raise ValueError(f"`k` must be at most P / 2 = {dim // 2} for P = {dim} parameters")
    grad = jax.grad(f)

    def hvp(v):
        return jax.jvp(grad, (flat,), (v,))[1]

    ritz = _lanczos(
        hvp, dim, min(dim, 2 * k + 40), jax.random.PRNGKey(0) if key is None else key, flat.dtype
    )
    return jnp.concatenate([ritz[:k], ritz[-k:]])


class CriticalPoint(Solution):
    """Result of `critical_point`.

    - `model`: the polished model; `loss`, `grad_norm`: loss(model, args) and ||grad|| there.
    - `eigenvalues` (P,): the Hessian's spectrum there, ascending; `morse_index`: how many
      are below -`eig_tol` x max |eigenvalue| (0: a minimum, >= 1: a saddle).
    - `result`, `stats` (`num_steps`: Newton iterations): `ok` when ||grad|| < `tol`.

    >>> class P(eqx.Module):
    ...     p: jax.Array
    >>> loss = lambda m, args: (m.p[0] ** 2 - 1.0) ** 2 + m.p[1] ** 2
    >>> cp = critical_point(P(jnp.array([0.1, 0.2])), loss)  # Newton finds the saddle at 0
    >>> bool(cp.ok), float(cp.loss), int(cp.morse_index)
    (True, 1.0, 1)
    """

    model: eqx.Module
    loss: Float[Array, ""]
    grad_norm: Float[Array, ""]
    eigenvalues: Float[Array, " P"]
    morse_index: Int[Array, ""]


def critical_point(
    model,
    loss,
    args=None,
    *,
    tol: float | None = None,
    max_steps: int = 1000,
    eig_tol: float | None = None,
    throw: bool = False,
) -> CriticalPoint:
    """Polish `model` to the nearest critical point of loss(model, args), and classify it.

    Solves grad L(theta) = 0 as a least-squares problem with Levenberg-Marquardt
    (`optimistix.LevenbergMarquardt`; the residual's Jacobian is the Hessian): damped Newton
    steps, attracted to every nondegenerate critical point, saddles included, so that started
    near a plateau of a training run it finds the saddle the run lingers at, and robust where
    the Hessian is singular (minima of overparameterized models form manifolds; plain Newton
    steps fail there or jump far). `tol`: the gradient norm that counts as critical (`result`
    is `RESULTS.nonlinear_divergence` or `max_steps_reached` when it is not reached, e.g. at a
    local minimum of ||grad L|| that is no critical point); `max_steps`: iterations; `eig_tol`:
    relative threshold of the Morse index. Their defaults follow the dtype: 1e-10 and 1e-8
    in float64, 1e-6 and 1e-4 in float32 (which cannot resolve a gradient much below 1e-7:
    polish in float64 where it matters). `throw=True` raises on failure.

    **Returns:** a `CriticalPoint` (the dense Hessian is formed: for small models).
    """
    flat, f, rebuild = _flat(model, loss, args)
    double = jnp.finfo(flat.dtype).bits >= 64
    tol = check_positive("tol", (1e-10 if double else 1e-6) if tol is None else tol, scalar=True)
    eig_tol = (1e-8 if double else 1e-4) if eig_tol is None else eig_tol
    max_steps = check_positive_int("max_steps", max_steps)
    eig_tol = check_positive("eig_tol", eig_tol, scalar=True)
    grad = jax.grad(f)
    # Levenberg-Marquardt on the residual grad L (its Jacobian is the Hessian): damped Newton
    # steps, which neither jump off across an indefinite region nor fail where the Hessian is
    # singular (the minima of an overparameterized model form a manifold)
    solver = optx.LevenbergMarquardt(rtol=1e-14, atol=1e-14)
    sol = optx.least_squares(lambda x, _: grad(x), solver, flat, max_steps=max_steps, throw=False)
    x = sol.value
    g = jnp.linalg.norm(grad(x))
    eigenvalues = jnp.linalg.eigvalsh(jax.hessian(f)(x))
    scale = jnp.max(jnp.abs(eigenvalues))
    morse = jnp.sum(eigenvalues < -eig_tol * scale)
    converged = jnp.isfinite(g) & (g < tol)
    result = RESULTS.where(
        converged,
        RESULTS.successful,
        RESULTS.where(
            sol.result == optx.RESULTS.successful,
            RESULTS.nonlinear_divergence,
            RESULTS.promote(sol.result),
        ),
    )
    return CriticalPoint(
        model=rebuild(x),
        loss=f(x),
        grad_norm=g,
        eigenvalues=eigenvalues,
        morse_index=morse,
        result=result,
        stats={"num_steps": sol.stats["num_steps"]},
    ).raise_if_failed(throw)
