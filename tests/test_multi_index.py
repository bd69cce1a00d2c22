import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics import (
    MeanFieldNet,
    MultiIndexTarget,
    loss_decomposition,
    mean_field_init,
    observables,
    population_distance,
    population_loss,
    sample_loss,
    sample_loss_gradient,
    standard_target,
    symmetrize,
)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["abs", "relu", "gelu_even", "swish"])
def test_population_loss_against_monte_carlo(name):
    d, r, m = 10, 3, 16
    target = standard_target(r, d, name)
    net = MeanFieldNet(2.0 * mean_field_init(m, d, key=jax.random.PRNGKey(0)).W, name)
    X = jax.random.normal(jax.random.PRNGKey(1), (200_000, d))
    r2 = 0.5 * (net.predict(X) - target.predict(X)) ** 2
    mc, se = float(jnp.mean(r2)), float(jnp.std(r2)) / math.sqrt(X.shape[0])
    assert abs(float(population_loss(net, target)) - mc) < 4 * se
    batched = sample_loss(net, (X, target.predict(X)), batch_size=50_000)
    np.testing.assert_allclose(batched, mc, rtol=1e-12)


def test_population_loss_hand_case_and_distance():
    # the net equal to the target (one neuron sqrt(r) e_j per direction, m = r) has loss 0,
    # and the loss of the zero function is 1/2 E f*^2 = (r + r (r - 1) 2/pi) / 2 for |z|
    target = standard_target(2, 4)
    exact = MeanFieldNet(jnp.sqrt(2.0) * jnp.eye(2, 4))
    assert abs(float(population_loss(exact, target))) < 1e-12
    tiny = MeanFieldNet(1e-8 * jnp.ones((3, 4)))
    np.testing.assert_allclose(population_loss(tiny, target), (2 + 2 * 2 / math.pi) / 2, rtol=1e-9)
    # distance: symmetric, 0 on itself
    a, b = mean_field_init(5, 4, key=jax.random.PRNGKey(0)), exact
    np.testing.assert_allclose(population_distance(a, b), population_distance(b, a), rtol=1e-12)
    assert abs(float(population_distance(a, a))) < 1e-12


@pytest.mark.slow  # default-run budget: the capability keeps other default tests
def test_gradients_stay_finite_at_exact_alignment():
    d, r = 8, 3
    target = standard_target(r, d)
    W = mean_field_init(6, d, key=jax.random.PRNGKey(0)).W
    W = W.at[0].set(2.0 * target.directions[0]).at[1].set(-0.5 * target.directions[1])
    W = W.at[2].set(3.0 * W[3])  # two neurons exactly parallel

    def loss(W):
        return population_loss(MeanFieldNet(W), target)

    g = jax.grad(loss)(W)
    assert bool(jnp.all(jnp.isfinite(g)))
    v = jax.random.normal(jax.random.PRNGKey(2), W.shape)
    h = 1e-6
    fd = (loss(W + h * v) - loss(W - h * v)) / (2 * h)
    np.testing.assert_allclose(jnp.sum(g * v), fd, rtol=1e-5)


@pytest.mark.slow  # default-run budget: the capability keeps other default tests
def test_loss_decomposition_of_an_invariant_net_is_exact():
    # neurons along single relevant axes are invariant under the group (coordinate sign flips,
    # which sigma's evenness absorbs, and permutations of the irrelevant coordinates), so
    # f~ = f: nothing is asymmetric
    target = standard_target(2, 5)
    net = MeanFieldNet(jnp.array([[1.0, 0, 0, 0, 0], [0, -2.0, 0, 0, 0]]))
    dec = loss_decomposition(net, target, key=jax.random.PRNGKey(0), num=3)
    np.testing.assert_allclose(dec.symmetric, dec.loss, rtol=1e-12)
    assert abs(float(dec.asymmetric)) < 1e-12


@pytest.mark.slow
@pytest.mark.parametrize("activation", ["abs", "relu"])
def test_loss_decomposition_of_the_symmetrized_network(activation):
    # relu is not even: the group then leaves the relevant coordinates' signs alone (flipping
    # them, the cross term had stayed near -0.1 at every K)
    d, r, m = 12, 3, 20
    target = standard_target(r, d, activation=activation)
    W = mean_field_init(m, d, key=jax.random.PRNGKey(0)).W
    W = W.at[:, :r].multiply(3.0).at[0].set(jnp.arange(d) / 5.0)
    net = MeanFieldNet(W, activation)  # not invariant
    L = float(population_loss(net, target))
    decompose = jax.jit(loss_decomposition, static_argnames="num")
    residuals = {}
    for K in (8, 128):
        res = []
        for rep in range(6):
            dec = decompose(net, target, key=jax.random.PRNGKey(rep), num=K)
            assert float(dec.loss) == pytest.approx(L, rel=1e-12)
            res.append(float(dec.loss - dec.symmetric - dec.asymmetric))
        residuals[K] = np.mean(res)
    # the cross term of the Monte Carlo group average vanishes like 1/K
    assert abs(residuals[128]) < abs(residuals[8]) / 5
    assert abs(residuals[128]) < 0.01 * L
    # the symmetrized net is invariant: f~(rho x) = f~(x) for a group element rho
    sym = symmetrize(net, r, key=jax.random.PRNGKey(9), num=256)
    moved = symmetrize(sym, r, key=jax.random.PRNGKey(10), num=1)
    assert float(population_distance(sym, moved)) < 0.02 * float(population_distance(net, sym))


def test_observables_hand_case_and_invariant():
    target = standard_target(2, 4)
    net = MeanFieldNet(jnp.array([[3.0, 0.0, 0.0, 4.0], [0.0, 1.0, 0.0, 0.0]]))
    obs = observables(net, target)
    # alpha~ = (25 + 1) / 2; relevant mass (9 + 1) / 2 over r = 2; irrelevant 16 / 2 over d - r
    np.testing.assert_allclose([obs.alpha, obs.beta1, obs.beta2], [13.0, 2.5, 4.0])
    np.testing.assert_allclose(obs.alignment, [9 / 25, 1.0])
    # invariant: alpha~ = r beta_1 + (d - r) beta_2 for any net
    rand = mean_field_init(7, 4, key=jax.random.PRNGKey(0))
    o = observables(rand, target)
    np.testing.assert_allclose(o.alpha, 2 * o.beta1 + 2 * o.beta2, rtol=1e-12)


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="`d` must be an integer >= 5"):
        standard_target(5, 3)
    with pytest.raises(ValueError, match="orthonormal"):
        MultiIndexTarget(jnp.array([[1.0, 0.0], [1.0, 1.0]]))
    with pytest.raises(ValueError, match="activation"):
        standard_target(2, 4, "tanh")
    with pytest.raises(ValueError, match="activation"):
        population_loss(MeanFieldNet(jnp.ones((2, 4)), "relu"), standard_target(2, 4))
    with pytest.raises(ValueError, match="`y`"):
        sample_loss(MeanFieldNet(jnp.ones((2, 4))), (jnp.ones((6, 4)), jnp.ones((6, 1))))
    with pytest.raises(ValueError, match="batch_size"):
        sample_loss(MeanFieldNet(jnp.ones((2, 4))), (jnp.ones((6, 4)), jnp.ones(6)), batch_size=4)


@pytest.mark.parametrize("activation", ["abs", "relu", "gelu_even", "swish"])
def test_written_out_sample_gradient_is_autodiff(activation):
    # the finite-sample field's two-matmul gradient against jax.grad of the sample loss
    W = mean_field_init(7, 5, key=jax.random.PRNGKey(0)).W
    X = jax.random.normal(jax.random.PRNGKey(1), (40, 5))
    y = jax.random.normal(jax.random.PRNGKey(2), (40,))
    for batch in (None, 8):
        ours = sample_loss_gradient(MeanFieldNet(W, activation), (X, y), batch_size=batch)
        want = jax.grad(lambda W: sample_loss(MeanFieldNet(W, activation), (X, y)))(W)
        np.testing.assert_allclose(ours, want, rtol=1e-12, atol=1e-15)


def test_sample_loss_gradient_has_the_weights_dtype():
    # float32 weights on float64 samples: the gradient (and the flow's field) stays float32
    W = mean_field_init(6, 4, key=jax.random.PRNGKey(0), dtype=jnp.float32).W
    X = jax.random.normal(jax.random.PRNGKey(1), (8, 4), jnp.float64)
    for batch in (None, 4):
        g = sample_loss_gradient(MeanFieldNet(W), (X, jnp.ones(8)), batch_size=batch)
        assert g.dtype == jnp.float32
