"""Trust round 2: inputs that once gave a silent wrong answer now give the right one or say why
(the table-driven refusals are in tests/test_bad_inputs_*.py)."""

import os
import subprocess
import sys

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dynamics as D
import theory as T
from theory import RESULTS
from theory.numerics import Rodas4, Rodas5P


def _solve(solver, field, t1, dt0, controller):
    return diffrax.diffeqsolve(
        diffrax.ODETerm(field), solver, 0.0, t1, dt0, jnp.array([1.0]),
        stepsize_controller=controller, throw=False, max_steps=4096,
    )  # fmt: skip


@pytest.mark.parametrize("solver", [Rodas4(), Rodas5P()], ids=["Rodas4", "Rodas5P"])
def test_rodas_at_a_constant_step_names_a_singular_w_and_a_nan_field(solver):
    # y' = c y with c = 1 / (h gamma), as the step forms it: shift I - J = 0 exactly
    c = 1.0 / (jnp.asarray(1.0) * float(solver._tableau.gamma))
    sol = _solve(solver, lambda t, y, a: c * y, 1.0, 1.0, diffrax.ConstantStepSize())
    assert sol.result == diffrax.RESULTS.singular
    sol = _solve(solver, lambda t, y, a: y * jnp.nan, 1.0, 0.5, diffrax.ConstantStepSize())
    assert sol.result == diffrax.RESULTS.nonfinite
    # adaptive: the singular step is rejected and the solve goes on, to e^h
    pid = diffrax.PIDController(rtol=1e-8, atol=1e-8)
    sol = _solve(solver, lambda t, y, a: c * y, 1.0, 1.0, pid)
    assert sol.result == diffrax.RESULTS.successful
    np.testing.assert_allclose(sol.ys[-1, 0], np.exp(c), rtol=1e-6)


@pytest.mark.parametrize("scale", [1e200, 1e-200, 3.0])
def test_saddle_jumps_scale_with_the_labels_exactly(scale):
    y = jnp.array([1.0, -2.0, 0.5])
    S, D3 = jnp.array([1.0, -1.0]), jnp.array([[0.6, 0.3, 0.7], [0.2, 0.9, -0.1]])
    ref = T.saddle_jumps(y, S, D3)
    big = T.saddle_jumps(scale * y, S, D3)
    assert big.ok and int(big.num_jumps) == int(ref.num_jumps) == 2
    # rescaled time ~ 1/|y|, a ~ |y|^(1/2), cost ~ |y|: t_1 = 1e-200 and cost 1e200 are numbers
    np.testing.assert_allclose(big.times, ref.times / scale, rtol=1e-14)
    np.testing.assert_allclose(big.cost, ref.cost * scale, rtol=1e-14)
    np.testing.assert_allclose(big.final_amplitudes, ref.final_amplitudes * scale**0.5, rtol=1e-14)
    assert big.neurons.tolist() == ref.neurons.tolist()


def test_saddle_jumps_on_one_label_of_1e200_is_the_closed_form():
    pred = T.saddle_jumps(jnp.array([1e200]), jnp.array([1.0]), jnp.array([[0.3]]))
    assert pred.ok and float(pred.times[0]) == pytest.approx(1e-200, rel=1e-15)
    assert float(pred.cost) == pytest.approx(1e200, rel=1e-15)


def test_margin_conditions_are_scale_free():
    X = jnp.array([[3.0, 0.1], [-3.0, 0.1], [0.2, 2.0]])
    y = jnp.array([1.0, -1.0, 1.0])
    ref = T.margin_conditions(X, y, 0.1)
    for scale in (1e200, 1e-200):
        c = T.margin_conditions(scale * X, y, 0.1)
        assert bool(c.positively_correlated) == bool(ref.positively_correlated)
        assert bool(c.near_orthogonal) == bool(ref.near_orthogonal)
        np.testing.assert_allclose(c.orthogonality_ratio, ref.orthogonality_ratio, rtol=1e-14)
        np.testing.assert_allclose(c.min_correlation, ref.min_correlation, rtol=1e-14)


def test_numpy_integer_dof_is_a_number():
    assert T.bayes_error(3.0, dof=np.int64(5)) == T.bayes_error(3.0, dof=5)


def test_losses_check_finiteness_under_jit_too():
    net = D.TwoLayerReLU(jnp.array([1.0]), jnp.array([[1.0, 0.0]]))
    loss = jax.jit(lambda X: D.square_loss(net, (X, jnp.ones(2))))
    assert float(loss(jnp.eye(2))) == 0.25  # residuals (0, -1)
    with pytest.raises(Exception, match="`X` must be finite"):
        loss(jnp.full((2, 2), jnp.nan))


@pytest.mark.slow  # default-run budget: the capability keeps other default tests
def test_a_group_on_one_common_support_costs_exactly_its_closed_form():
    # neurons 0 and 1 share the support {0, 1} (different prefactors): a tie whose split the
    # fast phase decides, but whose cost is ||y_S|| = sqrt 5 exactly; neuron 2 fits sample 2
    y = jnp.array([1.0, 2.0, -0.5])
    S = jnp.array([1.0, 1.0, -1.0])
    D3 = jnp.array([[0.7, 0.2, -0.3], [0.1, 0.8, -0.4], [-0.2, 0.1, 0.6]])
    pred = T.saddle_jumps(y, S, D3)
    assert pred.ok and pred.groups[0].tolist()[:2] == [0, 1]
    assert float(pred.cost) == pytest.approx(np.sqrt(5.0) + 0.5, rel=1e-14)
    a = np.asarray(pred.final_amplitudes)
    assert a[0] > 0 and a[1] > 0 and abs(a[0] - a[1]) > 1e-3  # a real split, not halves
    assert a[0] ** 2 + a[1] ** 2 == pytest.approx(np.sqrt(5.0), rel=1e-14)


@pytest.mark.slow  # default-run budget: the capability keeps other default tests
def test_float64_asked_for_without_x64_is_refused_not_truncated():
    code = (
        "import jax, jax.numpy as jnp, dynamics\n"
        "try:\n"
        "    dynamics.balanced_init(4, 4, 1e-3, key=jax.random.PRNGKey(0), dtype=jnp.float64)\n"
        "except ValueError as e:\n"
        "    print('refused:', e)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert "refused: `dtype` float64 needs float64 enabled" in out.stdout, out.stderr


def test_a_float32_unit_of_size_1e30_is_not_zero():
    from integrators._units import zero_units

    params = [jnp.full((2,), 1e-30, jnp.float32), jnp.zeros((2,), jnp.float32)]
    labels = [jnp.array([0, 0]), jnp.array([1, 1])]
    assert zero_units(params, labels, 2).tolist() == [False, True]  # 1e-30^2 underflows


def test_scale_free_measures_at_1e200_and_1e_minus_200():
    W = jnp.array([[1.0, 0.2], [0.3, -1.0]])
    ref = T.one_minus_cos(W, W.T)
    for s in (1e200, 1e-200):
        np.testing.assert_allclose(T.one_minus_cos(s * W, W.T), ref, rtol=1e-14)
    mu = jnp.array([1.0, 0.5])
    a = jnp.array([1.0, -1.0])
    err = T.mixture_test_error(W, a, mu)
    np.testing.assert_allclose(T.mixture_test_error(1e200 * W, a, mu), err, rtol=1e-14)
    assert float(T.signal_regime(5, 1e200, 10, noise_scale=1e200)) == 0.5
    np.testing.assert_allclose(
        T.transition_lower_bound(5, 1e200, 10, noise_scale=1e200),
        T.transition_lower_bound(5, 1.0, 10),
        rtol=1e-14,
    )


def test_hessian_spectrum_of_a_nan_point_with_a_finite_hessian_is_nonfinite():
    from integrators import hessian_spectrum

    def loss(m, args):  # H = diag(1, 0) whatever m.a[1] is
        return 0.5 * m.a[0] ** 2 + 0.0 * m.a[1]

    net = D.TwoLayerReLU(jnp.array([1.0, jnp.nan]), jnp.eye(2))
    assert hessian_spectrum(net, loss).result == RESULTS.nonfinite_point
    assert hessian_spectrum(net, loss, k=1, steps=6).result == RESULTS.nonfinite_point


def test_transition_lower_bound_at_an_overflowing_signal_is_zero():
    assert float(T.transition_lower_bound(5, 1e200, 10)) == 0.0  # Phi(-1e200)
    assert float(T.transition_lower_bound(5, 1.0, 10, noise_scale=1e-200)) == 0.0


@pytest.mark.parametrize("s,t", [(1e-200, 1.0), (1e200, 1.0), (1.0, 1e-200), (1e150, 1e150)])
def test_max_margin_is_exact_at_any_scale_of_x_and_a(s, t):
    # W_mm(s X, t a) = W_mm(X, a) / (s t): the Gram matrix once underflowed to "infeasible"
    X, y, a = jnp.array([[2.0, 0.0], [0.0, 1.0]]), jnp.array([1.0, -1.0]), jnp.array([1.0, -1.0])
    ref = T.max_margin(X, y, a, 0.5)
    mm = T.max_margin(X * s, y, a * t, 0.5)
    assert bool(mm.ok)
    np.testing.assert_allclose(mm.W, ref.W, rtol=1e-14)
    np.testing.assert_allclose(float(mm.norm) * s * t, float(ref.norm), rtol=1e-14)
    np.testing.assert_allclose(mm.margins, ref.margins, rtol=1e-14)


def test_mass_ode_from_a_huge_or_tiny_start_has_no_cancellation():
    # alpha(t) = K / (1 - e^-x + (K / alpha0) e^-x), x = 4 c0^2 K t; K = 3 for these parameters
    ts = jnp.array([0.0, 1e-12, 10.0])
    big = T.mass_ode(1e200, ts, c0=1.0, r=4, weight_decay=2.0)
    np.testing.assert_allclose(big, [1e200, 3.0 / -np.expm1(-12e-12), 3.0], rtol=1e-9)
    tiny = T.mass_ode(1e-300, jnp.array([0.0, 0.1]), c0=1.0, r=4, weight_decay=2.0)
    back = T.mass_ode(1.0, jnp.array([-0.1]), c0=1.0, r=4, weight_decay=2.0)  # before t = 0
    np.testing.assert_allclose(back, [3.0 / (1.0 + 2.0 * np.exp(1.2))], rtol=1e-13)
    np.testing.assert_allclose(tiny, [1e-300, 1e-300 * np.exp(1.2)], rtol=1e-9)


@pytest.mark.slow  # default-run budget: the capability keeps other default tests
def test_stage_zero_time_at_a_tiny_threshold_is_finite():
    # t_0 = log(target / (alpha0 eta)) / rate; K / target - 1 once rounded to 0 (t_0 = inf)
    kw = dict(activation="abs", r=8, d=40, m=20, weight_decay=0.4, horizon=1.0, points=11)
    t1, t2 = T.stage_times(**kw, threshold=1e-100).t_0, T.stage_times(**kw, threshold=1e-200).t_0
    rate = T.stage_equilibria(activation="abs", r=8, d=40, weight_decay=0.4).rate[0]
    np.testing.assert_allclose(float(t2 - t1), 100 * np.log(10) / float(rate), rtol=1e-12)


@pytest.mark.parametrize("s", [1e-200, 1e200])
def test_observables_alignment_is_scale_free(s):
    # alignment = max_i cos^2(w_i, e_k): 0 at 1e-200 and NaN at 1e200 when formed from ||w||^2
    W = jnp.array([[2.0, 1.0, 0.0, 0.0], [0.5, 0.0, 0.0, 3.0]])
    target = D.standard_target(1, 4)
    ref = D.observables(D.MeanFieldNet(W), target)
    obs = D.observables(D.MeanFieldNet(W * s), target)
    np.testing.assert_allclose(obs.alignment, ref.alignment, rtol=1e-14)
    np.testing.assert_allclose(ref.alignment, [0.8], rtol=1e-14)


def test_margin_gd_normalized_margin_at_a_huge_step_is_not_zero():
    # one step of 1e200 puts ||W|| at 1e200 (||W||^2 overflowed and min_margin read 0)
    from integrators import margin_gradient_descent

    X, y = jnp.array([[3.0, 1.0], [-3.0, 1.0]]), jnp.array([1.0, -1.0])
    net = D.LeakyReLUNet(jnp.zeros((2, 2)), jnp.array([1.0, -1.0]), 0.1)
    big = margin_gradient_descent(X, y, net, learning_rate=1e200, max_steps=10)
    ref = margin_gradient_descent(X, y, net, learning_rate=1e3, max_steps=10)
    np.testing.assert_allclose(big.min_margin[-1], ref.min_margin[-1], rtol=1e-12)


def test_two_homogeneous_quantities_overflow_to_inf_not_nan():
    # f_W of a mean-field net and lambda_max of the tangent kernel are 2-homogeneous: formed at
    # 1e100 they are exact (1e200 x the unit-scale value), at 1e200 they overflow to inf
    W, X = (
        jax.random.normal(jax.random.PRNGKey(0), (5, 3)),
        jax.random.normal(jax.random.PRNGKey(1), (4, 3)),
    )
    ref = D.MeanFieldNet(W).predict(X)
    np.testing.assert_allclose(D.MeanFieldNet(W * 1e100).predict(X) / 1e200, ref, rtol=1e-13)
    assert np.all(np.isposinf(D.MeanFieldNet(W * 1e200).predict(X)))
    y = jnp.zeros(4)
    assert np.isposinf(D.sample_loss(D.MeanFieldNet(W * 1e200), (X, y)))
    net = D.TwoLayerReLU(jnp.array([1.0, -0.5]), jnp.array([[1.0, 0.0], [0.3, 0.2]]))
    lam = D.tangent_kernel_max(net, jnp.eye(2))
    big = D.tangent_kernel_max(D.TwoLayerReLU(net.a * 1e100, net.W * 1e100), jnp.eye(2))
    np.testing.assert_allclose(big / 1e200, lam, rtol=1e-13)
    assert np.isposinf(
        D.tangent_kernel_max(D.TwoLayerReLU(net.a * 1e200, net.W * 1e200), jnp.eye(2))
    )
    # and in X
    big_x = D.tangent_kernel_max(net, jnp.eye(2) * 1e100)
    np.testing.assert_allclose(big_x / 1e200, lam, rtol=1e-13)
    assert np.isposinf(D.tangent_kernel_max(net, jnp.eye(2) * 1e200))


def test_rescaling_keeps_gradients_exact_at_zero_entries():
    # jnp.ldexp's derivative at x = 0 reads 1, not 2^e: the power-of-2 rescaling of
    # MeanFieldNet.predict once gave a wrong autodiff gradient wherever a weight was 0
    from theory.numerics import times_power_of_two

    np.testing.assert_allclose(
        jax.grad(lambda x: times_power_of_two(x, -3).sum())(jnp.zeros(2)), 0.125
    )
    W = jnp.array([[1.0, 0.0], [0.0, 2.0]])  # max |W| = 2: scaled by 2^-1
    X, y = jnp.array([[1.0, 1.0], [1.0, -1.0]]), jnp.array([0.5, 0.0])
    written = D.sample_loss_gradient(D.MeanFieldNet(W), (X, y))
    autodiff = jax.grad(lambda W: D.sample_loss(D.MeanFieldNet(W), (X, y)))(W)
    np.testing.assert_allclose(autodiff, written, rtol=1e-14, atol=1e-15)
