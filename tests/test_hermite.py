import math

import jax.numpy as jnp
import numpy as np
import pytest

from theory import (
    ACTIVATIONS,
    activation_function,
    hermite_coefficients,
    hermite_energies,
    second_moment,
)


def test_hermite_coefficients_against_closed_forms_and_quadrature():
    c = hermite_coefficients("abs", 6)
    expected = [math.sqrt(2 / math.pi), 0, 1 / math.sqrt(math.pi), 0]
    expected += [
        -math.sqrt(2 / math.pi) / math.sqrt(24),
        0,
        3 * math.sqrt(2 / math.pi) / math.sqrt(720),
    ]
    np.testing.assert_allclose(c, expected, atol=1e-15)
    np.testing.assert_allclose(hermite_coefficients("relu", 6), 0.5 * c, atol=1e-15)
    # an independent check of every activation: Monte Carlo-free, by a fine Riemann sum
    z = np.linspace(-12, 12, 400_001)
    phi = np.exp(-z * z / 2) / math.sqrt(2 * math.pi) * (z[1] - z[0])
    he = [np.ones_like(z), z, (z**2 - 1) / math.sqrt(2), (z**4 - 6 * z**2 + 3) / math.sqrt(24)]
    for name in ACTIVATIONS:
        f = np.asarray(activation_function(name)(jnp.asarray(z)))
        ours = hermite_coefficients(name, 4)
        for k in (0, 1, 2):
            np.testing.assert_allclose(ours[k], np.sum(phi * f * he[k]), atol=1e-8)
        np.testing.assert_allclose(ours[4], np.sum(phi * f * he[3]), atol=1e-8)
        np.testing.assert_allclose(second_moment(name), np.sum(phi * f * f), rtol=1e-8)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_parseval_invariant(name):
    # sum_k c_k^2 = E sigma^2 (the even activations converge slowly for |z|: its tail is
    # sum_{k > K} c_k^2 ~ K^(-1/2))
    c = hermite_coefficients(name, 200)
    gap = float(second_moment(name) - jnp.sum(c**2))
    assert 0 <= gap < (0.02 if name in ("abs", "relu") else 1e-10)


def test_hermite_energies_sum_to_the_target_energy():
    E = hermite_energies("abs", 20)
    total = 20 * 1.0 + 20 * 19 * (2 / math.pi)  # E f*^2 = r E sigma^2 + r (r-1) c_0^2
    np.testing.assert_allclose(float(E.E0 + E.E2 + E.E4_plus), total, rtol=1e-12)
    np.testing.assert_allclose(float(E.initial_target_energy), total / 2, rtol=1e-12)
    assert float(E.plateau_0) > float(E.plateau_2) > 0


def test_bad_inputs():
    with pytest.raises(ValueError, match="activation"):
        hermite_coefficients("tanh", 3)
    with pytest.raises(ValueError, match="degree"):
        hermite_coefficients("abs", -1)
