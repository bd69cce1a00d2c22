"""Gaussian teacher-student population losses against Monte Carlo (1e6 samples, within 4
standard errors), the closed forms against the biased quadrature path, gradients at an exact
match, and the population gradient flow."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics import (
    TwoLayerNet,
    teacher_student_loss,
    teacher_student_quadrature_error,
    unchecked,
)
from integrators import gradient_flow

KEYS = jax.random.split(jax.random.PRNGKey(0), 6)


def _pair(activation, bias, d=5, m=4, k=3):
    student = TwoLayerNet(
        jax.random.normal(KEYS[0], (m, d)) / 2, jax.random.normal(KEYS[1], (m,)),
        jax.random.normal(KEYS[2], (m,)) if bias else None, activation=activation,
    )  # fmt: skip
    teacher = TwoLayerNet(
        jax.random.normal(KEYS[3], (k, d)) / 2, jax.random.normal(KEYS[4], (k,)),
        jax.random.normal(KEYS[5], (k,)) if bias else None, activation=activation,
    )  # fmt: skip
    return student, teacher


def _monte_carlo(student, teacher, num=10**6, seed=1):
    x = jax.random.normal(jax.random.PRNGKey(seed), (num, student.W.shape[1]))
    r = 0.5 * (student(x) - teacher(x)) ** 2
    return float(r.mean()), float(r.std() / np.sqrt(num))


SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    ("activation", "bias"),
    [
        pytest.param(a, b, marks=SLOW)
        for a in ("relu", "abs", "erf", "linear", "tanh")
        for b in (False, True)
    ],
)
def test_population_loss_matches_monte_carlo(activation, bias):
    student, teacher = _pair(activation, bias)
    mean, se = _monte_carlo(student, teacher)
    value = float(teacher_student_loss(student, teacher, nodes=64))
    assert abs(value - mean) < 4 * se, (value, mean, se)


@pytest.mark.parametrize("activation", ["relu", "abs", "erf"])
def test_closed_forms_match_the_quadrature_path(activation):
    student, teacher = _pair(activation, False)
    zero_bias = TwoLayerNet(student.W, student.a, jnp.zeros(4), activation=activation)
    exact = teacher_student_loss(student, teacher)
    quadrature = teacher_student_loss(zero_bias, teacher)  # the biased path, b = 0
    assert abs(float(exact - quadrature)) < 1e-13
    # and against the Gauss-Hermite path (a callable activation): to rounding for the smooth
    # erf; for the kinked ones Gauss-Hermite converges slowly (1e-3 at 200 nodes)
    fn = {"relu": jax.nn.relu, "abs": jnp.abs, "erf": jax.scipy.special.erf}[activation]
    generic = TwoLayerNet(student.W, student.a, activation=fn)
    generic_t = TwoLayerNet(teacher.W, teacher.a, activation=fn)
    tol = 1e-12 if activation == "erf" else 5e-3
    assert abs(float(teacher_student_loss(generic, generic_t, nodes=200) - exact)) < tol


@pytest.mark.slow
def test_mixed_activations_and_zero_units():
    student, _ = _pair("relu", True)
    _, teacher = _pair("erf", True)
    mean, se = _monte_carlo(student, teacher)
    assert abs(float(teacher_student_loss(student, teacher)) - mean) < 4 * se
    zero = TwoLayerNet(jnp.zeros((1, 5)), jnp.ones(1), jnp.array([0.5]))
    mean, se = _monte_carlo(zero, teacher)
    assert abs(float(teacher_student_loss(zero, teacher)) - mean) < 4 * se


@pytest.mark.parametrize("activation", ["relu", "abs", "erf"])
def test_exact_match_has_zero_loss_and_finite_zero_gradient(activation):
    _, teacher = _pair(activation, False)
    loss, grad = jax.value_and_grad(teacher_student_loss)(teacher, teacher)
    assert abs(float(loss)) < 1e-12
    leaves = jax.tree_util.tree_leaves(grad)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in leaves)
    assert max(float(jnp.abs(g).max()) for g in leaves) < 1e-8


@pytest.mark.slow
def test_gradient_matches_finite_differences_and_fixed_second_layer():
    student, teacher = _pair("relu", True)
    grad = jax.grad(teacher_student_loss)(student, teacher)
    e = jnp.zeros_like(student.W).at[1, 2].set(1e-6)
    up = TwoLayerNet(student.W + e, student.a, student.b)
    down = TwoLayerNet(student.W - e, student.a, student.b)
    fd = (teacher_student_loss(up, teacher) - teacher_student_loss(down, teacher)) / 2e-6
    assert abs(float(fd - grad.W[1, 2])) < 1e-7
    fixed = TwoLayerNet(student.W, student.a, student.b, train_second_layer=False)
    assert float(jnp.abs(jax.grad(teacher_student_loss)(fixed, teacher).a).max()) == 0.0


@pytest.mark.slow
def test_quadrature_error_estimate():
    student, teacher = _pair("tanh", True)
    coarse = teacher_student_quadrature_error(student, teacher, nodes=24)
    fine = teacher_student_quadrature_error(student, teacher, nodes=80)
    truth = teacher_student_loss(student, teacher, nodes=200)
    assert fine < coarse
    assert abs(float(teacher_student_loss(student, teacher, nodes=80) - truth)) <= float(fine)
    assert float(teacher_student_quadrature_error(*_pair("relu", True))) == 0.0
    # the estimate at the fewest nodes compares with a finer rule, not with itself (was 0.0
    # on a tanh pair 0.4 off): the size of the error there (measured: 0.123 for 0.144 at 4
    # nodes, 0.090 for 0.083 at 5, 0.023 for 0.021 at 8)
    for nodes in (4, 5, 8):
        error = abs(float(teacher_student_loss(student, teacher, nodes=nodes) - truth))
        estimate = float(teacher_student_quadrature_error(student, teacher, nodes=nodes))
        assert error / 2 <= estimate <= 2 * error


@pytest.mark.slow
def test_population_gradient_flow_learns_the_teacher():
    teacher = TwoLayerNet(jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), jnp.array([1.0, 1.0]))
    student = TwoLayerNet(
        0.5 * jax.random.normal(KEYS[0], (4, 3)), 0.5 * jax.random.normal(KEYS[1], (4,))
    )
    ts = jnp.linspace(0.0, 200.0, 5)
    loss = unchecked.teacher_student_loss
    sol = gradient_flow(student, loss, ts, args=teacher, hold_kinks=False)
    assert sol.ok and float(sol.loss[-1]) < 1e-4 * float(sol.loss[0])
    jax.vmap(lambda W: teacher_student_loss(TwoLayerNet(W, student.a), teacher))(
        jnp.stack([student.W, 2 * student.W])
    ).block_until_ready()


def test_exact_kernels_hold_at_tiny_and_huge_weights():
    # sqrt(q1 q2) underflowed at |w| ~ 1e-100 (the loss read 0) and overflowed at 1e100
    # (refused, though the loss 1.6e200 is a float): the loss scales as the weights squared
    Ws, a = jnp.array([[0.5, -0.3], [0.2, 0.9]]), jnp.array([0.7, -0.4])
    Wt, at = jnp.array([[1.0, 2.0]]), jnp.array([1.0])
    for activation in ("relu", "abs", "linear"):
        base = teacher_student_loss(
            TwoLayerNet(Ws, a, activation=activation), TwoLayerNet(Wt, at, activation=activation)
        )
        for scale in (1e-100, 1e100, 1e-150):
            scaled = teacher_student_loss(
                TwoLayerNet(Ws * scale, a, activation=activation),
                TwoLayerNet(Wt * scale, at, activation=activation),
            )
            np.testing.assert_allclose(float(scaled) / scale**2, float(base), rtol=1e-12)


def test_quadrature_error_of_a_steep_unit_is_not_an_underestimate():
    # tanh(30 w . x) is nearly a step: the change from 48 to 96 nodes (1.8e-3) was 10 times
    # below the error (1.6e-2); the rule does not converge there, and the estimate says so
    Ws, a = jnp.array([[0.5, -0.3], [0.2, 0.9]]), jnp.array([0.7, -0.4])
    student = TwoLayerNet(30 * Ws, a, activation="tanh")
    teacher = TwoLayerNet(jnp.array([[1.0, 2.0]]), jnp.array([1.0]), activation="tanh")
    assert np.isinf(float(teacher_student_quadrature_error(student, teacher, nodes=48)))
