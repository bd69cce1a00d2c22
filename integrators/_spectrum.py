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
from ._memory import available_bytes

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
    - `morse_index`: the number of eigenvalues below -`eig_tol` x `scale`, where it is
      certified (`morse_exact`: from every eigenvalue of the dense Hessian, or where the
      Lanczos bounds meet), else -1: a lower bound is never reported as the index.
      `morse_lower`: a certified lower bound (by Cauchy interlacing, the count of the k
      smallest Ritz values below the threshold; the index itself where exact). With Lanczos
      the index is certified only where the k smallest and k largest Ritz values leave no
      eigenvalue unplaced; `certify=True` counts all P eigenvalues of the dense Hessian
      (formed by Hessian-vector products) up to P = 8192. `threshold`: -`eig_tol` x `scale`.
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
    morse_lower: Int[Array, ""]
    threshold: Float[Array, ""]


def _morse(values, scale, eig_tol, k, dim):
    """(Morse index, exact?, lower bound) from ascending values: all P of them (`k=None`:
    the count is exact), or the k smallest then the k largest Ritz values of a Rayleigh-Ritz
    (Lanczos) basis. By Cauchy interlacing the i-th smallest Ritz value is never below the
    i-th smallest eigenvalue, and the j-th largest never above the j-th largest: the Ritz
    values below the threshold -eig_tol x scale among the k smallest count eigenvalues that
    are certainly below it (a lower bound), those above it among the k largest count
    eigenvalues certainly above it (P minus them: an upper bound). The index is exact only
    where the two meet; elsewhere it is -1 (not known) and the lower bound is its own field.
    A residual says nothing about the count: a 300-fold cluster at -0.47 shows as one Ritz
    value with a tiny residual, and the next Ritz value above the threshold does not mean the
    next eigenvalue is (the index was reported as 8, exact-looking bounds as 1)."""
    threshold = -eig_tol * scale
    if k is None:
        count = jnp.sum(values < threshold)
        return count, jnp.asarray(True), count
    lower = jnp.sum(values[:k] < threshold)
    upper = dim - jnp.sum(values[k:] > threshold)
    exact = lower == upper
    return jnp.where(exact, lower, -1), exact, lower


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
        every = jnp.where(finite_h, jnp.asarray(values), jnp.nan)  # the count: all P of them
        pick = xp.concatenate([xp.arange(k), xp.arange(dim - k, dim)])
        values, vectors = values[pick], V[:, pick].T
        residuals = xp.linalg.norm(vectors @ Hx - values[:, None] * vectors, axis=1)
        finite = finite_h
        vectors, residuals = jnp.asarray(vectors), jnp.asarray(residuals)
    values = jnp.where(finite, jnp.asarray(values), jnp.nan)
    scale = jnp.max(jnp.abs(values))
    full = values if k is None else every
    morse, exact, lower = _morse(full, scale, eig_tol, None, dim)
    result = RESULTS.where(jnp.asarray(finite), RESULTS.successful, RESULTS.nonfinite_point)
    stats = {"num_hvps": jnp.asarray(dim), "num_restarts": jnp.asarray(0)}
    return HessianSpectrumSolution(
        eigenvalues=values, vectors=vectors, residuals=residuals, scale=scale,
        morse_index=morse, morse_exact=jnp.asarray(exact), morse_lower=lower,
        threshold=-eig_tol * scale, result=result, stats=stats,
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
    morse, exact, lower = _morse(out.values, out.scale, eig_tol, k, x.size)
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
        morse_index=jnp.where(finite, morse, -1),
        morse_exact=exact & finite,
        morse_lower=lower,
        threshold=-eig_tol * out.scale,
        result=result,
        stats={"num_hvps": out.hvps, "num_restarts": out.restarts},
    )


CERTIFY_MAX = 8192  # parameters up to which a Morse index is certified from the dense Hessian
DENSE_COPIES = 3  # P x P matrices alive at once on the dense path (H, its transpose, LAPACK's)


def check_dense_memory(dim: int, dtype, what: str) -> None:
    """`MemoryError` before a dense P x P Hessian is formed where `DENSE_COPIES` of it would
    exceed 80% of the device's memory (at P = 51,000 in float64: 62 GB; jax.hessian would
    have been killed, or swapped for minutes, without a word)."""
    need = DENSE_COPIES * dim * dim * jnp.dtype(dtype).itemsize
    have = available_bytes()
    if need > 0.8 * have:
        raise MemoryError(
            f"{what} forms the dense {dim} x {dim} Hessian: ~{need / 2**30:.0f} GiB, more than "
            f"80% of the {have / 2**30:.0f} GiB available; pass `k` (the k smallest and largest "
            "eigenpairs by Lanczos, O(steps x P) memory)"
        )


def _dense_count(model, loss, args, eig_tol, chunk: int = 128) -> tuple[int, float]:
    """The number of eigenvalues of H below -`eig_tol` x ||H||_2, and ||H||_2: all P
    eigenvalues of the dense Hessian, its columns formed `chunk` Hessian-vector products at a
    time (the memory of `jax.hessian`'s P products at once is P times one's), decomposed by
    LAPACK (`eigvalsh`: backward stable, each eigenvalue within ~P eps ||H|| of the truth, far
    inside a threshold of 1e-6 ||H||). The scale is the dense one, not a Lanczos estimate (a
    Lanczos run that did not converge may not have found ||H||)."""
    flat, f, _ = _flat(model, loss, args)
    dim = flat.size

    @jax.jit
    def columns(x, basis):
        return jax.vmap(_hvp_at(f, x))(basis)

    H = np.empty((dim, dim), np.asarray(flat).dtype)
    eye = np.eye(chunk, dtype=H.dtype)
    for lo in range(0, dim, chunk):
        hi = min(dim, lo + chunk)
        basis = np.zeros((chunk, dim), H.dtype)
        basis[: hi - lo, lo:hi] = eye[: hi - lo, : hi - lo]
        H[lo:hi] = np.asarray(columns(flat, jnp.asarray(basis)))[: hi - lo]
    H += H.T
    H *= 0.5
    values = np.linalg.eigvalsh(H)
    scale = float(np.max(np.abs(values)))
    return int(np.sum(values < -float(eig_tol) * scale)), scale


def certify_morse(spectrum: HessianSpectrumSolution, model, loss, *, args=None):
    """`spectrum` with its Morse index certified. Where the Lanczos bounds did not meet and
    P <= 8192, the eigenvalues below -eig_tol x ||H|| (`eig_tol` as `spectrum` was asked:
    its threshold over its scale) are counted among all P eigenvalues of the dense Hessian,
    whether or not Lanczos converged (a large cluster, as the 300-fold one at a wide net's
    origin saddle, can keep it from converging; the count does not need it). `threshold` and
    `scale` are then the dense ones. Beyond 8192, or at a non-finite point, it is returned as
    it is (`morse_index` -1, `morse_lower` the bound reached).

    **Arguments:**

    - `spectrum`: a `HessianSpectrumSolution` of `model` (from `hessian_spectrum` or
      `critical_point(...).spectrum`).
    - `model`, `loss`, `args`: as given to `hessian_spectrum`.

    **Returns:** the `HessianSpectrumSolution`, its `morse_index`, `morse_exact`,
    `morse_lower`, `scale` and `threshold` replaced where the count was made.

    **Raises:** `ValueError` where `spectrum` is of another number of parameters than
    `model`, or on a model or loss `hessian_spectrum` refuses. Runs on the host (not
    under `jit`): O(P^2) memory and O(P^3) time (50 s at P = 5,401 on 2 cores).
    """
    nonfinite = bool(spectrum.result == RESULTS.nonfinite_point)
    if bool(spectrum.morse_exact) or nonfinite or not bool(jnp.isfinite(spectrum.scale)):
        return spectrum
    dim, _ = _check_model_and_loss(model, loss, args)
    if spectrum.vectors is not None and spectrum.vectors.shape[-1] != dim:
        raise ValueError(
            f"`spectrum` is of {spectrum.vectors.shape[-1]} parameters, `model` has {dim}"
        )
    if dim > CERTIFY_MAX:
        return spectrum
    dt = spectrum.scale.dtype
    # `eig_tol` as asked is the threshold over the scale; a zero scale (Lanczos saw H = 0)
    # does not say it, and 0 would count rounding as negative: the dtype's default then
    scale0 = float(spectrum.scale)
    eig_tol = float(-spectrum.threshold) / scale0 if scale0 > 0 else _defaults(dt)[1]
    count, scale = _dense_count(model, loss, args, eig_tol)
    count = jnp.asarray(count)
    return eqx.tree_at(
        lambda s: (s.morse_index, s.morse_exact, s.morse_lower, s.scale, s.threshold),
        spectrum,
        (count, jnp.asarray(True), count, jnp.asarray(scale, dt),
         jnp.asarray(-eig_tol * scale, dt)),
    )  # fmt: skip


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
    certify: bool = False,
    throw: bool = False,
) -> HessianSpectrumSolution:
    """Eigenvalues of the loss Hessian H = d^2 L / d theta^2 over the model's inexact arrays.

    A residual r bounds the distance from a Ritz value to the nearest eigenvalue by r (and
    by r^2 / gap where the gap to the rest of the spectrum is known); what Lanczos cannot
    certify is that no eigenvalue beyond the ones found exists (a multiplicity above
    `block`, or a start vector orthogonal to an eigenvector), as for any Krylov method. So
    the Morse index (eigenvalues below -`eig_tol` x max |lambda|) is claimed from the k
    smallest and k largest Ritz values only where Cauchy interlacing's lower and upper
    bounds meet (`morse_exact`); elsewhere `morse_index` is -1 and `morse_lower` the bound,
    unless `certify=True` counts all P eigenvalues (`certify_morse`).

    **Arguments:**

    - `model`: an Equinox module; its inexact arrays are theta.
    - `loss`: `loss(model, args) -> scalar`, twice differentiable there.
    - `args`: passed to `loss`.
    - `k`: `None` (default): all P eigenvalues, ascending, from the dense Hessian
      (`jax.hessian`, P x P memory, then LAPACK's `eigvalsh`). An int: the k smallest and
      the k largest with their eigenvectors (2k pairs, ascending): from the dense Hessian
      where `steps` is None and P <= 1024, otherwise by thick-restart block Lanczos on
      Hessian-vector products (forward-over-reverse: O(steps x P) memory, H never formed).
    - `steps`: the Lanczos basis size (default min(P, max(60, 6k + 2 block))); `steps` = P
      spans R^P and the answer is exact.
    - `block`: vectors per Lanczos block (resolves multiplicities up to `block`).
    - `tol`: residuals ||H v - lambda v|| at most `tol` x ||H|| (default 1e-10 in float64,
      1e-5 in float32); `max_restarts`: the restart budget.
    - `eig_tol`: the Morse threshold relative to ||H|| (default 1e-6 in float64, 1e-3 in
      float32).
    - `key`: the Lanczos start (default PRNGKey(0)).
    - `certify`: count all P eigenvalues of the dense Hessian where the bounds do not meet
      (P <= 8192, outside `jit`).
    - `throw`: raise where the spectrum failed instead of returning it.

    **Returns:** a `HessianSpectrumSolution` (`eigenvalues`, `vectors`, `residuals`,
    `scale`, `morse_index`, `morse_exact`, `morse_lower`, `threshold`, `result`, `stats`).
    `result` is `unconverged_eigenvalues` where Lanczos ran out of restarts and
    `nonfinite_point` where the loss or its derivatives are not finite there (eigenvalues
    NaN).

    **Raises:** `ValueError` on a model without inexact arrays, a loss that is not a
    scalar, bad options (`k` above P / 2, `steps` below what k and `block` need), or
    `certify=True` under `jit`; `MemoryError` where `k=None` would form a dense Hessian
    larger than the device's memory allows (`check_dense_memory`).

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
        check_dense_memory(dim, dtype, "`k=None`")
        return _dense_spectrum(model, loss, args, None, eig_tol).raise_if_failed(throw)
    k, steps_, block, max_restarts = _check_lanczos_options(k, steps, block, max_restarts, dim)
    if steps is None and dim <= DENSE_MAX:
        return _dense_spectrum(model, loss, args, k, eig_tol).raise_if_failed(throw)
    key = jax.random.PRNGKey(0) if key is None else check_key(key)
    # tolerances and the restart budget are traced: changing them does not recompile
    tol, eig_tol = jnp.asarray(tol, dtype), jnp.asarray(eig_tol, dtype)
    max_restarts = jnp.asarray(max_restarts, jnp.int32)
    sol = _lanczos_spectrum(model, loss, args, k, steps_, block, tol, max_restarts, eig_tol, key)
    if certify:
        if isinstance(sol.morse_exact, jax.core.Tracer):
            raise ValueError("`certify=True` counts eigenvalues on the host: call it outside jit")
        sol = certify_morse(sol, model, loss, args=args)
    return sol.raise_if_failed(throw)
