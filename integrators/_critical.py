"""Critical points of any Equinox model's loss: the Hessian's spectrum, polishing, and saddles.

`hessian_spectrum` gives eigenvalues of H = d^2 L / d theta^2 over the model's inexact arrays
(theta, flattened in `jax.flatten_util.ravel_pytree` order): all of them from the dense Hessian
for small models, or the k extreme eigenpairs by thick-restart block Lanczos on
Hessian-vector products (forward-over-reverse, never forming H), run until each residual
||H v - lambda v|| is below a stated tolerance. `critical_point` polishes a point to a critical
point grad L = 0, matrix-free: trust-region Newton with MINRES on grad L (attracted to saddles
as well as minima) or trust-region Newton-CG on L (minima only, faster from far away); it
reports why it stopped, ||grad|| and the Morse index (the number of negative eigenvalues: 0
at a minimum, >= 1 at a saddle) with the eigenpairs it was read from. `escape_saddle` leaves a
saddle along its most negative eigenvector. The loss must be twice differentiable where it is
evaluated (a ReLU net is, away from its kinks).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, Bool, Float, Int

from theory import RESULTS, AbstractSolution
from theory.checks import check_key, check_positive, check_positive_int

from ._krylov import minres, steihaug_cg, thick_restart_lanczos

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
    if not leaves:
        raise ValueError("`model` has no inexact arrays (theta is empty)")
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
    """The dense path. Called eagerly, the eigen-decomposition runs in NumPy's LAPACK (at
    P = 5,569 on 2 cores it took 10 s where `jnp.linalg.eigvalsh` took about 25 s); traced
    (inside `jit`), in jax."""
    H, finite_point = _dense_hessian(model, loss, args)
    dim = H.shape[0]
    xp = jnp if isinstance(H, jax.core.Tracer) else np
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


class CriticalPointSolution(AbstractSolution):
    """Result of `critical_point`.

    - `model`: the polished model; `loss`: L there; `grad_norm`, `grad_max`: ||grad L||_2 and
      ||grad L||_inf there.
    - `spectrum`: the `HessianSpectrumSolution` there (all eigenvalues for P <= 1024, else the
      `num_eigenpairs` smallest and largest with their vectors and residuals);
      `eigenvalues` is `spectrum.eigenvalues` and `morse_index` its Morse index (0: a
      minimum, >= 1: a saddle; `spectrum.morse_exact` says whether it is exact or a lower
      bound).
    - `result`: successful when ||grad||_2 < `tol`; else why it stopped: `max_steps_reached`,
      `stalled` or `nonfinite_point`. Whether the Morse index is certain is the spectrum's
      to say: `morse_exact` (its residuals place each of the smallest Ritz values on one
      side of the threshold, and one of them above it), and `spectrum.result`
      (`unconverged_eigenvalues` where Lanczos ran out of restarts).
    - `stats`: `num_steps` (Newton steps, accepted or not), `num_hvps` (Hessian-vector
      products of the polish), `num_accepted_steps`.

    >>> class P(eqx.Module):
    ...     p: jax.Array
    >>> loss = lambda m, args: (m.p[0] ** 2 - 1.0) ** 2 + m.p[1] ** 2
    >>> cp = critical_point(P(jnp.array([0.1, 0.2])), loss)  # Newton finds the saddle at 0
    >>> bool(cp.ok), float(cp.loss), int(cp.morse_index)
    (True, 1.0, 1)
    """

    result: RESULTS
    stats: dict
    model: eqx.Module
    loss: Float[Array, ""]
    grad_norm: Float[Array, ""]
    grad_max: Float[Array, ""]
    spectrum: HessianSpectrumSolution

    @property
    def eigenvalues(self):
        return self.spectrum.eigenvalues

    @property
    def morse_index(self):
        return self.spectrum.morse_index

    @property
    def morse_exact(self):
        return self.spectrum.morse_exact


def _polish(f, x0, kind, tol, max_steps, max_iter):
    """Trust-region Newton from x0 until ||grad f|| < tol. kind "any": the step minimizes the
    linearized ||grad f(x + d)|| = ||g + H d|| by MINRES within the radius, accepted on the
    actual decrease of ||grad f||^2; kind "minimum": Steihaug-CG on the quadratic model of
    f, accepted on the decrease of f."""
    grad = jax.grad(f)
    g0 = grad(x0)
    dt = x0.dtype
    tiny = jnp.finfo(dt).eps

    def merit(fx, g):
        return jnp.sum(g * g) if kind == "any" else fx

    def body(c):
        x, fx, g, radius, steps, accepted, hvps, _ = c
        hvp = _hvp_at(f, x)
        gn = jnp.linalg.norm(g)
        forcing = jnp.minimum(0.1, jnp.sqrt(gn)).astype(dt)  # superlinear near the end
        if kind == "any":
            d, _, its, _ = minres(hvp, -g, forcing, max_iter, radius)
            Hd = hvp(d)
            predicted = gn**2 - jnp.sum((g + Hd) ** 2)  # the linear model of grad L
        else:
            d, its, _ = steihaug_cg(hvp, g, radius, forcing, max_iter)
            Hd = hvp(d)
            predicted = -(g @ d + 0.5 * d @ Hd)
        xn = x + d
        fn, gnew = f(xn), grad(xn)
        actual = merit(fx, g) - merit(fn, gnew)
        finite = jnp.isfinite(fn) & jnp.all(jnp.isfinite(gnew))
        rho = actual / jnp.where(predicted > 0, predicted, 1.0)
        good = finite & (predicted > 0) & (rho > 1e-4)
        dn = jnp.linalg.norm(d)
        radius = jnp.where(
            ~good | (rho < 0.25),
            0.25 * jnp.minimum(dn, radius),
            jnp.where((rho > 0.75) & (dn >= 0.99 * radius), 2.0 * radius, radius),
        )
        radius = radius.astype(dt)
        x = jnp.where(good, xn, x)
        fx = jnp.where(good, fn, fx)
        g = jnp.where(good, gnew, g)
        stalled = ~good & (dn <= 10 * tiny * (1.0 + jnp.linalg.norm(x)))
        return x, fx, g, radius, steps + 1, accepted + good, hvps + its + 1, stalled

    def cond(c):
        g, steps, stalled = c[2], c[4], c[7]
        return (
            (jnp.linalg.norm(g) >= tol) & (steps < max_steps) & ~stalled & jnp.all(jnp.isfinite(g))
        )

    f0 = f(x0)
    radius0 = 0.1 * jnp.maximum(1.0, jnp.linalg.norm(x0))
    radius0 = radius0.astype(dt)
    zero = jnp.zeros((), jnp.int32)
    init = (x0, f0, g0, radius0, zero, zero, zero, jnp.zeros((), bool))
    x, fx, g, _, steps, accepted, hvps, stalled = jax.lax.while_loop(cond, body, init)
    return x, fx, g, steps, accepted, hvps, stalled


@eqx.filter_jit
def _critical_core(model, loss, args, kind, tol, max_steps, max_iter, eig_tol, spectrum_opts):
    flat, f, rebuild = _flat(model, loss, args)
    x, fx, g, steps, accepted, hvps, stalled = _polish(f, flat, kind, tol, max_steps, max_iter)
    gnorm = jnp.linalg.norm(g)
    finite = jnp.isfinite(fx) & jnp.isfinite(gnorm)
    if spectrum_opts is None:
        spectrum = _dense_spectrum(rebuild(x), loss, args, None, eig_tol)
    else:
        k, steps_, block, tol_l, restarts, key = spectrum_opts
        spectrum = _lanczos_at(f, x, k, steps_, block, tol_l, restarts, eig_tol, key)
    converged = finite & (gnorm < tol)
    result = RESULTS.where(
        ~finite,
        RESULTS.nonfinite_point,
        RESULTS.where(
            converged,
            RESULTS.successful,
            RESULTS.where(stalled, RESULTS.stalled, RESULTS.max_steps_reached),
        ),
    )
    return CriticalPointSolution(
        model=rebuild(x),
        loss=fx,
        grad_norm=gnorm,
        grad_max=jnp.max(jnp.abs(g)),
        spectrum=spectrum,
        result=result,
        stats={"num_steps": steps, "num_accepted_steps": accepted, "num_hvps": hvps},
    )


def critical_point(
    model,
    loss,
    *,
    args=None,
    kind: str = "any",
    tol: float | None = None,
    max_steps: int = 500,
    max_iter: int | None = None,
    eig_tol: float | None = None,
    num_eigenpairs: int = 8,
    throw: bool = False,
) -> CriticalPointSolution:
    """Polish `model` to a critical point of L(theta) = loss(model, args), matrix-free, and
    classify it by its Morse index.

    Both methods are trust-region Newton iterations on Hessian-vector products (memory O(P),
    the Hessian never formed), stopped when ||grad L||_2 < `tol` (default 1e-10 in float64,
    1e-5 in float32, which cannot resolve much less):

    - `kind="any"` (default): the step d minimizes ||grad L + H d|| within the trust radius
      (MINRES, which needs no definiteness: on a singular H it takes the least-squares step),
      and is accepted where ||grad L||^2 decreases as the linear model predicts. Newton's
      method on grad L = 0 is attracted to every nondegenerate critical point, saddles
      included: started near a plateau of a training run it finds the saddle the run
      lingers at. Far from any critical point, and along the curved near-null valleys
      around the minima of an overparameterized model, it is slow (measured: a 56-parameter
      tanh MLP on 12 samples from a flow to t = 5 took 1,520 steps, where `"minimum"` took
      36): run the flow closer first, or use `"minimum"` where a minimum is wanted.
    - `kind="minimum"`: Steihaug's truncated CG on the quadratic model of L (as scipy's
      `trust-ncg`), accepted where L decreases: it goes downhill past saddles to a minimum,
      and is much faster than `"any"` from far away.

    `max_steps`: Newton steps; `max_iter`: Krylov iterations per step (default min(P, 500):
    exact Newton steps for P <= 500). The spectrum at the end: dense (all P eigenvalues) for
    P <= 1024, else the `num_eigenpairs` smallest and largest by Lanczos (residuals 1e-8 x
    ||H||, at most 30 restarts: near-null clusters, as at the minima of an overparameterized
    model, converge slowly, and the Morse index needs only each value's side of the
    threshold); `eig_tol`: the Morse threshold relative to ||H|| (default 1e-6 in float64,
    1e-3 in float32). `throw=True` raises on failure.

    **Returns:** a `CriticalPointSolution`.
    """
    dim, dtype = _check_model_and_loss(model, loss, args)
    kind = str(kind) if isinstance(kind, np.str_) else kind
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {KINDS}, got {kind!r}")
    tol0, eig0 = _defaults(dtype)
    tol = check_positive("tol", tol0 if tol is None else tol, scalar=True)
    eig_tol = check_positive("eig_tol", eig0 if eig_tol is None else eig_tol, scalar=True)
    max_steps = check_positive_int("max_steps", max_steps)
    max_iter = check_positive_int("max_iter", min(dim, 500) if max_iter is None else max_iter)
    k = check_positive_int("num_eigenpairs", num_eigenpairs)  # checked even where unused
    if dim <= DENSE_MAX:
        opts = None
    else:
        k, steps, block, restarts = _check_lanczos_options(k, None, 2, SPECTRUM_RESTARTS, dim)
        lanczos_tol = 1e-8 if jnp.finfo(dtype).bits >= 64 else 1e-4
        opts = (k, steps, block, lanczos_tol, restarts, jax.random.PRNGKey(0))
    tol = jnp.asarray(tol, dtype)
    sol = _critical_core(model, loss, args, kind, tol, max_steps, max_iter, eig_tol, opts)
    return sol.raise_if_failed(throw)


def escape_saddle(
    model,
    loss,
    *,
    args=None,
    distance: float = 1e-3,
    spectrum: HessianSpectrumSolution | None = None,
):
    """Leave a saddle along its most negative curvature: theta + s d v, with v the unit
    eigenvector of the smallest Hessian eigenvalue lambda_min < 0 and d = `distance` x
    max(1, ||theta|| / sqrt(P)) (relative to the parameters' root-mean-square size), the sign
    s = +-1 giving the lower loss (at a saddle the loss drops by ~ |lambda_min| d^2 / 2 both
    ways; the cubic term picks a side). Continue with a flow from the returned model.

    `spectrum`: a `HessianSpectrumSolution` with vectors at `model` (e.g. `critical_point(...)
    .spectrum` for P > 1024, or `hessian_spectrum(model, loss, args=args, k=1)`); computed when
    None. Raises ValueError where the smallest eigenvalue is not below -eig_tol x ||H|| (no
    escape direction: not a saddle) or the spectrum has no vectors or did not converge.

    **Returns:** (the displaced model, lambda_min).

    >>> class P(eqx.Module):
    ...     p: jax.Array
    >>> loss = lambda m, args: (m.p[0] ** 2 - 1.0) ** 2 + m.p[1] ** 2
    >>> moved, lam = escape_saddle(P(jnp.array([0.0, 0.0])), loss, distance=0.1)
    >>> round(abs(float(moved.p[0])), 6), float(lam)
    (0.1, -4.0)
    """
    dim, _ = _check_model_and_loss(model, loss, args)
    distance = check_positive("distance", distance, scalar=True)
    if spectrum is None:
        spectrum = hessian_spectrum(model, loss, args=args, k=1)
    if spectrum.vectors is None:
        raise ValueError("`spectrum` has no eigenvectors: compute it with `k=` (e.g. k=1)")
    if not bool(spectrum.ok):
        raise ValueError(f"`spectrum` did not converge: {spectrum.result}")
    lam = spectrum.eigenvalues[0]
    if not bool(spectrum.morse_index > 0):
        raise ValueError(
            f"no negative curvature: the smallest Hessian eigenvalue is {float(lam):.3e} "
            f"(not below -eig_tol x ||H||, ||H|| = {float(spectrum.scale):.3e}): not a saddle"
        )
    flat, f, rebuild = _flat(model, loss, args)
    v = spectrum.vectors[0]
    step = distance * jnp.maximum(1.0, jnp.linalg.norm(flat) / jnp.sqrt(dim))
    plus, minus = flat + step * v, flat - step * v
    x = jnp.where(f(plus) <= f(minus), plus, minus)
    return rebuild(x), lam
