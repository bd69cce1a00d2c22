import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

from dynamics import (
    LeakyReLUNet,
    fixed_second_layer,
    gaussian_mixture,
    log_margin_loss,
    margin_loss,
    small_leaky_init,
)
from integrators import margin_gradient_descent, one_minus_cos
from theory import all_activated, max_margin, mixture_test_error, signal_regime


def _scipy_dual(X, y, a, gamma, pattern):
    """The same dual by an independent solver: scipy's NNLS on the Cholesky form
    1/2 lam^T G lam - 1^T lam = 1/2 ||R lam - R^-T 1||^2 + const, G = R^T R."""
    X, y, a = np.asarray(X), np.asarray(y), np.asarray(a)
    c = np.where(np.asarray(pattern), 1.0, gamma)
    G = np.outer(y, y) * (X @ X.T) * ((a[:, None] ** 2 * c).T @ c)
    R = np.linalg.cholesky(G).T
    lam, _ = scipy.optimize.nnls(R, np.linalg.solve(R.T, np.ones(len(y))), maxiter=10_000)
    return lam


@pytest.mark.parametrize("seed", range(6))
def test_max_margin_against_scipy_and_kkt(seed):
    key = jax.random.PRNGKey(seed)
    n, d, m = 12 + seed, 30 + 7 * seed, 6
    X, y, _, _ = gaussian_mixture(n, d, signal=0.5 + seed, key=key)
    a = fixed_second_layer(m)
    gamma = 0.1 + 0.1 * seed
    # the all-activated pattern, and a random pattern (any pattern's program is a QP too)
    random_pattern = jax.random.bernoulli(jax.random.fold_in(key, 1), 0.5, (m, n))
    for pattern in (None, random_pattern):
        mm = max_margin(X, y, a, gamma, pattern)
        assert bool(mm.converged) and bool(mm.feasible)
        lam = _scipy_dual(X, y, a, gamma, mm.pattern)
        np.testing.assert_allclose(mm.dual, lam, atol=1e-9 * np.max(lam))
        # KKT: lam >= 0, margins >= 1, complementary slackness, zero duality gap
        assert float(jnp.min(mm.dual)) >= 0.0
        assert float(jnp.min(mm.margins)) >= 1 - 1e-10
        assert float(jnp.max(jnp.abs(mm.dual * (mm.margins - 1)))) < 1e-10 * float(jnp.max(lam))
        assert abs(float(mm.relative_gap)) < 1e-12
        # stationarity: the returned W is the primal solution of this pattern, unit norm
        slopes = jnp.where(mm.pattern, 1.0, gamma)  # phi's slopes, fixed by the pattern
        f = jnp.sum(a[:, None] * slopes * (mm.W * mm.norm @ X.T), axis=0)
        np.testing.assert_allclose(y * f, mm.margins, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(jnp.linalg.norm(mm.W), 1.0, rtol=1e-12)


def test_max_margin_is_jittable_and_vmaps():
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    X, y, _, _ = jax.vmap(lambda k: gaussian_mixture(10, 40, signal=3.0, key=k))(keys)
    a = fixed_second_layer(4)
    mm = jax.jit(jax.vmap(lambda X, y: max_margin(X, y, a, 0.2)))(X, y)
    assert mm.W.shape == (3, 4, 40) and bool(jnp.all(mm.converged))


def test_infeasible_program_is_reported_not_nan():
    # x = 1 and x = -1 both labelled +1: in the all-activated pattern their lifted features
    # are opposite, so no W has both margins >= 1
    X, y = jnp.array([[1.0], [-1.0]]), jnp.array([1.0, 1.0])
    mm = max_margin(X, y, fixed_second_layer(2), 0.5)
    assert not bool(mm.feasible)
    assert not bool(jnp.any(jnp.isnan(mm.W))) and not bool(jnp.any(jnp.isnan(mm.dual)))


def test_bad_inputs_name_the_argument():
    X, y, _, _ = gaussian_mixture(6, 10, signal=2.0, key=jax.random.PRNGKey(0))
    a = fixed_second_layer(4)
    with pytest.raises(ValueError, match="gamma"):
        max_margin(X, y, a, 1.5)
    with pytest.raises(ValueError, match="labels"):
        max_margin(X, 2.0 * y, a, 0.1)
    with pytest.raises(ValueError, match="`y`"):
        max_margin(X, y[:4], a, 0.1)
    with pytest.raises(ValueError, match="pattern"):
        max_margin(X, y, a, 0.1, jnp.ones((3, 6), bool))
    with pytest.raises(ValueError, match="gamma"):
        LeakyReLUNet(jnp.zeros((4, 10)), a, 0.0)
    with pytest.raises(ValueError, match="noise"):
        gaussian_mixture(6, 10, signal=1.0, key=jax.random.PRNGKey(0), noise="cauchy")
    net = small_leaky_init(4, 10, 0.1, scale=1e-8, key=jax.random.PRNGKey(1))
    with pytest.raises(ValueError, match="labels"):
        margin_gradient_descent(net, X, 0.5 * y, learning_rate=0.1, max_steps=10)


def test_closed_form_test_error_matches_monte_carlo():
    n, d, m, gamma = 20, 100, 6, 0.2
    X, y, mu, _ = gaussian_mixture(n, d, signal=1.5, key=jax.random.PRNGKey(3))
    a = fixed_second_layer(m)
    mm = max_margin(X, y, a, gamma)
    net = LeakyReLUNet(mm.W, a, gamma)
    for label_noise in (0.0, 0.1):
        Xt, yt, _, _ = gaussian_mixture(
            200_000, d, signal=1.5, key=jax.random.PRNGKey(9), label_noise=label_noise
        )
        mc = float(jnp.mean(yt * net.predict(Xt) <= 0))
        cf = float(mixture_test_error(mm.W, a, mu, label_noise=label_noise))
        se = np.sqrt(cf * (1 - cf) / 200_000)
        assert abs(mc - cf) < 4 * se, (label_noise, mc, cf, se)


def test_strong_signal_activates_every_neuron_after_one_step():
    X, y, _, _ = gaussian_mixture(20, 400, signal=15.0, key=jax.random.PRNGKey(0))
    yx = y[:, None] * X
    assert bool(jnp.all(yx @ yx.T >= 0))  # positively correlated
    net = small_leaky_init(10, 400, 0.1, scale=1e-10, key=jax.random.PRNGKey(1))
    assert not bool(all_activated(net.W, net.a, X, y))
    eta = 1.0 / jnp.max(jnp.sum(X * X, axis=1))
    sol = margin_gradient_descent(net, X, y, learning_rate=eta, max_steps=1, num_checkpoints=1)
    assert bool(sol.activated[0]) and bool(all_activated(sol.model.W, net.a, X, y))


def test_long_normalized_gd_stays_finite_and_converges_in_direction():
    X, y, _, _ = gaussian_mixture(20, 400, signal=15.0, key=jax.random.PRNGKey(0))
    net = small_leaky_init(10, 400, 0.1, scale=1e-10, key=jax.random.PRNGKey(1))
    eta = 1.0 / jnp.max(jnp.sum(X * X, axis=1))
    sol = margin_gradient_descent(
        net, X, y, learning_rate=eta, max_steps=100_000, num_checkpoints=51, normalized=True
    )
    assert bool(jnp.all(jnp.isfinite(sol.log_loss))) and bool(jnp.all(jnp.isfinite(sol.W)))
    assert float(sol.log_loss[-1]) < -1000  # L itself underflows to 0; log L does not
    mm = max_margin(X, y, net.a, 0.1)
    assert float(one_minus_cos(sol.W[-1], mm.W)) < 1e-7
    assert bool(jnp.all(sol.activated))


def test_losses_are_overflow_safe():
    u = jnp.array([-800.0, 0.0, 900.0])
    assert jnp.isfinite(log_margin_loss(u)) and jnp.isfinite(log_margin_loss(u, "logistic"))
    np.testing.assert_allclose(log_margin_loss(u), 800.0 - np.log(3.0))
    big = jnp.array([800.0, 900.0])
    assert float(margin_loss(big)) == 0.0 and np.isclose(
        float(log_margin_loss(big)), -800 - np.log(2) + np.log1p(np.exp(-100.0))
    )
    # log(1 + e^-u) = e^-u to 1e-300 relative here, so the two log-losses agree
    np.testing.assert_allclose(log_margin_loss(big, "logistic"), log_margin_loss(big), rtol=1e-12)


def test_mixture_noise_models_and_label_noise():
    key = jax.random.PRNGKey(0)
    for noise in ("gaussian", "rademacher", "student_t"):
        X, y, mu, clean = gaussian_mixture(4000, 50, signal=2.0, key=key, noise=noise)
        z = X - clean[:, None] * mu[None, :]
        assert abs(float(jnp.var(z)) - 1.0) < 0.05, noise
    _, y, _, clean = gaussian_mixture(20_000, 2, signal=1.0, key=key, label_noise=0.2)
    assert abs(float(jnp.mean(y != clean)) - 0.2) < 0.01
    assert float(signal_regime(20, 2.0, 400)) == pytest.approx(0.2)
