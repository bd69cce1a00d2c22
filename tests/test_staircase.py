import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics import mean_field_init, standard_target
from integrators import mean_field_flow
from theory import (
    RESULTS,
    hermite_coefficients,
    initial_alignment,
    lotka_volterra,
    mass_equilibrium,
    mass_ode,
    mass_ratio,
    stage_equilibria,
    stage_times,
    tensor_power,
    typical_alignment,
)


@pytest.mark.slow  # default-run budget: the capability keeps other default tests
def test_mass_ode_hand_case_and_against_the_simulation_over_stage_0():
    np.testing.assert_allclose(mass_equilibrium(c0=1.0, r=4, weight_decay=2.0), 3.0)
    # logistic: the midpoint K / 2 from alpha0 = K / (1 + e) is reached at t = 1 / (4 c0^2 K)
    K = 3.0
    t_mid = 1.0 / (4 * K)
    np.testing.assert_allclose(
        mass_ode(K / (1 + np.e), jnp.array(t_mid), c0=1.0, r=4, weight_decay=2.0), K / 2
    )
    d, r, m, lam = 30, 6, 120, 0.5
    target = standard_target(r, d)
    net = mean_field_init(m, d, key=jax.random.PRNGKey(3))
    ts = jnp.linspace(0.0, 0.6, 61)
    sol = mean_field_flow(target, net, ts, weight_decay=lam)
    assert bool(sol.ok)
    c0 = hermite_coefficients("abs", 0)[0]
    pred = mass_ode(sol.alpha[0], ts, c0=c0, r=r, weight_decay=lam)
    # the mass multiplies by ~5 and settles; the degree-2 pull changes it by ~1% meanwhile
    assert float(sol.alpha[-1]) > 4 * float(sol.alpha[0])
    np.testing.assert_allclose(sol.alpha, pred, rtol=0.03)


def test_lotka_volterra_fixed_point_and_paper_form():
    c0, c2, r, d = 0.8, 0.6, 3, 10
    ts = jnp.array([0.0, 200.0])
    beta0 = jnp.array([0.05, 0.05])
    sol = lotka_volterra(beta0, ts, c0=c0, c2=c2, r=r, d=d, weight_decay=0.0)
    assert bool(sol.ok) and sol.ys.shape == (2, 2)
    # lambda = 0: the relevant mass goes to 1 (beta_1 = 1 fits the target's degree 0 and 2),
    # the irrelevant mass to 0
    np.testing.assert_allclose(sol.ys[-1, 0], 1.0, atol=5e-3)
    assert float(sol.ys[-1, 1]) < 1e-2
    # the paper's form keeps the mass where it is (no -2 c_2^2 beta_2 pull) and differs
    paper = lotka_volterra(beta0, ts, c0=c0, c2=c2, r=r, d=d, weight_decay=0.0, corrected=False)
    assert float(paper.ys[-1, 1]) > float(sol.ys[-1, 1])
    assert sol.result == RESULTS.successful and int(sol.stats["num_steps"]) > 0
    np.testing.assert_allclose(mass_ratio(jnp.array([1.0, 0.5]), c0=1.0, c2=1.0, r=1, d=3), 0.5)


@pytest.mark.slow
def test_lotka_volterra_against_the_simulation_in_the_degree_2_stage():
    d, r, m, lam = 20, 4, 200, 0.2
    target = standard_target(r, d)
    net = mean_field_init(m, d, key=jax.random.PRNGKey(1))
    ts = jnp.linspace(0.0, 3.0, 31)
    sim = mean_field_flow(target, net, ts, weight_decay=lam)
    c = hermite_coefficients("abs", 2)
    beta0 = jnp.array([sim.beta1[0], sim.beta2[0]])
    lv = lotka_volterra(beta0, ts, c0=c[0], c2=c[2], r=r, d=d, weight_decay=lam)
    np.testing.assert_allclose(lv.ys[:, 0], sim.beta1, rtol=0.15)


def test_tensor_power_is_monotone_to_its_fixed_point():
    ts = jnp.linspace(0.0, 50.0, 51)
    sol = tensor_power(0.3, ts, activation="abs")
    assert bool(sol.ok)
    p = np.asarray(sol.ys)
    assert np.all(np.diff(p) >= -1e-12) and p[-1] == pytest.approx(1.0, abs=1e-6)
    # hand case: near p = 0 the lowest term dominates, dp/dt ~ 2 * 4 c_4^2 p^2
    c4 = float(hermite_coefficients("abs", 4)[4])
    small = tensor_power(1e-3, jnp.array([0.0, 1e-3]), activation="abs")
    np.testing.assert_allclose((small.ys[1] - 1e-3) / 1e-3, 8 * c4**2 * 1e-6, rtol=0.01)
    with pytest.raises(ValueError, match="activation"):
        tensor_power(0.3, ts, activation="tanh")
    with pytest.raises(ValueError, match="relu_even"):  # the staircase needs even parts
        tensor_power(0.3, ts, activation="relu")


def test_stage_times_order_and_the_throw_convention():
    # 2 log(m) / r = 0.75 < 1 - eps: the tensor-power phase has somewhere to go
    st = stage_times(activation="abs", r=8, d=40, m=20, weight_decay=0.4)
    assert bool(st.ok) and 0 < float(st.t_0) < float(st.t_2) < float(st.t_4) < np.inf
    assert int(st.stats["num_steps"]) > 0
    # the closed-form t_0 against stage 0's logistic: alpha~ is 90% of the way there
    eq = stage_equilibria(activation="abs", r=8, d=40, weight_decay=0.4)
    K = eq.mass[0]
    np.testing.assert_allclose(eq.relax(1.0, st.t_0, 0), 1 + 0.9 * (K - 1))
    # with d -> infinity stage 0 is the degree-0 mass ODE
    c0 = hermite_coefficients("abs", 0)[0]
    eq_inf = stage_equilibria(activation="abs", r=8, d=None, weight_decay=0.4)
    np.testing.assert_allclose(
        eq_inf.mass[0], mass_equilibrium(c0=c0, r=8, weight_decay=0.4), rtol=1e-12
    )
    ts = jnp.array([0.3, 2.0])
    np.testing.assert_allclose(
        eq_inf.relax(1.0, ts, 0), mass_ode(1.0, ts, c0=c0, r=8, weight_decay=0.4), rtol=1e-12
    )
    # the tensor-power stage starts from the initialization's best alignment: none left when
    # every direction is already past 1 - eps (as 2 log(m) / r >= 1 used to force, wrongly, for
    # any start), a longer one from a poorer start
    common = dict(activation="abs", r=8, d=40, m=20, weight_decay=0.4)
    done = stage_times(**common, initial_alignment=jnp.full(8, 0.95))
    poor = stage_times(**common, initial_alignment=jnp.full(8, 0.2))
    assert float(done.t_4) == float(done.t_2) < float(st.t_4) < float(poor.t_4)


def test_typical_alignment_is_the_median_best_alignment():
    # Monte Carlo: m = 64 neurons uniform on S^3, the best squared coordinate along e_1
    rng = np.random.default_rng(0)
    u = rng.standard_normal((4000, 64, 4))
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    best = np.max(u[..., 0] ** 2, axis=1)
    np.testing.assert_allclose(typical_alignment(r=4, m=64), np.median(best), atol=5e-3)
    assert float(typical_alignment(r=4, m=64)) < 1.0 <= 2 * np.log(64) / 4  # the old start
    # initial_alignment projects on the target subspace first
    W = jnp.array([[1.0, 1.0, 10.0], [0.0, 2.0, 0.0]])
    np.testing.assert_allclose(initial_alignment(W, jnp.eye(3)[:2]), [0.5, 1.0])


def test_compare_stages_puts_prediction_and_measurement_side_by_side():
    from theory import compare_stages, stage_equilibria, stage_times

    kw = dict(activation="abs", r=2, d=10, m=8, weight_decay=0.1)
    ts = np.linspace(0.0, 40.0, 401)
    K = float(stage_equilibria(activation="abs", r=2, d=10, weight_decay=0.1).mass[0])
    alpha = K - (K - 1.0) * np.exp(-ts)  # reaches 90% of the way at t = log 10
    q, align = np.exp(-ts / 4), np.minimum(1.0, 0.3 + ts / 20)
    loss = 0.5 * np.exp(-ts / 10)
    cmp = compare_stages(ts, loss, alpha, q, align, **kw)
    st = stage_times(**kw)
    np.testing.assert_allclose(cmp.predicted_time, [st.t_0, st.t_2, st.t_4])
    np.testing.assert_allclose(cmp.measured_time, [2.4, 9.3, 12.1])  # first grid points past
    np.testing.assert_allclose(
        cmp.loss_at_measured_time, 0.5 * np.exp(-cmp.measured_time / 10), rtol=1e-3
    )


def test_mass_ode_backwards_in_time_is_the_logistic_curve():
    # e^-x overflowed backwards (inf - inf: nan at t = -100)
    ts = jnp.array([-100.0, -1.0, -0.1, 0.0, 0.1, 1.0, 10.0])
    K = 3.0
    with np.errstate(over="ignore"):  # e^1200: the curve is 0 there
        expected = K / (1 + (K - 1) * np.exp(-4 * K * np.asarray(ts)))
    got = mass_ode(1.0, ts, c0=1.0, r=4, weight_decay=2.0)
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-300)
    # from above the equilibrium, just after the pole backwards
    t = -0.01
    np.testing.assert_allclose(
        mass_ode(5.0, jnp.array([t]), c0=1.0, r=4, weight_decay=2.0),
        [K / (1 + (K / 5.0 - 1) * np.exp(-4 * K * t))],
        rtol=1e-14,
    )
