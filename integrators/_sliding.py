"""Held kinks and Filippov sliding for `gradient_flow`: the discrete state of the flow of any
model through its piecewise-linear sites (`integrators._kinks`).

At each step's start (`theory.numerics.HoldArgs` with memory) the flow records every site's
pattern p and switching variable z, and keeps:

- a *chatter count* per site entry: +1 at each accepted step that flipped its side, -1/2
  (floored at 0) at each one that did not;
- a *sliding set* S: an entry whose count reaches `MAX_FLIPS` is pushed into its kink from
  both sides (a Filippov sliding mode; its held side would flip at every step and the step
  size collapse). It slides: its output is blended between its two branches,
  out = held + lambda_k (other - held), with lambda solving dz_S/dt = 0. That is the Filippov
  solution where one entry slides, and the equivalent control where several do at once,
  which is what gradient descent does as its step goes to 0 (`two_layer_flow` slides the
  same way on two-layer nets);
- *pins*: the box problem of each step (`integrators._filippov`) pins an entry of S that is
  pushed off its kink at lambda = 0 or 1; one pinned at `PIN_STEPS` step starts in a row
  leaves S, on that bound's side (after PIN_STEPS 2^k where it has left k times before:
  one that left comes back at its next flip, and leaving again at once was a cycle).

**The sliding solve, once per step.** At each step's start the Jacobian of the residual is
formed on the occupied slots, the box problem solved on its linear model and corrected by
Newton (chord) steps to lambda*, with M its regularized inverse; every field evaluation
inside the step then takes `CHORD_STEPS` chord steps lambda <- lambda - M r(lambda) from
lambda*: two residuals, whatever the number sliding (the Jacobian at every field evaluation
cost `capacity` directions each time). The work per step is linear in the sliding entries
(their columns) plus the factorization of their bucket; the program compiles once whatever
`capacity` is. The system is formed again only where the slots change, a lambda leaves
[0, 1], or it is `REUSE` steps old: in between, the chord steps at the step's start are its
Newton steps with the last factorization (on an 8-16-16-16-1 MLP to t = 150: 7.2 s became
4.8 s, the losses within 3e-6 of each other).

`capacity` slots may slide at once (a capacity^2 matrix is carried); more end the solve at
that step's start (`HoldArgs`'s `stop`), which `gradient_flow` continues with more slots
(`integrators._capacity`) or reports as `RESULTS.kink_limited` with the time.
"""

import equinox as eqx
import jax
import jax.numpy as jnp

from theory.numerics import HoldArgs

from ._filippov import SlidingSystem
from ._kinks import KinkedFunction
from ._nonsmooth import box_gap, finite_or, kink_gap

MAX_FLIPS = 3  # net flips of one held kink entry that make it slide
PIN_STEPS = 3  # step starts in a row pinned at a bound that make an entry leave its kink
REENTER = MAX_FLIPS - 1  # the chatter count an entry leaves with: one flip takes it back
NEWTON_STEPS = 3  # at a step's start: the box problem's solve, then chord steps
CHORD_STEPS = 2  # per field evaluation, from the step start's lambda* with its M
REUSE = 8  # steps a sliding system's factorization is kept while its slots stay the same


class Held(eqx.Module):
    """What a step holds: the user's `args`, and (None in the raw args that diffrax first
    evaluates the field with) the held site patterns, the recorded ones (`start`) and
    switching variables z at the step's start, chatter counts, `pins` (step starts in a row
    pinned), sliding set, its `slots` (flat indices of the sliding entries, -1 padded) and
    `count`, the step's sliding solve
    (`lam`, lambda* on the slots, `inverse`, M, and the slots `pinned` at a `bound` 0 or 1:
    entries that leave at the next step), the step's start time `t`, `overflow`
    (more sliding entries than slots), `entered` (how many entries have started sliding so
    far), `most` (the most sliding at once so far), `crossings` (kink entries that changed
    their held side at a step's start so far: the crossings, and the flips before sliding)
    and `age` (steps since the sliding system was last formed)."""

    user: object
    pattern: list | None = None
    start: list | None = None
    z: list | None = None
    counts: list | None = None
    pins: list | None = None
    left: list | None = None
    slide: list | None = None
    slots: jax.Array | None = None
    count: jax.Array | None = None
    lam: jax.Array | None = None
    inverse: jax.Array | None = None
    pinned: jax.Array | None = None
    bound: jax.Array | None = None
    t: jax.Array | None = None
    overflow: jax.Array | None = None
    entered: jax.Array | None = None
    most: jax.Array | None = None
    age: jax.Array | None = None
    crossings: jax.Array | None = None


class KinkFlow(eqx.Module):
    """The flow d theta/dt = -tau grad loss through the sites of `kinked` (module docstring).

    `to_params(y)` maps the solver state to the parameters; `transform(y, grad)` maps a loss
    gradient to dy/dt (for the plain state: -tau grad). `capacity` (a multiple of 8) slots
    may slide at once. With `landing` the solver's state is (y, theta) (`kink_error`)."""

    kinked: KinkedFunction = eqx.field(static=True)
    to_params: object = eqx.field(static=True)
    transform: object = eqx.field(static=True)
    tau: jax.Array
    capacity: int = eqx.field(static=True, default=8)
    landing: bool = eqx.field(static=True, default=False)

    @property
    def system(self):
        return SlidingSystem(self.capacity)

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
            return jnp.where(valid & ~held.pinned, zd[index], lam - held.bound)

        return residual

    def _slot_sides(self, held):
        """The held side of each slot's entry (True: the branch taken where z > 0)."""
        return self._flat(held.pattern)[jnp.maximum(held.slots, 0)]

    def _side_bound(self, held, z):
        """Per slot, the bound on the side the entry's switching variable `z` is on: 1 where
        that is its other branch's side, else 0 (where a repelled entry leaves to)."""
        on_other = (self._flat(z)[jnp.maximum(held.slots, 0)] > 0) != self._slot_sides(held)
        return on_other.astype(held.lam.dtype)

    def _solve(self, p, held, guess):
        """lambda*, M and the pins at the step's start: the Jacobian at `guess`, the box
        problem on its linear model (`SlidingSystem.box`), then chord steps on the full
        residual."""
        valid = held.slots >= 0
        held = eqx.tree_at(lambda h: (h.pinned, h.bound), held, (~valid, jnp.zeros_like(guess)))
        sign = jnp.where(self._slot_sides(held), 1.0, -1.0).astype(guess.dtype)
        # a repelled entry leaves to the side its pre-activation is on (`SlidingSystem.box`)
        prefer = self._side_bound(held, held.z).astype(guess.dtype)
        r, jac = self.system.jacobian(self._residual(p, held), guess, held.count)
        lam, pinned, bound, inverse = self.system.box(jac, r, guess, sign, held.count, prefer)
        held = eqx.tree_at(lambda h: (h.pinned, h.bound, h.inverse), held, (pinned, bound, inverse))
        residual = self._residual(p, held)
        for _ in range(NEWTON_STEPS - 1):
            lam = lam - self.system.chord(inverse, held.count, residual(lam))
        # a system with no solution in the numbers (overflow): outside [0, 1], so that the
        # next step start forms the system again (`step_args`' reuse test)
        return finite_or(lam, 2.0), inverse, pinned, bound

    def _inversion(self, p, held, lam):
        """(w, sliding): w_k = s_k (M J s)_k on the slots, with M = `held.inverse`, J the
        sliding system's Jacobian at (p, `lam`) (one Jacobian-vector product of the
        residual) and s the sliding slots' signs; 1 where M inverts J, negative where entry
        k's kink has turned repelling since M was formed (`SlidingSystem.box`)."""
        side = self._slot_sides(held)
        sliding = (held.slots >= 0) & ~held.pinned
        s = jnp.where(sliding, jnp.where(side, 1.0, -1.0), 0.0).astype(lam.dtype)
        _, jv = jax.jvp(self._residual(p, held), (lam,), (s,))
        return s * self.system.chord(held.inverse, held.count, jnp.where(sliding, jv, 0.0)), sliding

    def _still_inverts(self, p, held, previous, lam):
        """Whether the last step's M still inverts the sliding system here: M J s = s to
        within 1/2 on every sliding slot (`_inversion`). Where an entry's kink turns from
        attracting to repelling its part of J changes sign (`SlidingSystem.box`); a kept M
        would hold it on the kink until the system is formed again, REUSE steps later: on a
        toy loss v |u| + (v + 1)^2 / 2, u left its kink 0.3 time units late."""
        held = eqx.tree_at(
            lambda h: (h.pinned, h.bound, h.inverse),
            held,
            (previous.pinned, previous.bound, previous.inverse),
        )
        w, sliding = self._inversion(p, held, lam)
        return jnp.all(jnp.where(sliding, jnp.abs(w - 1.0) <= 0.5, True))

    def sliding_lambda(self, p, held):
        """lambda on the slots, solving dz/dt = 0 on the sliding entries: `CHORD_STEPS` chord
        steps from the step start's lambda* with its M (module docstring)."""
        residual = self._residual(p, held)

        def solve(lam):
            for _ in range(CHORD_STEPS):
                lam = lam - self.system.chord(held.inverse, held.count, residual(lam))
            return finite_or(lam, 2.0)

        return jax.lax.cond(held.count > 0, solve, jnp.zeros_like, held.lam)

    def field(self, t, y, held, extra=None):
        """dy/dt: the held field, sliding entries blended; `extra` weights add to the blend
        (the kink error's direction)."""
        p = self.to_params(y)
        if held.pattern is None:  # diffrax's first look at the term, with the raw args
            dyn = eqx.filter(held.user, eqx.is_array)
            return self.transform(y, jax.grad(lambda q: self.kinked.held(None, None, q, dyn))(p))
        if extra is None:  # no blend while nothing slides: half the work

            def blended():
                weights = self._weights(self.sliding_lambda(p, held), held)
                return self.grad(p, held.user, held.pattern, weights)

            g = jax.lax.cond(
                held.count > 0, blended, lambda: self.grad(p, held.user, held.pattern, None)
            )
            return self.transform(y, g)
        weights = self._weights(self.sliding_lambda(p, held), held)
        weights = [w + e for w, e in zip(weights, extra, strict=True)]
        return self.transform(y, self.grad(p, held.user, held.pattern, weights))

    # ---- the discrete state, at each step's start
    def _moves(self, p, previous, pattern):
        """The sliding set, pattern, chatter counts and pin streaks, and the counters, after
        the last accepted step; and the last step's lambda at p (flat, the next guess).

        An entry stays in the sliding set while the box problem pins it (its pattern then
        the bound's side), and leaves after `PIN_STEPS` pinned step starts in a row: where
        two entries' kinks are coupled (one pinned as the other slides, and the pinned one's
        side turning with the other's crossing), the next box problem sees both again
        instead of the pinned one chattering back in. One that left comes back at its next
        flip (`REENTER`): on an 8-12-12-1 net at tol 1e-9, entries that left chattered three
        flips each to come back, 48,587 crossings and 139,895 steps to t = 200; now 3,443
        and 13,758."""
        flat_pattern = self._flat(pattern)
        held_before = self._flat(previous.pattern)
        slide = self._flat(previous.slide)
        lam = self.sliding_lambda(p, previous)
        lam_flat = self._flat(self._weights(lam, previous))
        pinned = self._flat(self._weights(previous.pinned.astype(lam.dtype), previous)) > 0
        pinned = slide & pinned
        upper = self._flat(self._weights(previous.bound, previous)) > 0
        pins = jnp.where(pinned, self._flat(previous.pins) + 1, 0.0)
        # an entry that has left k times before leaves after PIN_STEPS 2^k pinned step starts:
        # one that left, flipped once, came back (`REENTER`) and was pinned again is in a
        # cycle, each turn a sliding entry more (on a 4-8-1 net at alpha = 1e-30 with units,
        # 13,445 entries entered and the solve ran out of steps)
        left = self._flat(previous.left)
        leave = pins >= PIN_STEPS * 2.0 ** jnp.minimum(left, 20.0)
        left = left + leave
        flat_pattern = jnp.where(slide, held_before, flat_pattern)
        flat_pattern = jnp.where(leave, held_before ^ upper, flat_pattern)
        pins = jnp.where(leave, 0.0, pins)
        flipped = (flat_pattern != held_before) & ~slide
        counts = self._flat(previous.counts)
        counts = jnp.where(flipped, counts + 1, jnp.maximum(counts - 0.5, 0.0))
        enter = (counts >= MAX_FLIPS) & ~slide
        slide = (slide & ~leave) | enter
        counts = jnp.where(enter, 0.0, jnp.where(leave, REENTER, counts))
        entered = previous.entered + jnp.sum(enter)
        crossings = previous.crossings + jnp.sum(flipped | leave)
        lam_flat = finite_or(lam_flat, 2.0)
        return slide, flat_pattern, (counts, pins, left), (entered, crossings), lam_flat

    def step_args(self, t, y, args, previous):
        user = args.user
        p = self.to_params(y)
        pattern, z = self.kinked.record(p, eqx.filter(user, eqx.is_array))
        dtype = z[0].dtype
        if previous is None:
            flat_pattern = self._flat(pattern)
            counts = pins = left = jnp.zeros(flat_pattern.shape, dtype)
            slide = jnp.zeros(flat_pattern.shape, bool)
            entered = crossings = most = jnp.asarray(0)
            last = jnp.zeros(flat_pattern.shape, dtype)
        else:
            slide, flat_pattern, (counts, pins, left), (entered, crossings), last = self._moves(
                p, previous, pattern
            )
            most = previous.most
        slots = jnp.nonzero(slide, size=self.capacity, fill_value=-1)[0]
        count = jnp.sum(slots >= 0)
        held = Held(
            user=user,
            pattern=self._unflat(flat_pattern, pattern),
            start=pattern,
            z=z,
            counts=self._unflat(counts, z),
            pins=self._unflat(pins, z),
            left=self._unflat(left, z),
            slide=self._unflat(slide, pattern),
            slots=slots,
            count=count,
            lam=jnp.zeros(self.capacity, dtype),
            inverse=jnp.eye(self.capacity, dtype=dtype),
            pinned=slots < 0,
            bound=jnp.zeros(self.capacity, dtype),
            t=jnp.asarray(t),
            overflow=jnp.sum(slide) > self.capacity,
            entered=entered,
            most=jnp.maximum(most, jnp.sum(slide)),
            crossings=crossings,
        )
        last = jnp.where(slots >= 0, last[jnp.maximum(slots, 0)], 0.0)
        guess = jnp.clip(last, 0.0, 1.0)
        if previous is None:
            reuse, age = jnp.asarray(False), jnp.asarray(0)
        else:
            # the last step's system, where its slots are the same and its lambda stays inside
            # [0, 1]: the chord steps at this start (`last`) are its Newton steps
            inside = previous.pinned | (box_gap(last) >= 0)
            reuse = (previous.age < REUSE) & jnp.all(slots == previous.slots) & jnp.all(inside)
            reuse = reuse & jax.lax.cond(
                reuse, lambda: self._still_inverts(p, held, previous, last), lambda: False
            )
            age = jnp.where(reuse, previous.age + 1, 0)
            guess = jnp.where(reuse, last, guess)
        solved = jax.lax.cond(
            (count > 0) & ~reuse,
            lambda: self._solve(p, held, guess),
            lambda: (
                (guess, previous.inverse, previous.pinned, previous.bound)
                if previous is not None
                else (held.lam, held.inverse, held.pinned, held.bound)
            ),
        )
        held = eqx.tree_at(lambda h: h.age, held, age, is_leaf=lambda x: x is None)
        return eqx.tree_at(lambda h: (h.lam, h.inverse, h.pinned, h.bound), held, solved)

    @staticmethod
    def stop(held):
        return held.overflow

    def held_solver(self, solver):
        """`solver` holding the kinks of this flow (`theory.numerics.HoldArgs`)."""
        # plain closures (a bound method would carry the flow's arrays as static fields)
        return HoldArgs(
            solver,
            lambda t, y, args, previous: self.step_args(t, y, args, previous),
            kink_error=lambda *a: self.kink_error(*a),
            memory=True,
            stop=KinkFlow.stop,
        )

    def stats(self, last):
        """`gradient_flow`'s kink stats from the last step's held args."""
        return {
            "kink_time": jnp.where(last.overflow, last.t, jnp.inf),
            "sliding_entries": last.entered,
            "max_sliding": last.most,
            "kink_crossings": last.crossings,
            "sliding_capacity": jnp.asarray(self.capacity),
        }

    def _repelled(self, t0, t1, y1, z1, held):
        """The blend-weight area, per slot, of sliding entries whose kink began to repel
        during the step (`SlidingSystem.box`): the held field keeps such an entry on its
        kink where the flow leaves it. (M J s)_k s_k at the step's end (M the step start's
        inverse, J the system's Jacobian at y1, s the slots' signs) is 1 at the start and
        negative once entry k repels; taken linear over the step, the entry has been held
        for a fraction delta = -w / (1 - w) of it, on a blend lambda where the flow takes
        the bound on the side its pre-activation is on: the area is h delta (bound -
        lambda), charged to the error like a crossing's, so that the controller shortens
        the step until the turn is resolved (`_still_inverts` then forms the system again
        at the next start, and the box problem pins the entry)."""
        h = jnp.abs(t1 - t0)

        def area():
            lam = held.lam  # the step start's: J is multi-affine in lambda, nearly the same
            w, sliding = self._inversion(self.to_params(y1), held, lam)
            turned = sliding & (w < 0)
            delta = jnp.where(turned, -w / jnp.where(turned, 1.0 - w, 1.0), 0.0)
            bound = self._side_bound(held, z1).astype(lam.dtype)
            return jnp.where(turned, h * delta * (bound - lam), 0.0)

        return jax.lax.cond(held.count > 0, area, lambda: jnp.zeros_like(held.lam))

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

        With `landing`, y is (y, theta, speed) and the third value returned is y1 with theta
        the fraction of the step at which its first (non-sliding) entry crossed its kink,
        from z linear in time (1: none), for `theory.numerics.LandingController`, and speed
        the flow's ||d theta/dt|| / tau at y1 (the held field: the Filippov velocity).
        """
        dyn = eqx.filter(held.user, eqx.is_array)
        p1, z1 = self.kinked.record(self.to_params(y1), dyn)
        h = jnp.abs(t1 - t0)

        def blend(z0, z1, pattern, slide):
            u0, u1 = -kink_gap(pattern, z0), -kink_gap(pattern, z1)
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
        repelled = self._weights(self._repelled(t0, t1, y1, z1, held), held)
        weights = [w + r.astype(w.dtype) for w, r in zip(weights, repelled, strict=True)]
        zeros = [jnp.zeros_like(w) for w in weights]
        velocity, error = jax.jvp(lambda w: self.field(t1, y1, held, w), (zeros,), (weights,))
        middle = self.to_params(interpolation.evaluate(t0 + 0.5 * (t1 - t0)))
        pm, _ = self.kinked.record(middle, dyn)
        dipped = jnp.asarray(False)
        for a, b, c, d, s in zip(pm, held.pattern, p1, held.start, held.slide, strict=True):
            dipped = dipped | jnp.any((a != b) & (c == b) & (d == b) & ~s)
        if not self.landing:
            return error, dipped
        theta = jnp.asarray(1.0, y1[1].dtype)
        for a, b, c, d in zip(held.z, z1, held.pattern, held.slide, strict=True):
            u0, u1 = -kink_gap(c, a), -kink_gap(c, b)
            crossed = (u0 <= 0) & (u1 > 0) & ~d
            fraction = -u0 / jnp.where(crossed, u1 - u0, 1.0)
            theta = jnp.minimum(theta, jnp.min(jnp.where(crossed, fraction, 1.0), initial=1.0))
        # the flow's own speed at y1, ||d theta/dt|| / tau (the steady-state event's)
        _, dtheta = jax.jvp(self.to_params, (y1,), (velocity,))
        speed = jnp.sqrt(sum(jnp.sum(v * v) for v in jax.tree_util.tree_leaves(dtheta)))
        return error, dipped, (y1[0], theta, (speed / self.tau).astype(y1[2].dtype))
