"""An Illinois (modified regula falsi) root finder in time, for the kink events of
`two_layer_flow`: bracketed, superlinear, and never leaves its bracket."""

import equinox as eqx
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Array


class _IllinoisState(eqx.Module):
    lower: Array
    upper: Array
    f_lower: Array
    f_upper: Array
    kept: Array  # which end the last step kept: -1 lower, +1 upper, 0 neither
    reference: Array  # the bracket's width when it last halved
    stalled: Array  # steps since then
    converged: Array


class _TimeIllinois(optx.AbstractRootFinder):
    """The time of a kink event: regula falsi with the Illinois modification, safeguarded by
    bisection, on a bracket [lower, upper] with f(lower) > 0 >= f(upper) (the event condition,
    the distance of the nearest entry from its kink in units of its distance at the segment's
    start, falls through 0 in the step that triggered the event). Where the distance is smooth
    in time this takes a few evaluations where bisection to 1e-13 took about 40; a bracket that
    has not halved in two steps is bisected (a kinked condition, flat then falling, stalls
    regula falsi even with the Illinois rule), so it takes at most about three times
    bisection's. It stops on the bracket's width (`rtol`, `atol`) or an exact zero: the
    condition can be noisy near a fitted interpolator (the sliding weights are ratios of
    residuals of size 1e-13), where a test on |f| never holds."""

    rtol: float
    atol: float
    norm = staticmethod(jnp.abs)

    def init(self, fn, y, args, options, f_struct, aux_struct, tags):
        lower = jnp.asarray(options["lower"], f_struct.dtype)
        upper = jnp.asarray(options["upper"], f_struct.dtype)
        f_lower, _ = fn(lower, args)
        nan = jnp.asarray(jnp.nan, f_struct.dtype)
        zero = jnp.asarray(0)
        return _IllinoisState(
            lower, upper, f_lower, nan, zero, upper - lower, zero, jnp.asarray(False)
        )

    def _first(self, state):
        return jnp.isnan(state.f_upper)

    def step(self, fn, y, args, options, state, tags):
        del options, tags
        f, aux = fn(y, args)
        # the first call is at `upper` (diffrax's y0): it only fills in f(upper)
        first = self._first(state)
        past = f <= 0.0  # y is at or past the root: it becomes the upper end
        lower = jnp.where(first | past, state.lower, y)
        upper = jnp.where(first | past, y, state.upper)
        f_lower = jnp.where(first | past, state.f_lower, f)
        f_upper = jnp.where(first | past, f, state.f_upper)
        kept = jnp.where(first, 0, jnp.where(past, -1, 1))
        # Illinois: an end kept twice in a row has its value halved
        f_lower = jnp.where(~first & (kept == -1) & (state.kept == -1), 0.5 * f_lower, f_lower)
        f_upper = jnp.where(~first & (kept == 1) & (state.kept == 1), 0.5 * f_upper, f_upper)
        width = upper - lower
        denom = f_lower - f_upper
        secant = lower + width * f_lower / jnp.where(denom > 0, denom, 1.0)
        # at least half the stopping width inside the bracket: a root that sits within it of
        # an end is then bracketed by the next evaluation
        gap = jnp.minimum(0.5 * (self.atol + self.rtol * jnp.abs(upper)), 0.25 * width)
        secant = jnp.clip(secant, lower + gap, upper - gap)
        # a bracket that has not halved in two steps is bisected (a kinked condition, flat
        # then falling, stalls regula falsi even with the Illinois rule)
        halved = width <= 0.5 * state.reference
        reference = jnp.where(halved, width, state.reference)
        stalled = jnp.where(halved, 0, state.stalled + 1)
        use_secant = (denom > 0) & jnp.isfinite(secant) & (stalled < 2)
        new_y = jnp.where(use_secant, secant, lower + 0.5 * width)
        exact = ~first & (f == 0.0)
        new_y = jnp.where(exact, y, new_y)
        narrow = width < self.atol + self.rtol * jnp.abs(upper)
        state = _IllinoisState(
            lower, upper, f_lower, f_upper, kept, reference, stalled, exact | narrow
        )
        return new_y, state, aux

    def terminate(self, fn, y, args, options, state, tags):
        del fn, y, args, options, tags
        return state.converged, optx.RESULTS.successful

    def postprocess(self, fn, y, aux, args, options, state, tags, result):
        # the end at or past the root: the entry that stopped the solve has reached its kink
        # (a weight on the boundary of [0, 1] or past it), so the event is processed as one
        del fn, y, args, options, tags, result
        return state.upper, aux, {}
