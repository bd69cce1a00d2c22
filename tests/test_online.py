"""`theory._online` and `theory._online_integrals`: the order-parameter ODEs of online SGD."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import erf as sp_erf
from scipy.stats import multivariate_normal

from dynamics import TwoLayerNet, order_parameters, teacher_student_loss
from theory import (
    RESULTS,
    OrderParameters,
    generalization_error,
    online_field,
    online_fixed_point,
    online_sgd_ode,
)
from theory._online_integrals import _orthant, gaussian_integrals, patterns


def _covariance(n, seed=0):
    A = np.random.default_rng(seed).normal(size=(n, n))
    return A @ A.T / n + 0.1 * np.eye(n)


def test_patterns_group_repeats():
    groups = patterns(np.array([[3, 3, 0, 5], [1, 1, 2, 4], [0, 1, 2, 3]]))
    rows, units = groups[(0, 0, 1, 2)]
    assert rows.tolist() == [0, 1] and units.tolist() == [[3, 0, 5], [1, 2, 4]]
    assert groups[(0, 1, 2, 3)][0].tolist() == [2]


@pytest.mark.slow
def test_four_unit_orthant_against_scipy():
    C = _covariance(4, seed=1)
    ours = float(_orthant(jnp.asarray(C), (0, 1, 2, 3)))
    mvn = multivariate_normal(np.zeros(4), C, maxpts=10**7, abseps=1e-11, releps=1e-11)
    assert abs(ours - mvn.cdf(np.zeros(4))) < 1e-8


_ACTS = {
    "relu": (lambda x: np.maximum(x, 0.0), lambda x: (x > 0) * 1.0),
    "erf": (sp_erf, lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x)),
    "linear": (lambda x: x, np.ones_like),
}
_TUPLES = [("i2", (0, 1)), ("i2", (2, 2)), ("i3", (0, 1, 2)), ("i3", (0, 0, 2)),
           ("i3", (0, 2, 0)), ("i4", (0, 1, 2, 3)), ("i4", (0, 0, 2, 3)), ("i4", (0, 1, 0, 1)),
           ("i4", (0, 1, 4, 4)), ("j2", (0, 1)), ("j2", (3, 3))]  # fmt: skip


@pytest.mark.parametrize("activation", sorted(_ACTS))
def test_integrals_against_monte_carlo(activation):
    """Every closed form, with and without repeated units, within 5 standard errors of 4e5
    samples (and the tensor Gauss-Hermite rule of a callable beside it)."""
    C = _covariance(5)
    u = np.random.default_rng(1).multivariate_normal(np.zeros(5), C, size=400_000)
    g, dg = _ACTS[activation]
    f = {"i2": lambda a, b: g(u[:, a]) * g(u[:, b]),
         "i3": lambda a, b, c: dg(u[:, a]) * u[:, b] * g(u[:, c]),
         "i4": lambda a, b, c, d: dg(u[:, a]) * dg(u[:, b]) * g(u[:, c]) * g(u[:, d]),
         "j2": lambda a, b: dg(u[:, a]) * dg(u[:, b])}  # fmt: skip
    for kind, t in _TUPLES:
        ours = float(gaussian_integrals(kind, activation, jnp.asarray(C), np.array([t]))[0])
        x = f[kind](*t)
        se = max(x.std() / np.sqrt(len(x)), 1e-12)
        assert abs(ours - x.mean()) < 5 * se + 1e-12, (kind, t, ours, x.mean(), se)


def test_gauss_hermite_matches_closed_form_for_smooth_units():
    # unit-scale variances: at variance 5.5 the rule needs 40 nodes for 1e-3 (g' = exp(-u^2)
    # is narrow against the nodes' spacing)
    C = jnp.asarray(0.3 * _covariance(4, seed=3))
    tuples = np.array([[0, 1, 2, 3], [0, 0, 1, 1]])
    closed = gaussian_integrals("i4", "erf", C, tuples)
    quad = gaussian_integrals("i4", jax.scipy.special.erf, C, tuples, nodes=24)
    np.testing.assert_allclose(quad, closed, rtol=1e-4)


def _nets(activation, K=3, M=2, d=6, seed=0):
    k = jax.random.split(jax.random.PRNGKey(seed), 4)
    student = TwoLayerNet(jax.random.normal(k[0], (K, d)) / np.sqrt(d),
                          jax.random.normal(k[1], (K,)), activation=activation)  # fmt: skip
    teacher = TwoLayerNet(jax.random.normal(k[2], (M, d)) / np.sqrt(d),
                          jax.random.normal(k[3], (M,)), activation=activation)  # fmt: skip
    return student, teacher


@pytest.mark.parametrize(
    "activation",
    [
        "linear",
        pytest.param("erf", marks=pytest.mark.slow),
        pytest.param("relu", marks=pytest.mark.slow),
    ],
)
def test_small_learning_rate_limit_is_the_population_gradient_flow(activation):
    """Without the lr^2 terms, dQ, dR and da are those of W' = -lr grad_W L, a' = -lr_2 grad_a L
    on `dynamics.teacher_student_loss`, and eps_g is that loss."""
    student, teacher = _nets(activation)
    s = order_parameters(student, teacher)
    f = online_field(s, activation=activation, lr=0.7, lr_second=0.3, second_order=False)
    grad = jax.grad(teacher_student_loss)(student, teacher)
    dW, da = -0.7 * grad.W, -0.3 * grad.a
    W, V = student.W, teacher.W
    np.testing.assert_allclose(f.Q, dW @ W.T + W @ dW.T, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(f.R, dW @ V.T, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(f.a, da, rtol=1e-9, atol=1e-12)
    eg = generalization_error(s, activation=activation)
    np.testing.assert_allclose(eg, teacher_student_loss(student, teacher), rtol=1e-12)


def test_second_order_term_of_linear_units_by_hand():
    """Linear units: the lr^2 term of dQ_ik is lr^2 a_i a_k (E Delta^2), E Delta^2 =
    omega^T Omega omega + noise^2."""
    student, teacher = _nets("linear")
    s = order_parameters(student, teacher)
    full = online_field(s, activation="linear", lr=0.5, noise=0.2)
    first = online_field(s, activation="linear", lr=0.5, noise=0.2, second_order=False)
    Omega = np.block([[s.Q, s.R], [s.R.T, s.T]])
    omega = np.concatenate([s.a, -s.c])
    expected = 0.25 * np.outer(s.a, s.a) * (omega @ Omega @ omega + 0.04)
    np.testing.assert_allclose(full.Q - first.Q, expected, rtol=1e-12)


@pytest.mark.slow
def test_drift_against_one_sgd_step_averaged():
    """The field, lr^2 term included, against the mean change of Q and R over 2e5 samples of
    one SGD step at d = 20 (times d): within 5 standard errors."""
    d, lr = 20, 0.8
    student, teacher = _nets("erf", K=2, M=2, d=d, seed=4)
    W, V, a, c = map(np.asarray, (student.W, teacher.W, student.a, teacher.a))
    x = np.random.default_rng(5).normal(size=(200_000, d))
    u = x @ W.T
    delta = sp_erf(u) @ a - sp_erf(x @ V.T) @ c
    step = -(lr / d) * (a * 2 / np.sqrt(np.pi) * np.exp(-u * u) * delta[:, None])  # (N, K)
    dW = step[:, :, None] * x[:, None, :]
    Wn = W[None] + dW
    dQ = (np.einsum("nkd,njd->nkj", Wn, Wn) - W @ W.T) * d
    dR = np.einsum("nkd,md->nkm", dW, V) * d
    f = online_field(order_parameters(student, teacher), activation="erf", lr=lr)
    for mc, ode in ((dQ, f.Q), (dR, f.R)):
        se = mc.std(0) / np.sqrt(len(mc))
        assert np.all(np.abs(mc.mean(0) - np.asarray(ode)) < 5 * se + 1e-12)


def _committee(eps=1e-3):
    return OrderParameters(Q=0.05 * jnp.eye(2), R=eps * jnp.eye(2), T=jnp.eye(2),
                           a=jnp.ones(2), c=jnp.ones(2))  # fmt: skip


@pytest.mark.slow
def test_ode_counts_its_evaluations_and_beats_euler():
    ts = jnp.linspace(0.0, 20.0, 11)
    ref = online_sgd_ode(_committee(), ts, lr=0.5, rtol=1e-13, atol=1e-13)
    sol = online_sgd_ode(_committee(), ts, lr=0.5)
    euler = online_sgd_ode(_committee(), ts, lr=0.5, dt=0.01)
    assert ref.ok and sol.ok and euler.ok
    assert int(euler.stats["rhs_evals"]) == 2000
    err = np.max(np.abs(sol.eg / ref.eg - 1))
    euler_err = np.max(np.abs(euler.eg / ref.eg - 1))
    assert err < 1e-8 and euler_err > 1e3 * err
    assert int(sol.stats["rhs_evals"]) < int(euler.stats["rhs_evals"])
    tsit5 = online_sgd_ode(_committee(), ts, lr=0.5, solver=diffrax.Tsit5())
    assert np.max(np.abs(tsit5.eg / ref.eg - 1)) < 1e-8


@pytest.mark.slow
def test_fixed_point_of_the_symmetric_plateau():
    """From a point on the plateau: a fixed point with equal R entries (no specialization),
    one unstable direction, and eps_g at the plateau's height."""
    ts = jnp.linspace(0.0, 40.0, 81)
    sol = online_sgd_ode(_committee(1e-6), ts, lr=0.5)
    at = jax.tree_util.tree_map(lambda x: x[-1], sol.state)
    fp = online_fixed_point(at, lr=0.5)
    assert fp.ok and float(fp.field_norm) < 1e-12
    R = np.asarray(fp.state.R)
    assert np.ptp(R) < 1e-8  # symmetric: every student unit overlaps every teacher unit alike
    assert int(np.sum(np.asarray(fp.eigenvalues.real) > 0)) == 1
    assert abs(float(fp.eg) - float(sol.eg[-1])) < 1e-3


def _bad_state(**changes):
    fields = dict(Q=jnp.eye(2), R=jnp.zeros((2, 1)), T=jnp.eye(1), a=jnp.ones(2), c=jnp.ones(1))
    return OrderParameters(**{**fields, **changes})


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda: online_sgd_ode(_bad_state(R=jnp.zeros((2, 2))), jnp.ones(2)), "`state.R`"),
        (lambda: online_sgd_ode(_bad_state(Q=jnp.ones((2, 3))), jnp.ones(2)), "`state.Q`"),
        (lambda: online_sgd_ode(_bad_state(a=jnp.ones(3)), jnp.ones(2)), "`state.a`"),
        (lambda: online_sgd_ode(_bad_state(T=jnp.full((1, 1), jnp.nan)), jnp.ones(2)), "finite"),
        (lambda: online_sgd_ode(_bad_state(), jnp.ones(2), lr=-1.0), "`lr`"),
        (lambda: online_sgd_ode(_bad_state(), jnp.ones(2), noise=-0.1), "`noise`"),
        (lambda: online_sgd_ode(_bad_state(), jnp.ones(2), activation="tanh"), "`activation`"),
        (lambda: online_sgd_ode(_bad_state(), jnp.array([1.0, 0.5])), "`ts`"),
        (lambda: online_sgd_ode(_bad_state(), jnp.ones(2), dt=0.0), "`dt`"),
        (lambda: online_sgd_ode(_bad_state(), jnp.ones(2), solver="Tsit5"), "`solver`"),
        (lambda: online_sgd_ode({"Q": 1}, jnp.ones(2)), "`state`"),
        (lambda: online_fixed_point(_bad_state(), tol=-1.0), "`tol`"),
        # no Gram matrices: they gave negative eps_g or NaN silently
        (lambda: generalization_error(_bad_state(R=jnp.full((2, 1), 2.0))), "semidefinite"),
        (lambda: generalization_error(_bad_state(Q=-jnp.eye(2))), "semidefinite"),
        (
            lambda: generalization_error(_bad_state(Q=jnp.array([[1.0, 0.9], [0.0, 1.0]]))),
            "symmetric",
        ),  # fmt: skip
    ],
)
def test_bad_inputs_are_refused(call, fragment):
    with pytest.raises(ValueError, match=fragment.replace("`", "\\`")):
        call()


@pytest.mark.slow
def test_a_zero_relu_unit_and_a_numpy_zero_rate_are_handled():
    dead = OrderParameters(Q=jnp.diag(jnp.array([1.0, 0.0])), R=jnp.zeros((2, 2)), T=jnp.eye(2),
                           a=jnp.ones(2), c=jnp.ones(2))  # fmt: skip
    assert np.all(np.isfinite(online_field(dead, activation="relu").Q))  # was NaN
    s = OrderParameters(Q=0.5 * jnp.ones((2, 2)) + 0.1 * jnp.eye(2), R=0.4 * jnp.ones((2, 2)),
                        T=jnp.eye(2), a=jnp.ones(2), c=jnp.ones(2))  # fmt: skip
    assert online_fixed_point(s, lr=0.1, lr_second=np.float32(0.0)).ok  # was nonfinite


def test_fixed_point_without_the_lr_squared_terms_is_the_gradient_flows():
    # second_order=False: the fixed point of the population gradient flow, the teacher
    # itself for a linear unit; with the lr^2 terms and label noise SGD's fixed point has
    # the noise's excess norm (Q above T). (Two linear units on two have a continuum of
    # fixed points: a singular Jacobian, reported as such.)
    T = jnp.ones((1, 1))
    s = OrderParameters(Q=1.1 * T, R=0.9 * T, T=T, a=jnp.ones(1), c=jnp.ones(1))
    kw = dict(activation="linear", lr=0.5, noise=0.5)
    flow = online_fixed_point(s, second_order=False, **kw)
    sgd = online_fixed_point(s, **kw)
    assert flow.ok and sgd.ok
    field = online_field(flow.state, second_order=False, **kw)
    assert float(jnp.max(jnp.abs(field.Q))) < 1e-12 and float(jnp.max(jnp.abs(field.R))) < 1e-12
    np.testing.assert_allclose(flow.state.Q, T, atol=1e-10)
    np.testing.assert_allclose(flow.state.R, T, atol=1e-10)
    assert float(jnp.max(jnp.abs(sgd.state.Q - T))) > 1e-3
    with pytest.raises(ValueError, match="second_order"):
        online_fixed_point(s, activation="erf", second_order="no")


def test_a_continuum_of_fixed_points_is_reported_singular():
    # two linear units on two: every W with the teacher's map is a fixed point, the Jacobian
    # is singular and Newton's step not finite (it came back `nonfinite`, the state NaN)
    T = jnp.array([[1.0, 0.2], [0.2, 1.0]])
    s = OrderParameters(Q=T + 0.1 * jnp.eye(2), R=T - 0.05, T=T, a=jnp.ones(2), c=jnp.ones(2))
    fp = online_fixed_point(s, activation="linear", lr=0.5, second_order=False)
    assert fp.result == RESULTS.singular and not fp.ok
    assert bool(jnp.all(jnp.isfinite(fp.state.Q)))
