"""Critical points of any Equinox model's loss: polishing and saddles.

`critical_point` polishes a point to a critical point grad L = 0, matrix-free: trust-region
Newton with MINRES on grad L (attracted to saddles as well as minima) or trust-region
Newton-CG on L (minima only, faster from far away); it reports why it stopped, ||grad|| and
the Morse index (the number of negative eigenvalues: 0 at a minimum, >= 1 at a saddle) with
the eigenpairs it was read from (`hessian_spectrum`, in `_spectrum`). `escape_saddle` leaves a
saddle along its most negative eigenvector. The loss must be twice differentiable where it is
evaluated (a ReLU net is, away from its kinks).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from theory import RESULTS, AbstractSolution
from theory.checks import check_flag, check_positive, check_positive_int

from ._krylov import minres, steihaug_cg
from ._spectrum import (
    DENSE_MAX,
    KINDS,
    SPECTRUM_RESTARTS,
    HessianSpectrumSolution,
    _check_lanczos_options,
    _check_model_and_loss,
    _defaults,
    _dense_spectrum,
    _flat,
    _hvp_at,
    _lanczos_at,
    certify_morse,
    hessian_spectrum,
)


class CriticalPointSolution(AbstractSolution):
    """Result of `critical_point`.

    - `model`: the polished model; `loss`: L there; `grad_norm`, `grad_max`: ||grad L||_2 and
      ||grad L||_inf there.
    - `spectrum`: the `HessianSpectrumSolution` there (all eigenvalues for P <= 1024, else the
      `num_eigenpairs` smallest and largest with their vectors and residuals);
      `eigenvalues` is `spectrum.eigenvalues` and `morse_index` its Morse index (0: a
      minimum, >= 1: a saddle), certified: from all P eigenvalues (dense, P <= 1024), where
      the Lanczos bounds meet, or else counted among all P eigenvalues of the dense Hessian
      up to P = 8192 (`certify=True`, the default); -1 where it is not known
      (`spectrum.morse_lower` is then a certified lower bound).
    - `result`: successful when ||grad||_2 < `tol` and the index is certified (or
      `certify=False`); `uncertified_index` where the point is critical but its index is
      not certified (P > 8192 and the Lanczos bounds apart); else why it stopped:
      `max_steps_reached`, `unbounded` (the steps ran out while the iterate's norm grew past
      1e20 times its start: a loss with no minimum there), `stalled` or `nonfinite_point`.
      `spectrum.result` says whether Lanczos converged (`unconverged_eigenvalues`).
    - `stats`: `num_steps` (Newton steps, accepted or not), `num_hvps` (Hessian-vector
      products of the polish), `num_accepted_steps`; and the iterate's norms that judge
      `runs_to_infinity`: `start_norm`, `midway_norm` (at half the budget; NaN where the
      polish ended before it) and `end_norm`.

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


NULL_EIGENVALUE = 1e-13  # |lambda| below this times ||H||: rounding, no step along it


def _eigen_step(H, g, radius):
    """The trust-region step of `kind="minimum"` from the eigendecomposition H = V diag(lambda)
    V^T, and the decrease its model predicts: d = -V (c / (|lambda| + mu)), c = V^T g
    (saddle-free Newton: a negative eigenvalue is stepped down as if positive), on the
    non-null eigenspace (|lambda| > NULL_EIGENVALUE ||H||: there a Newton step is rounding
    noise), with a Cauchy step down the gradient on the null one (its curvature taken to be
    max(||g|| / radius, |lambda|): a loss flat along g, linear or along a null direction
    that g has a part in, still moves). mu >= 0 is the least (to 60 halvings of log mu)
    that keeps ||d|| <= radius: in the eigenbasis ||d|| costs nothing to evaluate."""
    lam, V = jnp.linalg.eigh(0.5 * (H + H.T))
    c = V.T @ g
    scale = jnp.max(jnp.abs(lam))
    live = jnp.abs(lam) > NULL_EIGENVALUE * scale
    # (at least the eigenvalue itself, so that the model's decrease stays positive; and
    # positive where g = 0)
    flat = jnp.maximum(jnp.linalg.norm(g) / radius, jnp.finfo(g.dtype).tiny)
    flat = jnp.maximum(flat, jnp.abs(lam))

    def coefficients(mu):
        return jnp.where(live, -c / (jnp.abs(lam) + mu), -c / (flat + mu))

    def too_long(mu):
        return jnp.linalg.norm(coefficients(mu)) > radius

    def halve(_, bracket):
        lo, hi = bracket
        mid = jnp.sqrt(lo * hi)
        long = too_long(mid)
        return jnp.where(long, mid, lo), jnp.where(long, hi, mid)

    top = 1e3 * scale + jnp.linalg.norm(g) / radius
    lo = 1e-30 * scale + jnp.finfo(g.dtype).tiny
    _, mu = jax.lax.fori_loop(0, 60, halve, (lo, top))
    e = coefficients(jnp.where(too_long(jnp.zeros_like(scale)), mu, 0.0))
    return V @ e, -(c @ e + 0.5 * jnp.sum(lam * e * e))


def _polish(f, x0, kind, tol, max_steps, max_iter):
    """Trust-region Newton from x0 until ||grad f|| < tol. kind "any": the step minimizes the
    linearized ||grad f(x + d)|| = ||g + H d|| by MINRES within the radius, accepted on the
    actual decrease of ||grad f||^2; kind "minimum": Steihaug-CG on the quadratic model of
    f, accepted on the decrease of f."""
    grad = jax.grad(f)
    g0 = grad(x0)
    dt = x0.dtype
    tiny = jnp.finfo(dt).eps
    # (`"any"` keeps MINRES: its exact least-squares step in the eigenbasis stalled at
    # ||grad|| 1e-9 on the minimum manifold of a 56-parameter tanh net, where MINRES reached
    # 1e-10 in 1,520 steps: on ||grad||^2 ~ 1e-18 its acceptance ratio is rounding)
    dense = kind == "minimum" and x0.size <= DENSE_MAX  # as the dense spectrum

    def merit(fx, g):
        return jnp.sum(g * g) if kind == "any" else fx

    half = max_steps // 2

    def body(c):
        x, fx, g, radius, steps, accepted, hvps, _, mid = c
        # the norms of x and grad at the budget's midpoint: a run that spends its steps
        # with ||x|| still growing and ||grad|| falling slowly is running off to infinity
        mid = jnp.where(steps == half, jnp.stack([jnp.linalg.norm(x), jnp.linalg.norm(g)]), mid)
        hvp = _hvp_at(f, x)
        gn = jnp.linalg.norm(g)
        forcing = jnp.minimum(0.1, jnp.sqrt(gn)).astype(dt)  # superlinear near the end
        if dense:
            # the Hessian by P products, the step exact on its non-null eigenspace: on a
            # degenerate minimum (near-interpolating nets, eigenvalues 1e-13 to 1e2) the
            # truncated Krylov steps converged linearly
            d, predicted = _eigen_step(jax.hessian(f)(x), g, radius)
            its = x.size
        elif kind == "any":
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
        return x, fx, g, radius, steps + 1, accepted + good, hvps + its + 1, stalled, mid

    def cond(c):
        g, steps, stalled = c[2], c[4], c[7]
        return (
            (jnp.linalg.norm(g) >= tol) & (steps < max_steps) & ~stalled & jnp.all(jnp.isfinite(g))
        )

    f0 = f(x0)
    radius0 = 0.1 * jnp.maximum(1.0, jnp.linalg.norm(x0))
    radius0 = radius0.astype(dt)
    zero = jnp.zeros((), jnp.int32)
    mid = jnp.full(2, jnp.nan, dt)
    init = (x0, f0, g0, radius0, zero, zero, zero, jnp.zeros((), bool), mid)
    x, fx, g, _, steps, accepted, hvps, stalled, mid = jax.lax.while_loop(cond, body, init)
    return x, fx, g, steps, accepted, hvps, stalled, mid


RUNAWAY_MIN_STEPS = 50  # the least budget over which `runs_to_infinity` is judged


@eqx.filter_jit
def _critical_core(model, loss, args, kind, tol, max_steps, max_iter, eig_tol, spectrum_opts):
    flat, f, rebuild = _flat(model, loss, args)
    x, fx, g, steps, accepted, hvps, stalled, mid = _polish(f, flat, kind, tol, max_steps, max_iter)
    gnorm = jnp.linalg.norm(g)
    finite = jnp.isfinite(fx) & jnp.isfinite(gnorm)
    if spectrum_opts is None:
        spectrum = _dense_spectrum(rebuild(x), loss, args, None, eig_tol)
    else:
        k, steps_, block, tol_l, restarts, key = spectrum_opts
        spectrum = _lanczos_at(f, x, k, steps_, block, tol_l, restarts, eig_tol, key)
    converged = finite & (gnorm < tol)
    # steps that ran out while the iterate ran away (no minimum to reach): not a budget
    # that more steps would cure
    xn = jnp.linalg.norm(x)
    away = xn > 1e20 * jnp.maximum(jnp.linalg.norm(flat), 1.0)
    # over the budget's second half ||x|| grew by 5% or more while ||grad|| fell by less
    # than 10x: it looks to be heading for a critical point at infinity (saturating or
    # cancelling units), not a finite one that more steps would reach (a 33-parameter tanh
    # net: ||x|| 1.3 -> 1.6 over 500 steps and 4.4 over 8,000, ||grad|| 1e-4 -> 1.6e-6, the
    # loss creeping up to an asymptote). Judged only over a budget of RUNAWAY_MIN_STEPS or
    # more: over a few steps a run towards a finite critical point grows ||x|| too.
    running = (xn > 1.05 * mid[0]) & (gnorm > 0.1 * mid[1]) & (max_steps >= RUNAWAY_MIN_STEPS)
    spent = RESULTS.where(
        away,
        RESULTS.unbounded,
        RESULTS.where(running, RESULTS.runs_to_infinity, RESULTS.max_steps_reached),
    )
    result = RESULTS.where(
        ~finite,
        RESULTS.nonfinite_point,
        RESULTS.where(
            converged, RESULTS.successful, RESULTS.where(stalled, RESULTS.stalled, spent)
        ),
    )
    return CriticalPointSolution(
        model=rebuild(x),
        loss=fx,
        grad_norm=gnorm,
        grad_max=jnp.max(jnp.abs(g)),
        spectrum=spectrum,
        result=result,
        stats={
            "num_steps": steps,
            "num_accepted_steps": accepted,
            "num_hvps": hvps,
            "start_norm": jnp.linalg.norm(flat),
            "midway_norm": mid[0],
            "end_norm": xn,
        },  # fmt: skip
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
    certify: bool = True,
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
      and is much faster than `"any"` from far away. Up to P = 1024 each step is instead
      exact on the Hessian's non-null eigenspace (the Hessian by P products, `eigh`,
      saddle-free: d = -V (c / (|lambda| + mu)), a Cauchy step on the null eigenspace): on
      a near-interpolating softplus net (4-36-1, 217 parameters, 200 samples, from Adam)
      the truncated CG steps converged linearly, ||grad|| 2.9e-7 after 2,000 steps, where
      these reach 7.4e-11 in 562 (14 s; scipy's BFGS: 10,049 iterations, 218 s); on a
      3-20-20-1 tanh net (521 parameters, 150 samples, from its init) 2.7e-11 in 755 steps
      (55 s), where the CG steps stopped at 5.5e-8 after 1,000 (23 s, not ok).

    The spectrum at the end is dense (all P eigenvalues) for P <= 1024, else the
    `num_eigenpairs` smallest and largest by Lanczos (residuals 1e-8 x ||H||, at most 30
    restarts: near-null clusters, as at the minima of an overparameterized model, converge
    slowly, and the Morse index needs only each value's side of the threshold), its index
    certified by the dense count up to P = 8192 (`certify`).

    **Arguments:**

    - `model`: an Equinox module, the start; its inexact arrays are theta.
    - `loss`: `loss(model, args) -> scalar`, twice differentiable; `args`: passed to it.
    - `kind`: `"any"` (Newton on grad L = 0: saddles too) or `"minimum"` (descent).
    - `tol`: stop where ||grad L||_2 < `tol` (default 1e-10 in float64, 1e-5 in float32).
    - `max_steps`: Newton steps; `max_iter`: Krylov iterations per step (default
      min(P, 500): exact Newton steps for P <= 500).
    - `eig_tol`: the Morse threshold relative to ||H|| (default 1e-6 in float64, 1e-3 in
      float32); `num_eigenpairs`: Lanczos pairs at each end for P > 1024.
    - `certify`: count all P eigenvalues where the Lanczos bounds do not meet (P <= 8192,
      outside `jit`; `certify=False` leaves `morse_index` -1 there).
    - `throw`: raise where the polish failed instead of returning it.

    **Returns:** a `CriticalPointSolution`: `model` (the point), `loss`, `grad_norm`,
    `grad_max`, `spectrum` (a `HessianSpectrumSolution`), `eigenvalues`, `morse_index`,
    `morse_exact`, `result`, `stats` (`num_steps`, `num_accepted_steps`, `num_hvps`, and
    `start_norm`, `midway_norm`, `end_norm`: ||theta|| at the start, at half the budget (NaN
    where the run ended before it) and at the end). `result`: successful;
    `max_steps_reached`; `stalled` (the trust radius collapsed); `runs_to_infinity` (over
    the second half of a budget of 50 steps or more, ||theta|| grew by 5% or more while
    ||grad|| fell by less than 10x: heading for a critical point at infinity, as saturating
    tanh units do; more steps would not help); `unbounded` (||theta|| past 1e20 times its
    start); `nonfinite_point`; `uncertified_index` (critical to `tol`, its index not
    certified).

    **Raises:** `ValueError` on a bad `kind`, non-positive `tol`, `eig_tol`, `max_steps`,
    `max_iter` or `num_eigenpairs`, a model without inexact arrays, a loss that is not a
    scalar, or `certify=True` under `jit`.

    >>> class Q(eqx.Module):
    ...     p: jax.Array
    >>> loss = lambda m, args: (m.p[0] ** 2 - 1.0) ** 2 + m.p[1] ** 2  # a saddle at 0
    >>> cp = critical_point(Q(jnp.array([0.1, 0.2])), loss)
    >>> bool(cp.ok), [abs(round(v, 6)) for v in cp.model.p.tolist()], int(cp.morse_index)
    (True, [0.0, 0.0], 1)
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
    certify = check_flag("certify", certify)
    sol = _critical_core(model, loss, args, kind, tol, max_steps, max_iter, eig_tol, opts)
    if certify and opts is not None:
        if isinstance(sol.spectrum.morse_exact, jax.core.Tracer):
            raise ValueError(
                "`certify=True` counts eigenvalues on the host: call critical_point outside "
                "jit, or pass certify=False (then `morse_index` is -1 where not certified)"
            )
        if sol.ok:
            spectrum = certify_morse(sol.spectrum, sol.model, loss, args=args)
            sol = eqx.tree_at(lambda c: c.spectrum, sol, spectrum)
        result = RESULTS.where(
            sol.ok & ~sol.spectrum.morse_exact, RESULTS.uncertified_index, sol.result
        )
        sol = eqx.tree_at(lambda c: c.result, sol, result)
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

    **Arguments:**

    - `model`: an Equinox module at (or near) a saddle; `loss`, `args`: as for
      `critical_point`.
    - `distance`: the step, relative to the parameters' root-mean-square size.
    - `spectrum`: a `HessianSpectrumSolution` with vectors at `model` (e.g.
      `critical_point(...).spectrum` for P > 1024, or `hessian_spectrum(model, loss,
      args=args, k=1)`); computed when None.

    **Returns:** (the displaced model, lambda_min).

    **Raises:** `ValueError` where the smallest eigenvalue is not below -eig_tol x ||H||
    (no escape direction: not a saddle), or the spectrum has no vectors or did not
    converge.

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
    if isinstance(spectrum, CriticalPointSolution):
        spectrum = spectrum.spectrum  # the critical point's own spectrum
    if not isinstance(spectrum, HessianSpectrumSolution):
        raise ValueError(
            "`spectrum` must be a HessianSpectrumSolution (from `hessian_spectrum` or a "
            f"`critical_point(...).spectrum`), got {type(spectrum).__name__}"
        )
    if spectrum.vectors is None:
        raise ValueError("`spectrum` has no eigenvectors: compute it with `k=` (e.g. k=1)")
    if not bool(spectrum.ok):
        raise ValueError(f"`spectrum` did not converge: {spectrum.result}")
    lam = spectrum.eigenvalues[0]
    if not bool(spectrum.morse_lower > 0):  # a certified negative eigenvalue
        raise ValueError(
            f"no negative curvature: the smallest Hessian eigenvalue is {float(lam):.3e} "
            f"(not below -eig_tol x ||H||, ||H|| = {float(spectrum.scale):.3e}): not a saddle"
        )
    flat, f, rebuild = _flat(model, loss, args)
    if spectrum.vectors.shape[-1] != dim:
        raise ValueError(
            f"`spectrum` has vectors of {spectrum.vectors.shape[-1]} parameters and `model` has "
            f"{dim}: compute it at this model"
        )
    v = spectrum.vectors[0]
    # the pair must be one at this model (a spectrum from another point moved it along a
    # direction of no meaning): its residual here, against its own (or 1e-6 ||H||)
    hv = _hvp_at(f, flat)(v)
    here = jnp.linalg.norm(hv - lam * v)
    own = 0.0 if spectrum.residuals is None else spectrum.residuals[0]
    bound = 10.0 * own + 1e-6 * spectrum.scale
    if not bool(here <= bound):
        raise ValueError(
            f"`spectrum` was not computed at `model`: its eigenpair (lambda = {float(lam):.3e}) "
            f"has residual ||H v - lambda v|| = {float(here):.3e} here, above {float(bound):.3e}"
        )
    step = distance * jnp.maximum(1.0, jnp.linalg.norm(flat) / jnp.sqrt(dim))
    plus, minus = flat + step * v, flat - step * v
    x = jnp.where(f(plus) <= f(minus), plus, minus)
    return rebuild(x), lam
