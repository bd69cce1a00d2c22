"""HoldArgs (`theory._hold`): a non-finite held state stops the solve as nonfinite."""

import diffrax
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
