"""Krylov kernels on a symmetric operator given only by its products v -> A v (a Hessian-vector
product): thick-restart block Lanczos for extreme eigenpairs, MINRES for A x = b (indefinite
or singular A), and Steihaug's truncated CG for the trust-region subproblem. Each keeps its
state in fixed-shape arrays and loops with `lax.while_loop`, so that it runs under `jit` and
`vmap`; each costs O(basis x P) memory for P unknowns and never forms A.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp


def _orthogonalize(V, mask, w):
    """w minus its projection on the rows of V selected by `mask` (classical Gram-Schmidt,
    twice: "twice is enough" keeps w orthogonal to working precision)."""
    Vm = jnp.where(mask[:, None], V, 0.0)
    w = w - Vm.T @ (Vm @ w)
    return w - Vm.T @ (Vm @ w)


class LanczosOutput(NamedTuple):
    """What `thick_restart_lanczos` returns."""

    values: jax.Array  # (2k,) Ritz values, the k smallest then the k largest
    vectors: jax.Array  # (2k, P) their unit Ritz vectors
    residuals: jax.Array  # (2k,) ||A u - theta u||
    restarts: jax.Array
    hvps: jax.Array
    converged: jax.Array  # every residual <= tol * scale
    scale: jax.Array  # max |theta| over the basis: the estimate of ||A||


def thick_restart_lanczos(matvec, dim, k, steps, block, tol, max_restarts, key, dtype):
    """The k smallest and k largest eigenpairs of a symmetric operator on R^dim.

    A basis V of `steps` orthonormal vectors is grown by block Krylov steps (block size
    `block`: the next vector is A applied to the vector `block` places back, orthogonalized
    against the whole basis twice), and the products A V are stored with it, so that the
    Rayleigh-Ritz matrix V A V^T and each Ritz pair's residual ||A u - theta u|| are exact
    whatever the basis (no three-term recurrence is trusted). At a restart the wanted Ritz
    vectors (about half the basis, from both ends) are kept with their products (no new
    products), and the basis grows again from the residual directions of its last `block`
    vectors (Wu and Simon's thick restart). Stops when every wanted residual is at most
    `tol` x max |theta|, or after `max_restarts` restarts. Where the Krylov space closes
    (an invariant subspace), it goes on from a random vector orthogonal to the basis.

    A block of b vectors resolves an eigenvalue of multiplicity up to b; higher multiplicities
    are found only through rounding errors (slowly).
    """
    m, b = steps, block
    full = m >= dim  # the basis spans the whole space: one pass is exact
    keep = min(m - b - 1, max(4 * k, (m - b) // 2)) if not full else m
    lo = keep // 2
    hi = keep - lo
    ar = jnp.arange(m)
    k_init, k_fresh = jax.random.split(key)

    def place(V, at, candidate, salt):
        """Orthonormalize `candidate` against V[:at] into V[at]; a random vector where it lies
        in their span (the Krylov space has closed)."""
        mask = ar < at
        w = _orthogonalize(V, mask, candidate)
        nw = jnp.linalg.norm(w)
        fresh = _orthogonalize(
            V, mask, jax.random.normal(jax.random.fold_in(k_fresh, salt), (dim,), dtype)
        )
        closed = nw <= 1e-10 * jnp.linalg.norm(candidate)
        nxt = jnp.where(closed, fresh / jnp.linalg.norm(fresh), w / jnp.where(nw > 0, nw, 1.0))
        return V.at[at].set(nxt)

    def grow(V, AV, start, salt):
        def body(j, c):
            V, AV = c
            AV = AV.at[j].set(matvec(V[j]))
            nxt = j + 1
            return jax.lax.cond(
                (nxt < m) & (nxt >= start + b),
                lambda: (place(V, jnp.minimum(nxt, m - 1), AV[nxt - b], salt * m + j), AV),
                lambda: (V, AV),
            )

        return jax.lax.fori_loop(start, m, body, (V, AV))

    def rayleigh_ritz(V, AV):
        T = V @ AV.T
        theta, Y = jnp.linalg.eigh(0.5 * (T + T.T))
        U, AU = Y.T @ V, Y.T @ AV
        return theta, U, AU, jnp.linalg.norm(AU - theta[:, None] * U, axis=1)

    def wanted(x):
        return jnp.concatenate([x[:k], x[-k:]])

    V = jnp.zeros((m, dim), dtype)
    AV = jnp.zeros((m, dim), dtype)
    start = jax.random.normal(k_init, (b, dim), dtype)
    for i in range(min(b, m)):
        V = place(V, i, start[i], m * (max_restarts + 2) + i)
    V, AV = grow(V, AV, 0, 0)
    theta, U, AU, R = rayleigh_ritz(V, AV)
    idx = jnp.concatenate([jnp.arange(lo), jnp.arange(m - hi, m)])

    def is_done(theta, R):
        scale = jnp.max(jnp.abs(theta))
        return jnp.all(wanted(R) <= tol * scale) | full

    def cond(c):
        return (~c[-1]) & (c[-2] < max_restarts)

    def body(c):
        V, AV, theta, U, AU, R, it, _ = c
        Vn = jnp.zeros_like(V).at[:keep].set(U[idx])
        AVn = jnp.zeros_like(AV).at[:keep].set(AU[idx])
        for i in range(b):  # the residual directions of the last block
            r = AV[m - b + i] - V.T @ (V @ AV[m - b + i])
            Vn = place(Vn, keep + i, r, (it + 1) * m * 7 + i)
        Vn, AVn = grow(Vn, AVn, keep, it + 1)
        theta, U, AU, R = rayleigh_ritz(Vn, AVn)
        return Vn, AVn, theta, U, AU, R, it + 1, is_done(theta, R)

    init = (V, AV, theta, U, AU, R, jnp.zeros((), jnp.int32), is_done(theta, R))
    V, AV, theta, U, AU, R, restarts, done = jax.lax.while_loop(cond, body, init)
    return LanczosOutput(
        values=wanted(theta),
        vectors=wanted(U),
        residuals=wanted(R),
        restarts=restarts,
        hvps=m + restarts * (m - keep),
        converged=done,
        scale=jnp.max(jnp.abs(theta)),
    )


def minres(matvec, b, rtol, max_iter, radius):
    """x minimizing ||A x - b|| over the Krylov space K_j(A, b), for symmetric A (indefinite or
    singular: where A x = b has no solution, the residual norm still decreases), by Paige and
    Saunders' MINRES (scipy's recurrences, without preconditioner). Stops when ||A x - b|| <=
    rtol ||b||, after `max_iter` products, or when ||x|| would pass `radius` (then x stops
    where the segment from the last iterate crosses the sphere: a trust-region step, as in
    Steihaug's CG). Returns (x, ||A x - b|| estimate, iterations,
    whether the radius stopped it)."""
    dt = b.dtype
    eps = jnp.finfo(dt).eps
    beta1 = jnp.linalg.norm(b)
    zero = jnp.zeros((), dt)
    z = jnp.zeros_like(b)
    init = dict(
        x=z, w=z, w2=z, r1=b, r2=b, y=b, oldb=zero, beta=jnp.where(beta1 > 0, beta1, 1.0),
        dbar=zero, epsln=zero, phibar=beta1, cs=-jnp.ones((), dt), sn=zero,
        it=jnp.zeros((), jnp.int32), stop=~(beta1 > 0), hit=jnp.zeros((), bool),
    )  # fmt: skip

    def body(c):
        v = c["y"] / c["beta"]
        y = matvec(v)
        y = jnp.where(
            c["it"] > 0, y - (c["beta"] / jnp.where(c["oldb"] > 0, c["oldb"], 1.0)) * c["r1"], y
        )
        alfa = v @ y
        y = y - (alfa / c["beta"]) * c["r2"]
        beta = jnp.linalg.norm(y)
        delta = c["cs"] * c["dbar"] + c["sn"] * alfa
        gbar = c["sn"] * c["dbar"] - c["cs"] * alfa
        epsln = c["sn"] * beta
        dbar = -c["cs"] * beta
        gamma = jnp.maximum(jnp.hypot(gbar, beta), eps)
        cs, sn = gbar / gamma, beta / gamma
        phi, phibar = cs * c["phibar"], sn * c["phibar"]
        w = (v - c["epsln"] * c["w2"] - delta * c["w"]) / gamma
        x = c["x"] + phi * w
        hit = jnp.linalg.norm(x) > radius
        # leaving the ball: stop where the segment from the last iterate (inside) crosses it
        d = phi * w
        a, b2, cc = d @ d, c["x"] @ d, c["x"] @ c["x"] - radius**2
        tau = (-b2 + jnp.sqrt(jnp.maximum(b2 * b2 - a * cc, 0.0))) / jnp.where(a > 0, a, 1.0)
        x = jnp.where(hit, c["x"] + tau * d, x)
        closed = beta <= eps * beta1  # the Krylov space is invariant: x is final
        stop = hit | (phibar <= rtol * beta1) | closed | ~jnp.isfinite(phibar)
        return dict(
            x=x, w=w, w2=c["w"], r1=c["r2"], r2=y, y=y, oldb=c["beta"],
            beta=jnp.where(beta > 0, beta, 1.0), dbar=dbar, epsln=epsln, phibar=phibar,
            cs=cs, sn=sn, it=c["it"] + 1, stop=stop, hit=hit,
        )  # fmt: skip

    c = jax.lax.while_loop(lambda c: (~c["stop"]) & (c["it"] < max_iter), body, init)
    return c["x"], c["phibar"], c["it"], c["hit"]


def steihaug_cg(matvec, g, radius, rtol, max_iter):
    """Steihaug's truncated CG for min_p g.p + 1/2 p.A p subject to ||p|| <= radius: CG from
    p = 0 until the residual is below rtol ||g||, a direction of non-positive curvature is met
    or the iterate leaves the ball (both then stop on the sphere). Returns (p, iterations,
    whether negative curvature was met)."""
    dt = g.dtype
    g0 = jnp.linalg.norm(g)

    def to_sphere(p, d):
        a, b2, c = d @ d, p @ d, p @ p - radius**2
        tau = (-b2 + jnp.sqrt(jnp.maximum(b2 * b2 - a * c, 0.0))) / jnp.where(a > 0, a, 1.0)
        return p + tau * d

    init = dict(
        p=jnp.zeros_like(g), r=g, d=-g, it=jnp.zeros((), jnp.int32), stop=~(g0 > 0),
        neg=jnp.zeros((), bool),
    )  # fmt: skip

    def body(c):
        p, r, d = c["p"], c["r"], c["d"]
        Ad = matvec(d)
        dAd = d @ Ad
        rr = r @ r
        neg = dAd <= 0
        alpha = rr / jnp.where(neg, 1.0, dAd)
        pn = p + alpha * d
        out = neg | (jnp.linalg.norm(pn) >= radius)
        rn = r + alpha * Ad
        conv = jnp.linalg.norm(rn) <= rtol * g0
        beta = (rn @ rn) / jnp.where(rr > 0, rr, 1.0)
        return dict(
            p=jnp.where(out, to_sphere(p, d), pn), r=rn, d=-rn + beta * d, it=c["it"] + 1,
            stop=out | conv | ~jnp.isfinite(dAd), neg=c["neg"] | neg,
        )  # fmt: skip

    c = jax.lax.while_loop(lambda c: (~c["stop"]) & (c["it"] < max_iter), body, init)
    return c["p"].astype(dt), c["it"], c["neg"]
