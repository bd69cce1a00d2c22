"""Held kinks and Filippov sliding for `gradient_flow`: the discrete state of the flow of any
model through its piecewise-linear sites (`integrators._kinks`).

At each step's start (`theory.numerics.HoldArgs` with memory) the flow records every site's pattern
p and switching variable z, and keeps:

- a *chatter count* per site entry: +1 at each accepted step that flipped its side, -1/2
  (floored at 0) at each one that did not;
- a *sliding set* S: an entry whose count reaches `MAX_FLIPS` is pushed into its kink from
  both sides (a Filippov sliding mode; its held side would flip at every step and the step
  size collapse). It slides: its output is blended between its two branches,
  out = held + lambda_k (other - held), with lambda solving dz_S/dt = 0 on the
  `capacity` slots (a Newton step from lambda = 0 with the Jacobian by forward-mode autodiff,
  then chord steps; the field is affine in each lambda_k and multi-affine in all). That is
  the Filippov solution where one entry slides, and the equivalent control where several
  do at once, which is what gradient descent does as its step goes to 0 (`two_layer_flow`
  slides the same way on two-layer nets).
- an entry leaves S at a step start where its lambda leaves [0, 1] (both sides push the same
  way), on the side that dz_k/dt points to.

More than `capacity` entries sliding at once ends the solve (`HoldArgs`'s `stop`), which
`gradient_flow` reports as `RESULTS.kink_limited` with the time.
"""

import equinox as eqx
import jax
import jax.numpy as jnp

from theory.numerics import lu_solve

from ._kinks import KinkedFunction

MAX_FLIPS = 6  # net flips of one held kink entry that make it slide
NEWTON_ITERATIONS = 3  # per field evaluation (one Jacobian at lambda = 0, then chord steps)


class Held(eqx.Module):
    """What a step holds: the user's `args`, and (None in the raw args that diffrax first
    evaluates the field with) the held site patterns, the recorded ones (`start`) and
    switching variables z at the step's start,
    chatter counts, sliding set, its `slots` (flat indices of the sliding entries, -1 padded),
    the step's start time `t`, `overflow` (more sliding entries than slots) and `entered`
    (how many entries have started sliding so far)."""

    user: object
    pattern: list | None = None
    start: list | None = None
    z: list | None = None
    counts: list | None = None
    slide: list | None = None
    slots: jax.Array | None = None
    t: jax.Array | None = None
    overflow: jax.Array | None = None
    entered: jax.Array | None = None


class KinkFlow(eqx.Module):
    """The flow d theta/dt = -tau grad loss through the sites of `kinked` (module docstring).

    `to_params(y)` maps the solver state to the parameters; `transform(y, grad)` maps a loss
    gradient to dy/dt (for the plain state: -tau grad)."""

    kinked: KinkedFunction = eqx.field(static=True)
    to_params: object = eqx.field(static=True)
    transform: object = eqx.field(static=True)
    tau: jax.Array
    capacity: int = eqx.field(static=True, default=8)

    # ---- flat views of the per-site lists
    def _flat(self, xs):
        return jnp.concatenate([jnp.ravel(x) for x in xs])

    def _unflat(self, v, like):
        out, start = [], 0
        for x in like:
            out.append(v[start : start + x.size].reshape(x.shape).astype(x.dtype))
            start += x.size
        return out

    # ---- the field
    def grad(self, p, user, pattern, weights):
        dyn = eqx.filter(user, eqx.is_array)
        return jax.grad(lambda q: self.kinked.held(pattern, weights, q, dyn))(p)

    def _zdot(self, p, held, weights):
        """dz/dt of every site entry under the held field with blend `weights`."""
        dyn = eqx.filter(held.user, eqx.is_array)
        v = jax.tree_util.tree_map(
            lambda g: -self.tau * g, self.grad(p, held.user, held.pattern, weights)
        )
        _, zd = jax.jvp(
            lambda q: self.kinked.held_switches(held.pattern, weights, q, dyn), (p,), (v,)
        )
        return self._flat(zd)

    def _weights(self, lam, held):
        size = sum(x.size for x in held.z)
        valid = held.slots >= 0
        flat = (
            jnp.zeros(size, lam.dtype).at[jnp.where(valid, held.slots, size)].set(lam, mode="drop")
        )
        return self._unflat(flat, held.z)

    def _residual(self, p, held):
        """lambda -> dz/dt on the slots (padded slots: lambda itself)."""
        valid = held.slots >= 0
        index = jnp.maximum(held.slots, 0)

        def residual(lam):
            zd = self._zdot(p, held, self._weights(lam, held))
            return jnp.where(valid, zd[index], lam)

        return residual

    def sliding_lambda(self, p, held):
        """lambda on the slots, solving dz/dt = 0 on the sliding entries: one Newton step from
        lambda = 0 (the Jacobian by forward-mode autodiff) and chord steps with that
        Jacobian (the residual is affine in each lambda_k and multi-affine in all, so the
        first step is exact for one sliding entry and the chord steps correct the coupling)."""
        dtype = held.z[0].dtype
        residual = self._residual(p, held)

        def solve(_):
            lam = jnp.zeros(self.capacity, dtype)
            r, jvp = jax.linearize(residual, lam)
            jac = jax.vmap(jvp, out_axes=1)(jnp.eye(self.capacity, dtype=dtype))
            for i in range(NEWTON_ITERATIONS):
                lam = lam - lu_solve(jac, r if i == 0 else residual(lam))
            # a singular system (a sliding output that feeds nothing): outside [0, 1], so
            # that the entry leaves the sliding set at the next step
            return jnp.where(jnp.isfinite(lam), lam, 2.0)

        none = jnp.zeros(self.capacity, dtype)
        return jax.lax.cond(jnp.any(held.slots >= 0), solve, lambda _: none, None)

    def field(self, t, y, held, extra=None):
        """dy/dt: the held field, sliding entries blended; `extra` weights add to the blend
        (the kink error's direction)."""
        p = self.to_params(y)
        if held.pattern is None:  # diffrax's first look at the term, with the raw args
            dyn = eqx.filter(held.user, eqx.is_array)
            return self.transform(y, jax.grad(lambda q: self.kinked.held(None, None, q, dyn))(p))
        weights = self._weights(self.sliding_lambda(p, held), held)
        if extra is not None:
            weights = [w + e for w, e in zip(weights, extra, strict=True)]
        return self.transform(y, self.grad(p, held.user, held.pattern, weights))

    # ---- the discrete state, at each step's start
    def step_args(self, t, y, args, previous):
        user = args.user
        p = self.to_params(y)
        pattern, z = self.kinked.record(p, eqx.filter(user, eqx.is_array))
        flat_pattern = self._flat(pattern)
        dtype = z[0].dtype
        if previous is None:
            counts = jnp.zeros(flat_pattern.shape, dtype)
            slide = jnp.zeros(flat_pattern.shape, bool)
            entered = jnp.asarray(0)
        else:
            held_before = self._flat(previous.pattern)
            slide = self._flat(previous.slide)
            lam = self.sliding_lambda(p, previous)
            lam_flat = self._flat(self._weights(lam, previous))
            inside = (lam_flat >= 0) & (lam_flat <= 1)
            leave = slide & ~inside
            # the side a leaving entry moves to (a field evaluation only while some slide)
            zd = jax.lax.cond(
                jnp.any(slide),
                lambda _: self._zdot(p, previous, self._weights(jnp.clip(lam, 0, 1), previous)),
                lambda _: jnp.zeros(flat_pattern.shape, dtype),
                None,
            )
            flat_pattern = jnp.where(
                slide & ~leave, held_before, jnp.where(leave, zd > 0, flat_pattern)
            )
            flipped = (flat_pattern != held_before) & ~slide
            counts = self._flat(previous.counts)
            counts = jnp.where(flipped, counts + 1, jnp.maximum(counts - 0.5, 0.0))
            counts = jnp.where(leave, 0.0, counts)
            enter = (counts >= MAX_FLIPS) & ~slide
            slide = (slide & ~leave) | enter
            counts = jnp.where(enter, 0.0, counts)
            entered = previous.entered + jnp.sum(enter)
        slots = jnp.nonzero(slide, size=self.capacity, fill_value=-1)[0]
        return Held(
            user=user,
            pattern=self._unflat(flat_pattern, pattern),
            start=pattern,
            z=z,
            counts=self._unflat(counts, z),
            slide=self._unflat(slide, pattern),
            slots=slots,
            t=jnp.asarray(t),
            overflow=jnp.sum(slide) > self.capacity,
            entered=entered,
        )

    @staticmethod
    def stop(held):
        return held.overflow

    def kink_error(self, t0, t1, y0, y1, held, interpolation):
        """`theory.numerics.HoldArgs`'s `kink_error` for the sites (sliding entries excluded).

        With u = the amount by which a site entry's switching variable is on the side it is
        *not* held on (u = -z for an entry held on z > 0, z otherwise), linear in time over
        the step from u0 to u1, the held field differs from the true one by a term
        proportional to max(u, 0): its integral over the step, the area
        A = h (u0 + u1) / 2 where both are > 0, h u1^2 / (2 (u1 - u0)) where only u1 is
        (a crossing), h u0^2 / (2 (u0 - u1)) where only u0 is (an entry held on the side it
        is moving to), is the step's error in the direction of the blend weights
        a = A / u1 (the blend's difference at y1 is proportional to u1, signed): one
        Jacobian-vector product of the field at y1. An entry on its held side at both ends
        of the step but not at its midpoint (dense output) has dipped past its kink and come
        back: the step is rejected.
        """
        dyn = eqx.filter(held.user, eqx.is_array)
        p1, z1 = self.kinked.record(self.to_params(y1), dyn)
        h = jnp.abs(t1 - t0)

        def blend(z0, z1, pattern, slide):
            u0, u1 = jnp.where(pattern, -z0, z0), jnp.where(pattern, -z1, z1)
            both = 0.5 * h * (u0 + u1)
            into = 0.5 * h * u1 * u1 / jnp.where(u1 > u0, u1 - u0, 1.0)
            out_of = 0.5 * h * u0 * u0 / jnp.where(u0 > u1, u0 - u1, 1.0)
            area = jnp.where(u0 > 0, jnp.where(u1 > 0, both, out_of), jnp.where(u1 > 0, into, 0))
            a = jnp.where((u1 != 0) & ~slide, area / jnp.where(u1 != 0, u1, 1.0), 0.0)
            return a.astype(z1.dtype)

        weights = [
            blend(a, b, c, d)
            for a, b, c, d in zip(held.z, z1, held.pattern, held.slide, strict=True)
        ]
        zeros = [jnp.zeros_like(w) for w in weights]
        _, error = jax.jvp(lambda w: self.field(t1, y1, held, w), (zeros,), (weights,))
        middle = self.to_params(interpolation.evaluate(t0 + 0.5 * (t1 - t0)))
        pm, _ = self.kinked.record(middle, dyn)
        dipped = jnp.asarray(False)
        for a, b, c, d, s in zip(pm, held.pattern, p1, held.start, held.slide, strict=True):
            dipped = dipped | jnp.any((a != b) & (c == b) & (d == b) & ~s)
        return error, dipped
