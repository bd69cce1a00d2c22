"""Fast phases of the saddle-to-saddle prediction (`theory._fast_phase`): where a group overlaps,
empty windows, mixed vmapped batches."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theory import saddle_jumps


def test_jit_runs_the_fast_phases_only_where_a_group_overlaps():
    traced = jax.jit(saddle_jumps)
    # disjoint supports ({0, 2} and {1}): one neuron per jump, no fast phase, traced or not
    y, signs = jnp.array([1.3, -0.7, 0.4]), jnp.array([1.0, -1.0])
    directions = jnp.array([[0.6, -0.5, 0.6], [-0.3, 0.8, 0.5]])
    eager, jitted = saddle_jumps(y, signs, directions), traced(y, signs, directions)
    assert int(eager.stats["num_steps"]) == int(jitted.stats["num_steps"]) == 0
    np.testing.assert_array_equal(jitted.final_amplitudes, eager.final_amplitudes)
    np.testing.assert_allclose(jitted.cost, math.sqrt(1.3**2 + 0.4**2) + 0.7, rtol=1e-12)
    # a tie whose supports overlap (the docstring's example): the fast phase runs under jit
    jitted = traced(jnp.ones(3), jnp.ones(2), jnp.array([[0.5, 0.5, -0.7], [-0.7, 0.5, 0.5]]))
    assert int(jitted.stats["num_steps"]) > 0 and jitted.ok
    np.testing.assert_allclose(jitted.cost, math.sqrt(5.0), rtol=1e-7)


def test_fast_phase_window_empty_alone_and_in_a_mixed_vmapped_batch():
    # an empty window returns its start (no step, the start's loss at every save point): in a
    # batch of empty ones it is skipped; beside a real window it is solved on a tiny span and
    # reset, and the real one is as in a batch of real ones (one compiled program)
    from theory import _fast_phase

    y, signs = jnp.array([1.3, -0.7, 0.4]), jnp.array([1.0, -1.0])
    psi = jnp.array([[0.6, -0.5, 0.6], [-0.3, 0.8, 0.5]])
    E0, active, fitted = jnp.array([-3.0, -4.0]), jnp.ones(2, bool), jnp.zeros(3, bool)
    grid = jnp.linspace(0.0, 1.0, 5)

    @jax.jit
    @jax.vmap
    def window(s1):
        return _fast_phase.window(E0, psi, signs, y, active, fitted, 0.0, s1, save_ts=grid * s1)

    r0 = _fast_phase._residual(E0, 0.0, psi, signs, y, active, fitted)
    start = (jnp.zeros(2), psi, 0, jnp.full(5, 0.5 * jnp.mean(r0 * r0)))
    empty, mixed, real = (window(jnp.array(s1)) for s1 in ([0.0, 0.0], [0.0, 2.0], [2.0, 2.0]))
    assert int(real[3][1]) > 0 and bool(jnp.all(real[2] == _fast_phase.RESULTS.successful))
    for out in (empty, mixed):
        assert int(out[3][0]) == 0 and bool(jnp.all(out[2] == _fast_phase.RESULTS.successful))
        for k, value in zip((0, 1, 3, 4), start, strict=True):
            np.testing.assert_array_equal(out[k][0], value)
    for k in (0, 1, 3, 4):
        np.testing.assert_array_equal(mixed[k][1], real[k][1])


@pytest.mark.slow  # default-run budget: the main job's end-to-end test runs both phases
def test_the_limits_fast_phases_beside_the_finite_alpha_windows_are_the_limits_alone():
    # with `time_scale`, the limit's windows run in the finite-alpha windows' scan (one
    # compiled solve, `_fast_phase._windows`): the same amplitudes as the limit alone
    y, signs = jnp.ones(3), jnp.ones(2)
    directions = jnp.array([[0.5, 0.5, -0.7], [-0.7, 0.5, 0.5]])
    alone = saddle_jumps(y, signs, directions)
    both = saddle_jumps(y, signs, directions, time_scale=30 * math.log(10.0))
    assert alone.ok and both.ok and int(alone.stats["num_steps"]) > 0
    np.testing.assert_allclose(both.final_amplitudes, alone.final_amplitudes, rtol=1e-12)
    assert int(both.stats["num_steps"]) > int(alone.stats["num_steps"])  # + the windows
    assert np.all(np.isfinite(both.curve_loss)) and np.all(np.diff(both.curve_ts) >= 0)
