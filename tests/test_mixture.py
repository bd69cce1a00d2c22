import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics import (
    LeakyReLUNet,
    fixed_second_layer,
    gaussian_mixture,
    projected_test_error,
    sampled_test_error,
    small_leaky_init,
)
from theory import mixture_test_error


@pytest.mark.slow  # default-run budget: the capability keeps other default tests
def test_mixture_noise_models_and_label_noise():
    key = jax.random.PRNGKey(0)
    for noise in ("gaussian", "rademacher", "student_t"):
        X, y, mu, clean = gaussian_mixture(4000, 50, signal=2.0, key=key, noise=noise)
        z = X - clean[:, None] * mu[None, :]
        assert abs(float(jnp.var(z)) - 1.0) < 0.05, noise
    _, y, _, clean = gaussian_mixture(20_000, 2, signal=1.0, key=key, label_noise=0.2)
    assert abs(float(jnp.mean(y != clean)) - 0.2) < 0.01


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(noise="cauchy"), "noise"),
        (dict(noise="student_t", dof=2.0), "dof"),
        (dict(label_noise=0.5), "label_noise"),
    ],
)
def test_bad_inputs_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gaussian_mixture(6, 10, signal=1.0, key=jax.random.PRNGKey(0), **kwargs)


def test_sampled_test_error_against_the_closed_form():
    d = 20
    W = jnp.zeros((2, d)).at[0, 0].set(1.0).at[0, 1].set(1.0)  # boundary <e_1 + e_2, x> = 0
    net = LeakyReLUNet(W, fixed_second_layer(2), 0.1)
    mu = jnp.zeros(d).at[0].set(1.0)
    for label_noise in (0.0, 0.1):
        mc = float(
            sampled_test_error(
                net, key=jax.random.PRNGKey(3), signal=1.0, num_batches=20, label_noise=label_noise
            )
        )
        cf = float(mixture_test_error(W, net.a, mu, label_noise=label_noise))
        np.testing.assert_allclose(cf, label_noise + (1 - 2 * label_noise) * 0.5 * math.erfc(0.5))
        assert abs(mc - cf) < 4 * math.sqrt(cf * (1 - cf) / 40_000)


@pytest.mark.slow
def test_projected_test_error_matches_full_sampling():
    # the same distribution as sampling x in d dimensions, at a cost independent of d
    X, y, _, _ = gaussian_mixture(20, 300, signal=1.5, key=jax.random.PRNGKey(0))
    net = small_leaky_init(6, 300, 0.1, scale=1.0, key=jax.random.PRNGKey(1))
    net = LeakyReLUNet(net.W + 0.05 * jnp.sum(y[:, None] * X, axis=0), net.a, 0.1)
    full = float(sampled_test_error(net, key=jax.random.PRNGKey(2), signal=1.5))
    proj = float(projected_test_error(net, key=jax.random.PRNGKey(3), signal=1.5))
    se = np.sqrt(full * (1 - full) / 20000)
    assert abs(full - proj) < 5 * se, (full, proj)
    noisy = float(projected_test_error(net, key=jax.random.PRNGKey(3), signal=1.5, label_noise=0.2))
    np.testing.assert_allclose(noisy, 0.2 + 0.6 * proj, atol=6 * se)


def test_student_t_noise_has_the_t_distribution():
    # Bailey's polar method: the entries / sqrt((dof - 2) / dof) are Student-t with dof
    import scipy.stats

    for dof in (2.5, 4.5):
        X, _, _, _ = gaussian_mixture(
            2000, 50, signal=0.0, key=jax.random.PRNGKey(1), noise="student_t", dof=dof
        )
        t = np.asarray(X).ravel() / np.sqrt((dof - 2) / dof)
        assert scipy.stats.kstest(t, scipy.stats.t(dof).cdf).pvalue > 1e-3
