"""The Hessian's spectrum of any Equinox model's loss, dense or matrix-free.

`hessian_spectrum` gives eigenvalues of H = d^2 L / d theta^2 over the model's inexact arrays
(theta, flattened in `jax.flatten_util.ravel_pytree` order): all of them from the dense Hessian
for small models, or the k extreme eigenpairs by thick-restart block Lanczos on
Hessian-vector products (forward-over-reverse, never forming H), run until each residual
||H v - lambda v|| is below a stated tolerance, with the Morse index read from them. The
helpers here are shared with `_critical` (polishing and saddles).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, Bool, Float, Int

from theory import RESULTS, AbstractSolution
from theory.checks import check_key, check_positive, check_positive_int

from ._krylov import thick_restart_lanczos

DENSE_MAX = 1024  # parameters up to which the dense Hessian is the default
KINDS = ("any", "minimum")
SPECTRUM_RESTARTS = 30  # Lanczos restarts for the spectrum at a polished point


def _check_model_and_loss(model, loss, args):
    if not isinstance(model, eqx.Module):
        raise ValueError(f"`model` must be an Equinox module, got {type(model).__name__}")
    if not callable(loss):
        raise ValueError(f"`loss` must be callable as loss(model, args), got {loss!r}")
    params = eqx.filter(model, eqx.is_inexact_array)
    leaves = jax.tree_util.tree_leaves(params)
    if not leaves or sum(leaf.size for leaf in leaves) == 0:
        raise ValueError("`model` has no parameters (its inexact arrays are empty: theta is empty)")
    dtypes = {leaf.dtype for leaf in leaves}
    if len(dtypes) > 1:
        raise ValueError(
            f"`model`'s inexact arrays must share one dtype, got {sorted(map(str, dtypes))}"
        )
    shape = eqx.filter_eval_shape(loss, model, args)
    if getattr(shape, "shape", None) != ():
        got = getattr(shape, "shape", type(shape).__name__)
        raise ValueError(f"`loss(model, args)` must return a scalar, got shape {got}")
    return sum(leaf.size for leaf in leaves), leaves[0].dtype


def _flat(model, loss, args):
    """theta (P,), L(theta) and theta -> model."""
    params, static = eqx.partition(model, eqx.is_inexact_array)
    flat, unravel = ravel_pytree(params)

    def rebuild(x):
        return eqx.combine(unravel(x), static)

    def f(x):
        return loss(rebuild(x), args)

    return flat, f, rebuild


def _defaults(dtype):
    double = jnp.finfo(dtype).bits >= 64
    return (1e-10, 1e-6) if double else (1e-5, 1e-3)  # (tol, eig_tol)


class HessianSpectrumSolution(AbstractSolution):
    """Result of `hessian_spectrum`.

    - `eigenvalues` (num,): ascending; all P of them (`k=None`), or the k smallest then the
      k largest (num = 2k).
    - `vectors` (num, P) or None: unit eigenvectors in `ravel_pytree` order of the model's
      inexact arrays (None for the dense `k=None` path, which calls `eigvalsh`).
    - `residuals` (num,) or None: ||H v - lambda v|| of each pair (exact products, not a
      recurrence's estimate); each eigenvalue lies within its residual of a true eigenvalue.
    - `scale`: max |eigenvalue| (the Lanczos estimate of ||H||); tolerances are relative to it.
    - `morse_index`: the number of eigenvalues below -`eig_tol` x `scale`; `morse_exact`: True
      where that count is settled, False where it is only a lower bound (by interlacing,
      the i-th smallest Ritz value is never below the i-th smallest eigenvalue): all k of the
      smallest are negative (raise `k`), or a Ritz value's residual straddles the threshold
      (an unresolved near-null cluster).
    - `result`: successful, `unconverged_eigenvalues` (residuals above `tol` x `scale` after
      `max_restarts`) or `nonfinite_point`; `stats`: `num_hvps`, `num_restarts`.
    """

    result: RESULTS
    stats: dict
    eigenvalues: Float[Array, " num"]
    vectors: Float[Array, "num P"] | None
    residuals: Float[Array, " num"] | None
    scale: Float[Array, ""]
    morse_index: Int[Array, ""]
    morse_exact: Bool[Array, ""]


def _morse(values, scale, eig_tol, k, dim, residuals=None):
    """(Morse index, exact?) from ascending values: all P, or the k smallest + k largest.

    With Lanczos residuals r, a Ritz value theta only says that an eigenvalue lies in
    [theta - r, theta + r]: the count is exact where each counted value is certainly below
    the threshold -eig_tol x scale (theta + r below it), and either a value among the k
    smallest is certainly above it (theta - r above it: the count is complete) or all values
    are certainly below it (the index is P)."""
    threshold = -eig_tol * scale
    if k is None:
        return jnp.sum(values < threshold), jnp.asarray(True)
    r = jnp.zeros_like(values) if residuals is None else residuals
    negative = values < threshold
    low = jnp.sum(negative[:k])
    certain = jnp.all(jnp.where(negative, values + r < threshold, values - r > threshold)[:k])
    all_negative = values[-1] + r[-1] < threshold  # then every eigenvalue is
    index = jnp.where(all_negative, dim, low)
    complete = (low < k) | (2 * k == dim)
    return index, all_negative | (certain & complete)


@eqx.filter_jit
def _dense_hessian(model, loss, args):
    """H, and whether the loss and its gradient are finite at the point (a Hessian can be
    finite where they are not: a NaN bias of a linear model leaves H = X^T X / n)."""
    flat, f, _ = _flat(model, loss, args)
    value, grad = jax.value_and_grad(f)(flat)
    return jax.hessian(f)(flat), jnp.isfinite(value) & jnp.all(jnp.isfinite(grad))


def _dense_spectrum(model, loss, args, k, eig_tol):
    """The dense path. Called eagerly, the eigen-decomposition runs in NumPy's LAPACK (faster
    than `jnp.linalg.eigvalsh` on CPU at a few thousand parameters); traced (inside `jit`), in
    jax."""
    H, finite_point = _dense_hessian(model, loss, args)
    dim = H.shape[0]
    # traced if either is (under vmap over a model of constant curvature H is concrete and
    # only the point's finiteness is batched: bool() of it failed)
    traced = isinstance(H, jax.core.Tracer) or isinstance(finite_point, jax.core.Tracer)
    xp = jnp if traced else np
    Hx = H if xp is jnp else np.asarray(H)
    finite_h = xp.all(xp.isfinite(Hx)) & (finite_point if xp is jnp else bool(finite_point))
    Hx = xp.where(finite_h, Hx, 0.0)  # LAPACK is not asked to decompose a NaN matrix
    if k is None:
        values = xp.linalg.eigvalsh(Hx)
        vectors = residuals = None
        finite = finite_h
    else:
        values, V = xp.linalg.eigh(Hx)
        pick = xp.concatenate([xp.arange(k), xp.arange(dim - k, dim)])
        values, vectors = values[pick], V[:, pick].T
        residuals = xp.linalg.norm(vectors @ Hx - values[:, None] * vectors, axis=1)
        finite = finite_h
        vectors, residuals = jnp.asarray(vectors), jnp.asarray(residuals)
    values = jnp.where(finite, jnp.asarray(values), jnp.nan)
    scale = jnp.max(jnp.abs(values))
    morse, exact = _morse(values, scale, eig_tol, k, dim)
    result = RESULTS.where(jnp.asarray(finite), RESULTS.successful, RESULTS.nonfinite_point)
    stats = {"num_hvps": jnp.asarray(dim), "num_restarts": jnp.asarray(0)}
    return HessianSpectrumSolution(
        eigenvalues=values, vectors=vectors, residuals=residuals, scale=scale,
        morse_index=morse, morse_exact=jnp.asarray(exact), result=result, stats=stats,
    )  # fmt: skip


def _hvp_at(f, x):
    grad = jax.grad(f)
    return lambda v: jax.jvp(grad, (x,), (v,))[1]


def _lanczos_at(f, x, k, steps, block, tol, max_restarts, eig_tol, key):
    out = thick_restart_lanczos(
        _hvp_at(f, x), x.size, k, steps, block, tol, max_restarts, key, x.dtype
    )
    finite = jnp.all(jnp.isfinite(out.values)) & jnp.all(jnp.isfinite(out.residuals))
    value, grad = jax.value_and_grad(f)(x)  # the point itself (HVPs can be finite where not)
    finite = finite & jnp.isfinite(value) & jnp.all(jnp.isfinite(grad))
    morse, exact = _morse(out.values, out.scale, eig_tol, k, x.size, out.residuals)
    result = RESULTS.where(
        ~finite,
        RESULTS.nonfinite_point,
        RESULTS.where(out.converged, RESULTS.successful, RESULTS.unconverged_eigenvalues),
    )
    return HessianSpectrumSolution(
        eigenvalues=jnp.where(finite, out.values, jnp.nan),
        vectors=out.vectors,
        residuals=out.residuals,
        scale=out.scale,
        morse_index=morse,
        morse_exact=exact & finite,
        result=result,
        stats={"num_hvps": out.hvps, "num_restarts": out.restarts},
    )


@eqx.filter_jit
def _lanczos_spectrum(model, loss, args, k, steps, block, tol, max_restarts, eig_tol, key):
    flat, f, _ = _flat(model, loss, args)
    return _lanczos_at(f, flat, k, steps, block, tol, max_restarts, eig_tol, key)


def _check_lanczos_options(k, steps, block, max_restarts, dim):
    k = check_positive_int("k", k)
    if 2 * k > dim:
        raise ValueError(
            f"`k` must be at most P / 2 = {dim // 2} for P = {dim} parameters, got {k}"
        )
    block = check_positive_int("block", block)
    if steps is None:
        steps = min(dim, max(60, 6 * k + 2 * block))
    steps = check_positive_int("steps", steps)
    if steps > dim:
        raise ValueError(f"`steps` must be at most P = {dim} (the basis spans R^P), got {steps}")
    if steps < dim and steps < 2 * k + block + 1:
        raise ValueError(
            f"`steps` must be at least 2k + block + 1 = {2 * k + block + 1} (a restart keeps "
            f"the 2k wanted vectors and grows a block), or P = {dim}; got {steps}"
        )
    if block > steps:
        raise ValueError(f"`block` must be at most `steps` = {steps}, got {block}")
    max_restarts = check_positive_int("max_restarts", max_restarts, minimum=0)
    return k, steps, block, max_restarts


def hessian_spectrum(
    model,
    loss,
    *,
    args=None,
    k: int | None = None,
    steps: int | None = None,
    block: int = 2,
    tol: float | None = None,
    max_restarts: int = 200,
    eig_tol: float | None = None,
    key=None,
    throw: bool = False,
) -> HessianSpectrumSolution:
    """Eigenvalues of the loss Hessian H = d^2 L / d theta^2 over the model's inexact arrays.

    - `k=None`: all P of them, ascending, from the dense Hessian (`jax.hessian`, P x P memory,
      then LAPACK's `eigvalsh`).
    - `k`: the k smallest and the k largest with their eigenvectors (2k pairs, ascending). With
      `steps=None` and P <= 1024 they come from the dense Hessian; otherwise (or whenever
      `steps` is given) from thick-restart block Lanczos on Hessian-vector products
      (forward-over-reverse: O(steps x P) memory, H never formed): a basis of `steps`
      vectors (default min(P, max(60, 6k + 2 block))) grown by blocks of `block` vectors
      (a block resolves eigenvalues of multiplicity up to `block`), restarted from the wanted
      Ritz vectors until every residual ||H v - lambda v|| is at most `tol` x ||H||
      (default 1e-10 in float64, 1e-5 in float32), at most `max_restarts` times. With
      `steps` = P the basis spans R^P and the answer is exact. `key` draws the start
      (default PRNGKey(0)).

    A residual r bounds the distance from the Ritz value to the nearest eigenvalue by r (and
    by r^2 / gap where the gap to the rest of the spectrum is known); what Lanczos cannot
    certify is that no eigenvalue beyond the ones found exists (a multiplicity above
    `block`, or a start vector orthogonal to an eigenvector), as for any Krylov method.

    The Morse index counts eigenvalues below -`eig_tol` x max |lambda| (default 1e-6 in
    float64, 1e-3 in float32). From the k smallest it is settled (`morse_exact`) only where
    each of them lies, within its residual, on one side of the threshold and one of them
    above it; otherwise it is a lower bound.

    **Returns:** a `HessianSpectrumSolution`; `result` is `unconverged_eigenvalues` where Lanczos
    ran out of restarts and `nonfinite_point` where the loss or its derivatives are not finite there
    (eigenvalues NaN). `throw=True` raises instead.

    >>> model = eqx.nn.Linear(2, 1, use_bias=False, key=jax.random.PRNGKey(0))
    >>> loss = lambda m, x: 0.5 * jnp.sum(m(x) ** 2)  # H = x x^T
    >>> spec = hessian_spectrum(model, loss, args=jnp.array([3.0, 4.0]))
    >>> [round(v, 6) for v in spec.eigenvalues.tolist()], int(spec.morse_index)
    ([0.0, 25.0], 0)
    """
    dim, dtype = _check_model_and_loss(model, loss, args)
    tol0, eig0 = _defaults(dtype)
    tol = check_positive("tol", tol0 if tol is None else tol, scalar=True)
    eig_tol = check_positive("eig_tol", eig0 if eig_tol is None else eig_tol, scalar=True)
    if k is None:
        if steps is not None:
            raise ValueError("`steps` is for Lanczos: pass `k` (the number of extreme pairs)")
        return _dense_spectrum(model, loss, args, None, eig_tol).raise_if_failed(throw)
    k, steps_, block, max_restarts = _check_lanczos_options(k, steps, block, max_restarts, dim)
    if steps is None and dim <= DENSE_MAX:
        return _dense_spectrum(model, loss, args, k, eig_tol).raise_if_failed(throw)
    key = jax.random.PRNGKey(0) if key is None else check_key(key)
    # tolerances and the restart budget are traced: changing them does not recompile
    tol, eig_tol = jnp.asarray(tol, dtype), jnp.asarray(eig_tol, dtype)
    max_restarts = jnp.asarray(max_restarts, jnp.int32)
    sol = _lanczos_spectrum(model, loss, args, k, steps_, block, tol, max_restarts, eig_tol, key)
    return sol.raise_if_failed(throw)
