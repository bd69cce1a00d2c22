import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

from dynamics import LeakyReLUNet, fixed_second_layer, gaussian_mixture
from theory import (
    RESULTS,
    activation_pattern,
    all_activated,
    bayes_error,
    effective_direction,
    max_margin,
    mixture_test_error,
    one_minus_cos,
    signal_regime,
)


def _scipy_dual(X, y, a, gamma, pattern):
    """The same dual by an independent solver: scipy's NNLS on the Cholesky form
    1/2 lam^T G lam - 1^T lam = 1/2 ||R lam - R^-T 1||^2 + const, G = R^T R."""
    X, y, a = np.asarray(X), np.asarray(y), np.asarray(a)
    c = np.where(np.asarray(pattern), 1.0, gamma)
    G = np.outer(y, y) * (X @ X.T) * ((a[:, None] ** 2 * c).T @ c)
    R = np.linalg.cholesky(G).T
    lam, _ = scipy.optimize.nnls(R, np.linalg.solve(R.T, np.ones(len(y))), maxiter=10_000)
    return lam


@pytest.mark.parametrize(
    "seed", [0, pytest.param(2, marks=pytest.mark.slow), pytest.param(5, marks=pytest.mark.slow)]
)
def test_max_margin_against_scipy_and_kkt(seed):
    key = jax.random.PRNGKey(seed)
    n, d, m = 12 + seed, 30 + 7 * seed, 6
    X, y, _, _ = gaussian_mixture(n, d, signal=0.5 + seed, key=key)
    a = fixed_second_layer(m)
    gamma = 0.1 + 0.1 * seed
    # the all-activated pattern, and a random pattern (any pattern's program is a QP too)
    random_pattern = jax.random.bernoulli(jax.random.fold_in(key, 1), 0.5, (m, n))
    for pattern in (None, random_pattern):
        mm = max_margin(X, y, a, gamma, pattern=pattern)
        assert bool(mm.ok) and bool(mm.feasible) and mm.result == RESULTS.successful
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
        assert int(mm.stats["num_steps"]) >= 1


def test_max_margin_hand_case():
    # one sample x = e_1 with y = 1 and one neuron a = 1: min ||w||^2 s.t. w_1 >= 1 is w = e_1
    mm = max_margin(jnp.array([[1.0, 0.0]]), jnp.array([1.0]), jnp.array([1.0]), 0.5)
    np.testing.assert_allclose(mm.W, [[1.0, 0.0]], atol=1e-15)
    np.testing.assert_allclose([mm.norm, mm.dual[0]], [1.0, 1.0])


@pytest.mark.slow  # default-run budget: the capability keeps other default tests
def test_max_margin_is_jittable_and_vmaps():
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    X, y, _, _ = jax.vmap(lambda k: gaussian_mixture(10, 40, signal=3.0, key=k))(keys)
    a = fixed_second_layer(4)
    mm = jax.jit(jax.vmap(lambda X, y: max_margin(X, y, a, 0.2)))(X, y)
    assert mm.W.shape == (3, 4, 40) and bool(jnp.all(mm.ok))


def test_infeasible_program_is_reported_not_nan():
    # x = 1 and x = -1 both labelled +1: in the all-activated pattern their lifted features
    # are opposite, so no W has both margins >= 1
    X, y = jnp.array([[1.0], [-1.0]]), jnp.array([1.0, 1.0])
    mm = max_margin(X, y, fixed_second_layer(2), 0.5)
    assert not bool(mm.feasible) and mm.result == RESULTS.infeasible
    assert not bool(jnp.any(jnp.isnan(mm.W))) and not bool(jnp.any(jnp.isnan(mm.dual)))
    with pytest.raises(Exception, match="infeasible"):
        max_margin(X, y, fixed_second_layer(2), 0.5, throw=True)


def test_bad_inputs_name_the_argument():
    X, y, _, _ = gaussian_mixture(6, 10, signal=2.0, key=jax.random.PRNGKey(0))
    a = fixed_second_layer(4)
    with pytest.raises(ValueError, match="gamma"):
        max_margin(X, y, a, 1.5)
    with pytest.raises(ValueError, match="`y` must take values"):
        max_margin(X, 2.0 * y, a, 0.1)
    with pytest.raises(ValueError, match="`y`"):
        max_margin(X, y[:4], a, 0.1)
    with pytest.raises(ValueError, match="pattern"):
        max_margin(X, y, a, 0.1, pattern=jnp.ones((3, 6), bool))


@pytest.mark.slow  # test_mixture checks the closed form against sampling on a smaller case
def test_closed_form_test_error_matches_monte_carlo():
    n, d, m, gamma = 20, 100, 6, 0.2
    X, y, mu, _ = gaussian_mixture(n, d, signal=1.5, key=jax.random.PRNGKey(3))
    a = fixed_second_layer(m)
    mm = max_margin(X, y, a, gamma)
    net = LeakyReLUNet(mm.W, a, gamma)
    for label_noise in (0.0, 0.1):
        Xt, yt, _, _ = gaussian_mixture(
            100_000, d, signal=1.5, key=jax.random.PRNGKey(9), label_noise=label_noise
        )
        mc = float(jnp.mean(yt * net.predict(Xt) <= 0))
        cf = float(mixture_test_error(mm.W, a, mu, label_noise=label_noise))
        se = np.sqrt(cf * (1 - cf) / 100_000)
        assert abs(mc - cf) < 4 * se, (label_noise, mc, cf, se)


def test_bayes_error_is_the_error_of_mu_itself():
    mu = jnp.zeros(5).at[0].set(2.0)
    W = jnp.zeros((2, 5)).at[0].set(mu)
    np.testing.assert_allclose(mixture_test_error(W, fixed_second_layer(2), mu), bayes_error(2.0))
    np.testing.assert_allclose(bayes_error(jnp.asarray(2.0)), bayes_error(2.0), rtol=1e-12)
    assert bayes_error(0.0) == pytest.approx(0.5)
    assert bayes_error(1.0, label_noise=0.1) == pytest.approx(0.1 + 0.8 * bayes_error(1.0))


def test_patterns_direction_and_regime():
    W = jnp.array([[1.0, -1.0], [0.5, 0.5]])
    X = jnp.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
    np.testing.assert_array_equal(
        activation_pattern(W, X), [[True, False, False], [True, True, False]]
    )
    a = jnp.array([1.0, -1.0])
    np.testing.assert_allclose(effective_direction(W, a), [0.5, -1.5])
    assert not bool(all_activated(W, a, X, jnp.array([1.0, 1.0, -1.0])))
    assert bool(all_activated(jnp.array([[1.0, 0.0]]), jnp.ones(1), X[:1], jnp.ones(1)))
    assert float(signal_regime(20, 2.0, 400)) == pytest.approx(0.2)


def test_one_minus_cos_hand_values_and_accuracy():
    W = jnp.array([[1.0, 0.0]])
    assert float(one_minus_cos(W, 3.0 * W)) == 0.0
    assert float(one_minus_cos(W, jnp.array([[0.0, 1.0]]))) == pytest.approx(1.0)
    assert float(one_minus_cos(W, -W)) == pytest.approx(2.0)
    # no cancellation: 1 - cos(eps) = eps^2 / 2 down to 1e-32
    tiny = float(one_minus_cos(jnp.array([[1.0, 1e-16]]), W))
    assert tiny == pytest.approx(5e-33, rel=1e-6)
    assert one_minus_cos(jnp.stack([W, -W]), W).shape == (2,)


@pytest.mark.parametrize(
    "X, y, a",
    [
        # random labels, n >> d: not separable in the lifted features
        (
            jax.random.normal(jax.random.PRNGKey(0), (60, 3)),
            jnp.sign(jax.random.normal(jax.random.PRNGKey(1), (60,))),
            fixed_second_layer(4),
        ),
        (jnp.array([[1.0, 0.5], [-1.0, -0.5]]), jnp.array([1.0, 1.0]), fixed_second_layer(2)),
        (jnp.eye(2), jnp.array([1.0, -1.0]), jnp.zeros(2)),  # a = 0: every margin is 0
    ],
)
def test_infeasible_programs_are_certified_infeasible(X, y, a):
    mm = max_margin(X, y, a, 0.5)
    assert mm.result == RESULTS.infeasible and not bool(mm.feasible)
    assert np.all(np.isfinite(np.asarray(mm.W))) and np.all(np.isfinite(np.asarray(mm.dual)))


def test_data_whose_gram_matrix_overflows_are_solved_at_their_scale():
    # X X^T = 1e400 once overflowed (reported nonfinite); the program is now scaled first
    y, a = jnp.array([1.0, -1.0]), jnp.array([1.0, -1.0])
    mm, ref = max_margin(1e200 * jnp.eye(2), y, a, 0.5), max_margin(jnp.eye(2), y, a, 0.5)
    assert bool(mm.ok)
    np.testing.assert_allclose(mm.W, ref.W, rtol=1e-14)
    np.testing.assert_allclose(float(mm.norm) * 1e200, float(ref.norm), rtol=1e-14)


def test_bayes_error_takes_dof_as_a_0d_array():
    # a valid dof=jnp.array(5.0) was refused (only Python and NumPy scalars were taken)
    from theory import bayes_error

    expected = bayes_error(1.0, dof=5)
    assert bayes_error(1.0, dof=jnp.array(5.0)) == expected
    assert bayes_error(1.0, dof=np.int64(5)) == expected
