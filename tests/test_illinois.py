"""The event locator of two_layer_flow (`integrators._illinois`): it stops past the crossing."""

import jax.numpy as jnp
import numpy as np


def test_event_time_locator_stops_past_the_crossing():
    import optimistix as optx

    from integrators._illinois import _TimeIllinois

    def solve(f):
        sol = optx.root_find(
            f, _TimeIllinois(rtol=1e-13, atol=1e-13), jnp.asarray(1.0),
            options=dict(lower=0.0, upper=1.0), throw=False,
        )  # fmt: skip
        return (
            float(sol.value),
            int(sol.stats["num_steps"]),
            bool(sol.result == optx.RESULTS.successful),
        )

    # smooth: a few evaluations, at or just past the root (f <= 0 there)
    t, steps, ok = solve(lambda t, _: jnp.exp(-5.0 * t) - 0.5)
    assert ok and steps <= 12 and 0.0 <= t - np.log(2.0) / 5.0 < 1e-12
    # kinked (flat, then falling: the case that stalls regula falsi) still converges
    t, steps, ok = solve(lambda t, _: jnp.minimum(1e-13, 0.5 - 10.0 * t))
    assert ok and steps <= 130 and 0.0 <= t - 0.05 < 1e-12
    # a root within the stopping width of the bracket's lower end
    t, steps, ok = solve(lambda t, _: 1e-15 - t)
    assert ok and 0.0 <= t < 1e-12
