"""HoldArgs (`theory._hold`): a non-finite held state stops the solve as nonfinite, a step shrunk
to nothing as dt_min_reached."""

import diffrax
import equinox.internal as eqxi
import jax.numpy as jnp
from test_trust import _solve

from theory import RESULTS
from theory.numerics import HoldArgs


def test_hold_args_with_a_nan_held_state_stops_as_nonfinite_not_max_steps():
    def field(t, y, held):  # diffrax also calls it with the raw args (None)
        return (1.0 if held is None else held) * y

    hold = HoldArgs(diffrax.Tsit5(), lambda t, y, args: jnp.nan * jnp.ones_like(y))
    for controller in (diffrax.ConstantStepSize(), diffrax.PIDController(rtol=1e-6, atol=1e-6)):
        sol = _solve(hold, field, 1.0, 0.1, controller)
        assert sol.result == diffrax.RESULTS.nonfinite, controller
        assert RESULTS.promote(sol.result) == RESULTS.nonfinite


def test_hold_args_whose_error_no_step_cures_stops_as_dt_min_not_max_steps():
    # a kink error that does not shrink with the step (1e30 whatever h) drives h to 0: the
    # zero-length step, accepted with zero error, repeated until max_steps
    def field(t, y, held):
        return -y

    def kink_error(t0, t1, y0, y1, held, interpolation):
        return jnp.where(t1 > t0, 1e30, 0.0) * jnp.ones_like(y1), jnp.asarray(False)

    hold = HoldArgs(diffrax.Tsit5(), lambda t, y, args: args, kink_error=kink_error)
    sol = _solve(hold, field, 1.0, 0.1, diffrax.PIDController(rtol=1e-6, atol=1e-6))
    assert sol.result == diffrax.RESULTS.dt_min_reached
    assert int(sol.stats["num_steps"]) < 1000  # of max_steps 4096
    # one zero-length step is diffrax's own where a solve starts a float step before a jump
    # time (diffrax issue #713), and the solve goes on
    ctrl = diffrax.ClipStepSizeController(diffrax.PIDController(rtol=1e-6, atol=1e-6), [1.0])
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field), HoldArgs(diffrax.Tsit5(), lambda t, y, args: args),
        eqxi.prevbefore(jnp.asarray(1.0)), 2.0, None, jnp.array([1.0]), args=1.0,
        stepsize_controller=ctrl, max_steps=100, throw=False,
    )  # fmt: skip
    assert sol.result == diffrax.RESULTS.successful
