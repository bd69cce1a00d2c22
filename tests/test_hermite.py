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
    np.testing.assert_allclose(hermite_coefficients("relu_even", 6), 0.5 * c, atol=1e-15)
    # ReLU itself = (|z| + z) / 2: c_0 = 1 / sqrt(2 pi), c_1 = 1/2, the even ones halved
    relu = hermite_coefficients("relu", 6)
    np.testing.assert_allclose(relu, 0.5 * c + 0.5 * (np.arange(7) == 1), atol=1e-15)
    np.testing.assert_allclose(relu[0], 1 / math.sqrt(2 * math.pi))
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
    # sum_k c_k^2 = E sigma^2 (slowly for the kinked ones: the tail of |z| is
    # sum_{k > K} c_k^2 ~ K^(-1/2))
    c = hermite_coefficients(name, 200)
    gap = float(second_moment(name) - jnp.sum(c**2))
    assert 0 <= gap < (0.02 if name in ("abs", "relu", "relu_even") else 1e-10)


def test_names_mean_what_they_say():
    z = jnp.linspace(-3.0, 3.0, 13)
    np.testing.assert_allclose(activation_function("relu")(z), np.maximum(z, 0.0))
    from jax.scipy.stats import norm

    np.testing.assert_allclose(activation_function("gelu")(z), z * norm.cdf(z), atol=1e-15)
    np.testing.assert_allclose(activation_function("swish")(z), z / (1 + np.exp(-z)), atol=1e-15)
    for name in ("relu", "gelu", "swish"):
        f, even = activation_function(name), activation_function(name + "_even")
        np.testing.assert_allclose(even(z), 0.5 * (f(z) + f(-z)), atol=1e-15)
        # the odd part z / 2 is the only difference in the coefficients
        diff = hermite_coefficients(name, 8) - hermite_coefficients(name + "_even", 8)
        np.testing.assert_allclose(diff, 0.5 * (np.arange(9) == 1), atol=1e-12)


def test_hermite_energies_sum_to_the_target_energy():
    E = hermite_energies(activation="abs", r=20)
    total = 20 * 1.0 + 20 * 19 * (2 / math.pi)  # E f*^2 = r E sigma^2 + r (r-1) c_0^2
    np.testing.assert_allclose(float(E.E0 + E.E2 + E.E4_plus), total, rtol=1e-12)
    np.testing.assert_allclose(float(E.initial_target_energy), total / 2, rtol=1e-12)
    assert float(E.plateau_0) > float(E.plateau_2) > 0


def test_bad_inputs():
    with pytest.raises(ValueError, match="activation"):
        hermite_coefficients("tanh", 3)
    with pytest.raises(ValueError, match="degree"):
        hermite_coefficients("abs", -1)
    with pytest.raises(ValueError, match="<= 300"):
        hermite_coefficients("swish", 400)  # beyond what the quadrature resolves
    assert hermite_coefficients("abs", 400).shape == (401,)  # closed form: any degree
    assert np.all(np.isfinite(np.asarray(hermite_coefficients("relu", 400))))
