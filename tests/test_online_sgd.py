"""`integrators.online_sgd`: online SGD simulated, against its order-parameter ODEs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics import TwoLayerNet, order_parameters
from integrators import online_sgd
from theory import RESULTS, online_sgd_ode


def _pair(d, activation="erf", K=2, M=2):
    V = jnp.linalg.qr(jax.random.normal(jax.random.PRNGKey(0), (d, M)))[0].T
    teacher = TwoLayerNet(V, jnp.ones(M), activation=activation)
    R0 = jnp.array([[0.2, 0.1], [0.1, 0.15]])[:K, :M]
    Z = jax.random.normal(jax.random.PRNGKey(1), (K, d))
    Z = Z - (Z @ V.T) @ V
    student = TwoLayerNet(R0 @ V + 0.3 * Z / jnp.linalg.norm(Z, axis=1, keepdims=True),
                          jnp.ones(K), activation=activation)  # fmt: skip
    return student, teacher


def test_saves_order_parameters_and_the_exact_error():
    student, teacher = _pair(50)
    ts = jnp.array([0.0, 1.0, 2.0])
    sol = online_sgd(student, teacher, ts, key=jax.random.PRNGKey(2), lr=0.5)
    assert sol.ok and sol.steps.tolist() == [0, 50, 100]
    assert sol.state.Q.shape == (3, 2, 2) and sol.eg.shape == (3,)
    np.testing.assert_allclose(sol.state.Q[-1], sol.model.W @ sol.model.W.T, rtol=1e-12)
    again = online_sgd(student, teacher, ts, key=jax.random.PRNGKey(2), lr=0.5)
    np.testing.assert_array_equal(sol.eg, again.eg)  # the key fixes the samples


@pytest.mark.slow
@pytest.mark.parametrize("activation", ["erf", "relu"])
def test_simulations_agree_with_the_ode(activation):
    """d = 500, 8 seeds, to t = 5: the seeds' mean eps_g within 4 standard errors of the ODEs'
    mean (each ODE from its seed's own start)."""
    d, ts = 500, jnp.linspace(0.0, 5.0, 11)
    teacher = _pair(d, activation)[1]

    def one(key):
        k1, k2 = jax.random.split(key)
        Z = jax.random.normal(k1, (2, d)) / np.sqrt(d)
        student = TwoLayerNet(0.2 * teacher.W + 0.5 * Z, jnp.ones(2), activation=activation)
        sim = online_sgd(student, teacher, ts, key=k2, lr=0.5)
        ode = online_sgd_ode(order_parameters(student, teacher), ts, activation=activation,
                             lr=0.5)  # fmt: skip
        return sim.eg, ode.eg

    sim, ode = jax.jit(jax.vmap(one))(jax.random.split(jax.random.PRNGKey(3), 8))
    se = np.std(sim, 0, ddof=1) / np.sqrt(8)
    gap = np.abs(np.mean(sim, 0) - np.mean(ode, 0))
    assert np.all(gap[1:] < 4 * se[1:]) and gap[0] < 1e-12


def test_divergence_is_reported():
    student, teacher = _pair(64, "relu")
    sol = online_sgd(student, teacher, jnp.array([0.0, 4.0]), key=jax.random.PRNGKey(0), lr=1e6)
    assert sol.result == RESULTS.diverged and np.isinf(sol.eg[-1])


@pytest.mark.parametrize(
    "change, fragment",
    [
        (dict(b=jnp.zeros(2)), "biases"),
        (dict(activation="relu"), "one activation"),
        (dict(W=jnp.ones((2, 5))), "`teacher.W`"),
    ],
)
def test_bad_nets_are_refused(change, fragment):
    student, teacher = _pair(8)
    fields = dict(W=student.W, a=student.a, b=None, activation="erf")
    bad = TwoLayerNet(**{**fields, **change})
    with pytest.raises(ValueError, match=fragment.replace("`", "\\`")):
        online_sgd(bad, teacher, jnp.array([0.0, 1.0]), key=jax.random.PRNGKey(0), lr=0.5)


def test_bad_options_are_refused():
    student, teacher = _pair(8)
    ts = jnp.array([0.0, 1.0])
    with pytest.raises(ValueError, match="`key`"):
        online_sgd(student, teacher, ts, key=0, lr=0.5)
    with pytest.raises(ValueError, match="`lr`"):
        online_sgd(student, teacher, ts, key=jax.random.PRNGKey(0), lr=0.0)
    # past 2^31 samples the step counter wrapped: nothing trained, marked ok
    with pytest.raises(ValueError, match="`ts` must end at most"):
        online_sgd(student, teacher, jnp.array([0.0, 3e8]), key=jax.random.PRNGKey(0), lr=0.5)
    fixed = TwoLayerNet(student.W, student.a, activation="erf", train_second_layer=False)
    with pytest.raises(ValueError, match="`lr_second`"):
        online_sgd(fixed, teacher, ts, key=jax.random.PRNGKey(0), lr=0.5, lr_second=0.1)
