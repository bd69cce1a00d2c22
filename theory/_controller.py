"""The engine's default step-size controller for adaptive flows, and `LandingController`."""

import diffrax
import jax
import jax.numpy as jnp

from .checks import check_positive


def default_controller(rtol: float, atol: float) -> diffrax.PIDController:
    """The flows' default step-size controller: PI with pcoeff = 0.4, icoeff = 0.3. After the
    jumps the fitted neurons make the step size stability-limited, where these damp the
    accept/reject oscillation (fewer steps than diffrax's default I controller).

    **Arguments:**

    - `rtol`: the relative tolerance, one finite number > 0.
    - `atol`: the absolute tolerance, one finite number >= 0.

    **Returns:** `diffrax.PIDController(rtol=rtol, atol=atol, pcoeff=0.4, icoeff=0.3)`.

    **Raises:** `ValueError` where `rtol` or `atol` is not one real number (shape (); not a
    bool, a string, None or complex), or where a concrete `rtol` is not finite and > 0 or a
    concrete `atol` not finite and >= 0; traced tolerances out of range raise at run time
    (through `eqx.error_if`, or recorded inside `collect_checks`).

    >>> default_controller(1e-8, 1e-10).pcoeff
    0.4
    """
    # the checked values are the ones used: under jit the checks live in their data flow
    rtol = check_positive("rtol", rtol, scalar=True)
    atol = check_positive("atol", atol, allow_zero=True, scalar=True)
    return diffrax.PIDController(rtol=rtol, atol=atol, pcoeff=0.4, icoeff=0.3)


class LandingController(diffrax.AbstractAdaptiveStepSizeController):
    """A step-size controller that retries a rejected step so that it ends just past the
    first switch it crossed.

    The state is a pair (y, theta): `theta`, a scalar with d theta/dt = 0, is overwritten
    at each trial step by the solver (`HoldArgs` with a `kink_error` that returns a third
    value, the new y1) with the fraction of the step at which its first switch was crossed
    (1: none). A crossing integrated with the pattern held charges an error growing with the
    time spent past it, and `controller`, tuned to the solver's order, shrinks a rejected step
    by too little or too much and creeps up on the crossing (20 gradient jumps: 283 rejected
    steps of 647). Here a rejected step whose theta < 1 is retried to end past
    the crossing by a sliver (the part of the time past it whose error, growing at least like
    that time, is a quarter of the tolerance; at most `margin` of it): the retry is accepted,
    and the next step starts on the switched side.

    >>> control = LandingController(default_controller(1e-8, 1e-8))
    >>> control.rtol, control.margin
    (1e-08, 0.01)
    """

    controller: diffrax.AbstractAdaptiveStepSizeController
    margin: float = 0.01

    @property
    def rtol(self):
        return self.controller.rtol

    @property
    def atol(self):
        return self.controller.atol

    @property
    def norm(self):
        return self.controller.norm

    def wrap(self, direction):
        return LandingController(self.controller.wrap(direction), self.margin)

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        return self.controller.init(terms, t0, t1, y0, dt0, args, func, error_order)

    def adapt_step_size(
        self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
    ):
        keep, next_t0, next_t1, jump, state, result = self.controller.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
        )
        theta = y1_candidate[1]
        # the error past a crossing grows with the time spent past it (like it where the
        # gradient jumps there, as a ReLU network's does; like its square where only its
        # slope does): past by (1 - theta) h it was `scaled` (> 1); the retry is past by a
        # quarter of the tolerance's share of that, and at most `margin` of the step
        scaled = self.norm(
            jax.tree_util.tree_map(
                lambda e, a, b: e / (self.atol + self.rtol * jnp.maximum(jnp.abs(a), jnp.abs(b))),
                y_error,
                y0,
                y1_candidate,
            )
        )
        past = (1 - theta) * jnp.minimum(0.25 / jnp.maximum(scaled, 1.0), self.margin)
        fraction = theta + past
        # (in place of the controller's proposal, which shrinks the step by the solver's
        # order and falls short of the crossing; at most 0.9 h, so that a retry whose own
        # error was the cause still shrinks)
        target = t0 + jnp.minimum(fraction, 0.9) * (t1 - t0)
        landing = ~keep & (theta < 1)
        next_t1 = jnp.where(landing, target, next_t1)
        return keep, next_t0, next_t1, jump, state, result
