import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from bench import run_module, run_quick

from dynamics import (
    MeanFieldNet,
    MultiIndexTarget,
    mean_field_init,
    population_distance,
    population_loss,
    sample_loss,
    standard_target,
    symmetrize,
)
from integrators import mean_field_flow
from theory import (
    ACTIVATIONS,
    activation,
    hermite_coefficients,
    hermite_energies,
    mass_ode,
    second_moment,
)


def test_hermite_coefficients_against_closed_forms_and_quadrature():
    c = hermite_coefficients("abs", 6)
    expected = [math.sqrt(2 / math.pi), 0, 1 / math.sqrt(math.pi), 0]
    expected += [
        -math.sqrt(2 / math.pi) / math.sqrt(24),
        0,
        3 * math.sqrt(2 / math.pi) / math.sqrt(720),
    ]
    np.testing.assert_allclose(c, expected, atol=1e-15)
    np.testing.assert_allclose(hermite_coefficients("relu", 6), 0.5 * c, atol=1e-15)
    # an independent check of every activation: Monte Carlo-free, by a fine Riemann sum
    z = np.linspace(-12, 12, 400_001)
    phi = np.exp(-z * z / 2) / math.sqrt(2 * math.pi) * (z[1] - z[0])
    he = [np.ones_like(z), z, (z**2 - 1) / math.sqrt(2), (z**4 - 6 * z**2 + 3) / math.sqrt(24)]
    for name in ACTIVATIONS:
        f = np.asarray(activation(name)(jnp.asarray(z)))
        ours = hermite_coefficients(name, 4)
        for k in (0, 1, 2):
            np.testing.assert_allclose(ours[k], np.sum(phi * f * he[k]), atol=1e-8)
        np.testing.assert_allclose(ours[4], np.sum(phi * f * he[3]), atol=1e-8)
        np.testing.assert_allclose(second_moment(name), np.sum(phi * f * f), rtol=1e-8)
    E = hermite_energies("abs", 20)
    total = 20 * 1.0 + 20 * 19 * (2 / math.pi)  # E f*^2 = r E sigma^2 + r (r-1) c_0^2
    np.testing.assert_allclose(float(E["E0"] + E["E2"] + E["E4_plus"]), total, rtol=1e-12)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_population_loss_against_monte_carlo(name):
    d, r, m = 10, 3, 16
    target = standard_target(r, d, name)
    W = mean_field_init(m, d, key=jax.random.PRNGKey(0)) * 2.0
    X = jax.random.normal(jax.random.PRNGKey(1), (400_000, d))
    r2 = 0.5 * (MeanFieldNet(W, name).predict(X) - target.predict(X)) ** 2
    mc, se = float(jnp.mean(r2)), float(jnp.std(r2)) / math.sqrt(X.shape[0])
    assert abs(float(population_loss(W, target)) - mc) < 4 * se
    np.testing.assert_allclose(sample_loss(W, X, target.predict(X), name, 50_000), mc, rtol=1e-12)


def test_gradients_stay_finite_at_exact_alignment():
    d, r = 8, 3
    target = standard_target(r, d)
    W = mean_field_init(6, d, key=jax.random.PRNGKey(0))
    W = W.at[0].set(2.0 * target.directions[0]).at[1].set(-0.5 * target.directions[1])
    W = W.at[2].set(3.0 * W[3])  # two neurons exactly parallel
    g = jax.grad(population_loss)(W, target)
    assert bool(jnp.all(jnp.isfinite(g)))
    # and it matches a finite difference
    v = jax.random.normal(jax.random.PRNGKey(2), W.shape)
    h = 1e-6
    fd = (population_loss(W + h * v, target) - population_loss(W - h * v, target)) / (2 * h)
    np.testing.assert_allclose(jnp.sum(g * v), fd, rtol=1e-5)


def test_mass_ode_against_the_simulation_over_stage_0():
    d, r, m, lam = 30, 6, 120, 0.5
    target = standard_target(r, d)
    W0 = mean_field_init(m, d, key=jax.random.PRNGKey(3))
    ts = jnp.linspace(0.0, 0.6, 61)
    sol = mean_field_flow(W0, target, ts, weight_decay=lam)
    assert bool(sol.ok)
    c0 = hermite_coefficients("abs", 0)[0]
    pred = mass_ode(ts, sol.alpha[0], c0=c0, r=r, weight_decay=lam)
    # the mass multiplies by ~5 and settles; the degree-2 pull changes it by ~1% meanwhile
    assert float(sol.alpha[-1]) > 4 * float(sol.alpha[0])
    np.testing.assert_allclose(sol.alpha, pred, rtol=0.03)


def test_loss_decomposition_of_the_symmetrized_network():
    d, r, m = 12, 3, 20
    target = standard_target(r, d)
    W = mean_field_init(m, d, key=jax.random.PRNGKey(0))
    W = W.at[:, :r].multiply(3.0).at[0].set(jnp.arange(d) / 5.0)  # far from invariant
    L = float(population_loss(W, target))
    residuals = {}
    for K in (8, 128):
        res = []
        for rep in range(6):
            Ws = symmetrize(W, r, key=jax.random.PRNGKey(rep), num=K)
            res.append(L - float(population_loss(Ws, target) + population_distance(W, Ws, "abs")))
        residuals[K] = (np.mean(res), np.std(res) / np.sqrt(6))
    # the cross term of the Monte Carlo group average vanishes like 1/K
    assert abs(residuals[128][0]) < abs(residuals[8][0]) / 5
    assert abs(residuals[128][0]) < 0.01 * L
    # the symmetrized net is invariant: f~(rho x) = f~(x) for a group element rho
    Ws = symmetrize(W, r, key=jax.random.PRNGKey(9), num=256)
    big = symmetrize(Ws, r, key=jax.random.PRNGKey(10), num=1)
    assert float(population_distance(Ws, big, "abs")) < 0.02 * float(
        population_distance(W, Ws, "abs")
    )


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="r <= d"):
        standard_target(5, 3)
    with pytest.raises(ValueError, match="orthonormal"):
        MultiIndexTarget(jnp.array([[1.0, 0.0], [1.0, 1.0]]))
    with pytest.raises(ValueError, match="activation"):
        standard_target(2, 4, "tanh")
    with pytest.raises(ValueError, match="weight_decay"):
        mean_field_flow(
            jnp.ones((3, 4)), standard_target(2, 4), jnp.linspace(0, 1, 3), weight_decay=-1.0
        )


def test_finite_sample_flow_follows_the_population_flow():
    d, r, m, n = 10, 2, 24, 40_000
    target = standard_target(r, d)
    W0 = mean_field_init(m, d, key=jax.random.PRNGKey(0))
    X = jax.random.normal(jax.random.PRNGKey(1), (n, d))
    ts = jnp.linspace(0.0, 1.0, 11)
    pop = mean_field_flow(W0, target, ts, weight_decay=0.5)
    fin = mean_field_flow(
        W0, target, ts, weight_decay=0.5, samples=(X, target.predict(X)), batch_size=10_000
    )
    assert bool(pop.ok) and bool(fin.ok)
    np.testing.assert_allclose(fin.loss, pop.loss, rtol=0.05)
    np.testing.assert_allclose(fin.alpha, pop.alpha, rtol=0.02)


def test_memory_check_refuses_before_running():
    from integrators import check_memory

    with pytest.raises(MemoryError, match="GiB"):
        check_memory(10**10, 100, 250, 5000)
    assert check_memory(1000, 10, 20, 100) > 0


def test_quick_benchmark_end_to_end(tmp_path):
    out = tmp_path / "mi"
    stdout, res = run_quick("multi_index", out)
    assert "pred. plateau" in stdout
    assert {"d", "r", "m", "activation"} <= res["config"].keys()
    assert {"loss_curve", "mass", "final_loss", "wall_seconds"} <= res.keys()
    for key in ("t", "alpha_measured", "alpha_predicted", "beta1_measured", "beta1_predicted"):
        assert len(res["mass"][key]) == len(res["loss_curve"])
    assert res["final_loss"] < 0.01 * res["loss_curve"][0][1]
    assert [e["order"] for e in res["stages"]] == ["0", "2", ">=4"]
    for name in ("staircase.png", "mass.png"):
        assert (out / name).stat().st_size > 10_000
    bad = run_module("multi_index", "--quick", "--weight-decay", "-1", timeout=120)
    assert bad.returncode == 2 and "weight_decay" in bad.stderr
