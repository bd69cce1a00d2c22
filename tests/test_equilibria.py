"""The staircase's equilibria (`theory._equilibria`): weight-decay plateaus and measured stage
times."""

import jax.numpy as jnp
import numpy as np
import pytest

from theory import (
    hermite_coefficients,
    measured_stage_times,
    stage_equilibria,
    weight_decay_plateaus,
)


def test_weight_decay_plateaus_and_measured_stage_times():
    from theory import hermite_energies

    E = hermite_energies(activation="abs", r=4)
    c = np.asarray(hermite_coefficients("abs", 600))
    c0 = float(c[0])
    rest = 1.0 - c0**2  # E|z|^2 - c_0^2
    # stage 0 as d -> infinity: the degree-0 bias lambda^2 / (8 c_0^2)
    plateaus = weight_decay_plateaus(activation="abs", r=4, weight_decay=2.0)
    np.testing.assert_allclose(plateaus[0], E.plateau_0 + 4.0 / (8 * c0**2))
    # stage >= 4: r lambda^2 / (8 (r c_0^2 + sum_{k>=1} c_k^2)) = 0.687, the simulated 2.625
    np.testing.assert_allclose(plateaus[2], 4 * 4.0 / (8 * (4 * c0**2 + rest)))
    eq = stage_equilibria(activation="abs", r=4, d=20, weight_decay=2.0)
    np.testing.assert_allclose(eq.mass[2], 4 - 4 * 2.0 / (2 * (4 * c0**2 + rest)))
    assert abs(float(eq.mass[2]) - 2.625) < 1e-3 and abs(float(eq.loss[2]) - 0.687) < 1e-3
    # stage 2 at lambda = 0: sum_{j>=2} c_2j^2 r (1 - r rho_j(r)) / 2, rho_j(4) = 3/(4 j + 4)...
    j = np.arange(2, 301)
    rho = np.array([np.prod([(2 * i + 1) / (4 + 2 * i) for i in range(k)]) for k in j])
    tail = rest - np.sum(c[1:] ** 2)  # degrees > 600, where rho_j is ~ 0
    expected = 0.5 * np.sum(c[2 * j] ** 2 * 4 * (1 - 4 * rho)) + 0.5 * 4 * tail
    np.testing.assert_allclose(
        weight_decay_plateaus(activation="abs", r=4, weight_decay=0.0, d=20)[1], expected, rtol=1e-4
    )
    np.testing.assert_allclose(
        weight_decay_plateaus(activation="abs", r=4, weight_decay=0.0)[-1], 0.0, atol=1e-15
    )
    # the plateau is the loss at the equilibrium mass; the mass relaxes back to r without decay
    np.testing.assert_allclose(eq.loss_at(eq.mass, 2)[2], eq.loss[2])
    eq0 = stage_equilibria(activation="abs", r=4, d=20, weight_decay=0.0)
    np.testing.assert_allclose(eq0.relax(eq.mass[2], jnp.array([1e3]), 2), [4.0])
    for bad in (3, -1, True):
        with pytest.raises(ValueError, match="stage"):
            eq.loss_at(2.0, bad)
    with pytest.raises(ValueError, match="alpha"):
        eq.loss_at(-1.0, 2)
    ts = np.arange(5.0)
    times = measured_stage_times(
        ts,
        alpha=np.array([1.0, 1.5, 2.0, 2.95, 3.0]),
        q=np.array([1.0, 0.5, 0.2, 0.05, 0.0]),
        alignment=np.array([0.1, 0.1, 0.1, 0.1, 0.1]),
        equilibrium=3.0,
    )
    np.testing.assert_array_equal(times, [3.0, 3.0, np.inf])
