import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from dynamics import gaussian_mixture, sampled_test_error, small_leaky_init
from integrators import margin_gradient_descent
from theory import (
    bayes_error,
    effective_direction,
    margin_conditions,
    mixture_test_error,
    span_error_bound,
    transition_lower_bound,
)


def test_margin_conditions_hand_cases():
    # one pair with <y_1 x_1, y_2 x_2> = 9 - 0.01 > 0, and ||x||^2 = 9.01 against
    # n |<x_1, x_2>| = 2 * 8.99 / gamma: positively correlated, not near-orthogonal
    X = jnp.array([[3.0, 0.1], [-3.0, 0.1]])
    c = margin_conditions(X, jnp.array([1.0, -1.0]), 0.1)
    assert bool(c.positively_correlated) and not bool(c.near_orthogonal)
    np.testing.assert_allclose(c.orthogonality_ratio, 9.01 / (2 * 8.99), rtol=1e-12)
    np.testing.assert_allclose(c.min_correlation, 8.99 / 9.01, rtol=1e-12)
    # flipping one label breaks positive correlation and nothing else
    c = margin_conditions(X, jnp.array([1.0, 1.0]), 0.1)
    assert not bool(c.positively_correlated)
    # nearly orthogonal rows: ratio 1 / (2 * 0.01) = 50 >= 1 / gamma = 10
    X = jnp.array([[1.0, 0.01], [0.0, 1.0]])
    c = margin_conditions(X / jnp.linalg.norm(X, axis=1, keepdims=True), jnp.ones(2), 0.1)
    assert bool(c.near_orthogonal)
    # a zero input can never be activated: it meets neither condition
    c = margin_conditions(jnp.array([[1.0, 0.0], [0.0, 0.0]]), jnp.ones(2), 0.1)
    assert not bool(c.near_orthogonal) and not bool(c.positively_correlated)


@pytest.mark.slow
def test_near_orthogonal_instances_are_activated_after_one_step():
    # the derived constant C = 1 / gamma: under it one GD step from a tiny init activates all
    n, d, gamma = 5, 20000, 0.1

    def one(key):
        kd, kw = jax.random.split(key)
        X, y, _, _ = gaussian_mixture(n, d, signal=1.0, key=kd)
        net = small_leaky_init(10, d, gamma, scale=1e-10, key=kw)
        eta = 1.0 / jnp.max(jnp.sum(X * X, axis=1))
        sol = margin_gradient_descent(
            X, y, net, learning_rate=eta, max_steps=1, num_checkpoints=1, normalized=True
        )
        return margin_conditions(X, y, gamma).near_orthogonal, sol.activated[0]

    near, activated = jax.vmap(one)(jax.random.split(jax.random.PRNGKey(0), 4))
    assert int(jnp.sum(near)) >= 2
    assert bool(jnp.all(activated | ~near))


def test_span_bound_hand_case():
    X = jnp.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    mu = jnp.array([1.0, 1.0, 1.0])  # ||P mu|| = sqrt(2)
    np.testing.assert_allclose(span_error_bound(X, mu), scipy.stats.norm.cdf(-np.sqrt(2.0)))
    np.testing.assert_allclose(
        span_error_bound(X, mu, label_noise=0.1),
        0.1 + 0.8 * scipy.stats.norm.cdf(-np.sqrt(2.0)),
    )


@pytest.mark.slow
def test_span_bound_large_d_limit():
    # the closed form is the per-instance bound's large-d limit: at d / n = 20 the mean of 40
    # instances lies within 10% (the sampling error of the mean is ~3%, plus a Jensen gap)
    for n, d, s in ((20, 400, 1.0), (20, 400, 3.0), (50, 1600, 1.5)):
        vals = jax.vmap(
            lambda k, n=n, d=d, s=s: span_error_bound(*gaussian_mixture(n, d, signal=s, key=k)[::2])
        )(jax.random.split(jax.random.PRNGKey(0), 40))
        np.testing.assert_allclose(np.mean(vals), transition_lower_bound(n, s, d), rtol=0.1)
    # the two regimes: Bayes error for a strong signal, far above it for a weak one
    # (compared through Phi^-1: at n ||mu||^2 / d = 20 the argument is within 3% of ||mu||)
    z = -scipy.stats.norm.ppf(float(transition_lower_bound(20, 20.0, 400)))
    np.testing.assert_allclose(z, 20.0, rtol=0.03)
    assert float(transition_lower_bound(20, 1.0, 400)) > 2 * bayes_error(1.0)


@pytest.mark.slow
def test_trained_net_respects_the_span_bound():
    n, d, gamma = 20, 400, 0.1
    for signal in (1.0, 3.0):
        X, y, mu, _ = gaussian_mixture(n, d, signal=signal, key=jax.random.PRNGKey(3))
        net = small_leaky_init(10, d, gamma, scale=1e-10, key=jax.random.PRNGKey(4))
        eta = 1.0 / jnp.max(jnp.sum(X * X, axis=1))
        sol = margin_gradient_descent(
            X, y, net, learning_rate=eta, max_steps=2000, num_checkpoints=2, normalized=True
        )
        bound = float(span_error_bound(X, mu))
        linear = mixture_test_error(sol.model.W, sol.model.a, mu)
        assert float(linear) >= bound * (1 - 1e-9)
        v = effective_direction(sol.model.W, sol.model.a)
        assert float(jnp.linalg.norm(v)) > 0
        mc = sampled_test_error(sol.model, key=jax.random.PRNGKey(5), signal=signal)
        assert float(mc) >= bound - 4 * np.sqrt(bound * (1 - bound) / 20000)


def test_student_t_bayes_error_matches_scipy():
    for dof in (2.5, 3.0, 8.0):
        for s in (0.5, 2.0, 6.0):
            want = scipy.stats.t.cdf(-s / np.sqrt((dof - 2) / dof), dof)
            np.testing.assert_allclose(bayes_error(s, dof=dof), want, rtol=1e-10)
    assert abs(bayes_error(2.0, dof=1e7) - bayes_error(2.0)) < 1e-6
