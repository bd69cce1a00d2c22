import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import P, quadratic_loss as _quadratic, tanh_mlp_problem as _problem  # noqa: E402

from integrators import (
    critical_point,
    escape_saddle,
    gradient_flow,
    hessian_spectrum,
)
from theory import RESULTS


def test_critical_point_finds_saddles_and_minima_and_says_why_it_stops():
    # L = (p0^2 - 1)^2 + p1^2 - p2^2 p3^2 / 10 + p3^2: Newton on grad L from near 0 finds the
    # saddle at 0; "minimum" goes downhill to (+-1, 0, 0, 0)
    def loss(m, a):
        p = m.p
        return (p[0] ** 2 - 1.0) ** 2 + p[1] ** 2 + p[3] ** 2 * (1.0 - 0.1 * p[2] ** 2) + p[2] ** 2

    start = P(jnp.array([0.1, 0.2, -0.1, 0.05]))
    saddle = critical_point(start, loss)
    assert saddle.ok and float(saddle.grad_norm) < 1e-10 and int(saddle.morse_index) == 1
    assert float(saddle.grad_max) <= float(saddle.grad_norm)
    np.testing.assert_allclose(saddle.model.p, 0.0, atol=1e-10)
    minimum = critical_point(start, loss, kind="minimum")
    assert minimum.ok and int(minimum.morse_index) == 0
    np.testing.assert_allclose(jnp.abs(minimum.model.p), [1.0, 0, 0, 0], atol=1e-10)
    # no critical point at all (a linear loss): the trust region shrinks, "stalled"
    lin = critical_point(P(jnp.ones(3)), lambda m, a: jnp.sum(m.p))
    assert lin.result == RESULTS.stalled
    short = critical_point(start, loss, max_steps=1)
    assert short.result == RESULTS.max_steps_reached
    with pytest.raises(ValueError, match="`kind`"):
        critical_point(start, loss, kind="saddle")


@pytest.mark.slow
def test_critical_point_on_a_float32_model_with_float64_enabled():
    mlp, loss, data = _problem()
    mlp32 = jax.tree_util.tree_map(
        lambda x: x.astype(jnp.float32) if eqx.is_inexact_array(x) else x, mlp
    )
    data32 = (data[0].astype(jnp.float32), data[1].astype(jnp.float32))
    cp = critical_point(mlp32, loss, args=data32, kind="minimum")
    assert cp.ok and cp.loss.dtype == jnp.float32 and float(cp.grad_norm) < 1e-5


def test_escape_saddle_then_flow_goes_downhill():
    def loss(m, a):
        return (m.p[0] ** 2 - 1.0) ** 2 + m.p[1] ** 2

    saddle = P(jnp.array([0.0, 0.0]))
    moved, lam = escape_saddle(saddle, loss)
    assert float(lam) == pytest.approx(-4.0) and abs(float(moved.p[0])) == pytest.approx(1e-3)
    sol = gradient_flow(moved, loss, jnp.array([0.0, 10.0]))
    np.testing.assert_allclose(jnp.abs(sol.model.p), [1.0, 0.0], atol=1e-5)
    with pytest.raises(ValueError, match="not a saddle"):
        escape_saddle(P(jnp.array([1.0, 0.0])), loss)
    # a spectrum must be the model's: one from another point, or of another size, is refused
    # (it moved the model along a direction of no meaning there)
    here = hessian_spectrum(saddle, loss, k=1)
    assert float(escape_saddle(saddle, loss, spectrum=here)[1]) == pytest.approx(-4.0)

    def tilted(m, a):
        return loss(m, a) + 0.3 * m.p[0] * m.p[1] ** 2

    elsewhere = hessian_spectrum(P(jnp.array([0.3, 0.5])), tilted, k=1)
    with pytest.raises(ValueError, match="not computed at `model`"):
        escape_saddle(saddle, tilted, spectrum=elsewhere)
    bigger = hessian_spectrum(*_quadratic([-1.0, 1.0, 2.0]), k=1)
    with pytest.raises(ValueError, match="has vectors of 3 parameters"):
        escape_saddle(saddle, loss, spectrum=bigger)


@pytest.mark.slow
def test_critical_point_polishes_flows_to_1e_10():
    # 13 parameters, 6 data: the minima form a manifold (a singular Hessian); MINRES takes
    # the least-squares Newton step
    mlp, loss, data = _problem()
    near = gradient_flow(mlp, loss, jnp.array([0.0, 300.0]), args=data).model
    cp = critical_point(near, loss, args=data)
    assert cp.ok and float(cp.grad_norm) < 1e-10 and int(cp.morse_index) == 0
    assert float(cp.loss) <= float(loss(near, data)) + 1e-12
    assert int(cp.stats["num_steps"]) > 0
    # a 3-5-5-1 tanh MLP (56 parameters, 12 samples) from a flow to t = 5 (the case
    # stopped at ||grad|| = 1.2e-6 with Levenberg-Marquardt)
    X = jax.random.normal(jax.random.PRNGKey(3), (12, 3), jnp.float64)
    y = jnp.tanh(X[:, 0] - X[:, 1])
    mlp = eqx.nn.MLP(3, 1, 5, 2, activation=jnp.tanh, key=jax.random.PRNGKey(4))
    mlp = jax.tree_util.tree_map(
        lambda x: x.astype(jnp.float64) if eqx.is_inexact_array(x) else x, mlp
    )
    near = gradient_flow(mlp, loss, jnp.array([0.0, 5.0]), args=(X, y)).model
    for kind, steps in (("any", 3000), ("minimum", 100)):  # measured: 1,520 and 36 steps
        cp = critical_point(near, loss, args=(X, y), kind=kind, max_steps=steps)
        assert cp.ok and float(cp.grad_norm) < 1e-10, (kind, cp.result, cp.grad_norm)
        assert bool(cp.morse_exact) and int(cp.morse_index) == 0


@pytest.mark.slow
def test_plateau_hessian_unstable_rates_are_algorithm_1s():
    # Near the first saddle (theta ~ 0) neuron j's block of the loss Hessian in (a_j, v_j) is
    # [[0, -s_j y_A^T / n], [-s_j y_A / n, 0]] on its active components A = {v_ji > 0}: its
    # eigenvalues are +-||y_A|| / n, and the other blocks are O(|theta|^2). Once the
    # sign-mismatched components have reached the kink, A is the support S and the unstable
    # eigenvalue is -||D_j^(0)||, Algorithm 1's rate. A mismatched component still alive adds
    # an unstable direction the flow cannot follow (it runs into the kink).
    from dynamics import (
        TwoLayerReLU,
        balanced_init,
        orthogonal_data,
        signs_and_directions,
        square_loss,
    )
    from integrators import orthogonal_flow
    from theory import saddle_jumps

    X, y = orthogonal_data(5, key=jax.random.PRNGKey(0), dtype=jnp.float64)
    model = balanced_init(6, 5, 1e-12, key=jax.random.PRNGKey(1), dtype=jnp.float64)
    signs, D = signs_and_directions(model, X)
    pred = saddle_jumps(y, signs, D)
    t = 0.6 * float(pred.times[0])
    sol = orthogonal_flow(X, y, model, jnp.array([0.0, t]), time_scale=np.log(1e12))
    # in the data basis (v = W X^T, an orthogonal change of variables for d = n: the same
    # spectrum), with the components at the kink set to exactly 0: through W = V X they come
    # back as +-1e-17 of their neuron's size, and relu' of a rounding error is 0 or 1 at random
    V = np.asarray(sol.model.W @ X.T)
    V = np.where(np.abs(V) < 1e-12 * np.linalg.norm(V, axis=1)[:, None], 0.0, V)
    basis = TwoLayerReLU(sol.model.a, jnp.asarray(V))
    eig = np.asarray(
        hessian_spectrum(basis, lambda m, d: square_loss(m, d), args=(jnp.eye(5), y)).eigenvalues
    )
    active = V > 0
    blocks = np.linalg.norm(np.where(active, np.asarray(y)[None, :], 0.0), axis=1) / 5
    np.testing.assert_allclose(np.sort(-eig[eig < -1e-9]), np.sort(blocks[blocks > 0]), rtol=1e-6)
    support = (np.asarray(D) > 0) & (np.asarray(signs)[:, None] * np.asarray(y)[None, :] > 0)
    settled = np.all(active == support, axis=1) & support.any(axis=1)
    assert settled.sum() >= 4
    np.testing.assert_allclose(blocks[settled], np.asarray(pred.rates[0])[settled], rtol=1e-12)


def test_a_loss_without_a_minimum_is_said_to_be_unbounded():
    # was "increase max_steps": the iterate ran to a norm of 1e149
    for loss in (lambda m, a: jnp.sum(m.p), lambda m, a: -jnp.sum(m.p**2)):
        sol = critical_point(P(jnp.array([0.5, 0.2])), loss, kind="minimum")
        assert sol.result == RESULTS.unbounded and not sol.ok
    with pytest.raises(ValueError, match="`model` has no parameters"):
        critical_point(P(jnp.zeros(0)), lambda m, a: jnp.sum(m.p))


@pytest.mark.slow
def test_any_from_a_far_start_says_it_runs_to_infinity():
    # kind="any" from a flow's end short of the minimum (a 6-4-1 tanh net on 10^4 samples,
    # loss 7.4e-4 at T = 200, its minimum at 2.0e-4): Newton on grad L = 0 heads for a
    # critical point at infinity (||x|| 1.3 -> 1.6 over 500 steps, 4.4 over 8,000; ||grad||
    # 1e-4 -> 1.6e-6; the loss creeping up to 8.9e-4). It said "max steps: try increasing
    # max_steps", which would not help; it now says why
    import benchmarks.saddles as S

    student, data = S.problem(6, 4, 1, 8, 10_000, 0)
    flow = gradient_flow(student, S.loss, jnp.array([0.0, 200.0]), args=data)
    cp = critical_point(flow.model, S.loss, args=data, kind="any")
    assert cp.result == RESULTS.runs_to_infinity and not cp.ok
    assert cp.stats["end_norm"] > 1.05 * cp.stats["midway_norm"] > cp.stats["start_norm"]
    # the same start polished to its minimum by kind="minimum"
    assert critical_point(flow.model, S.loss, args=data, kind="minimum").ok


def test_a_short_budget_toward_a_finite_minimum_is_not_called_a_runaway():
    # over 1-4 steps towards the minimum at (10, 10) from (1, 1) ||x|| grows by more than 5%:
    # it said runs_to_infinity ("more steps would not help"); under 50 steps it is not judged
    lam = np.array([1.0, 2.0])

    class Q(eqx.Module):
        p: jax.Array

    def loss(m, args):
        return 0.5 * jnp.sum(lam * (m.p - 10.0) ** 2) + 0.1 * jnp.sum((m.p - 10.0) ** 4)

    for steps in (1, 2, 4):
        cp = critical_point(Q(jnp.ones(2)), loss, kind="minimum", max_steps=steps)
        assert cp.result != RESULTS.runs_to_infinity


@pytest.mark.slow  # 46 s on a loaded machine
def test_a_near_interpolating_net_is_polished_to_1e_10():
    # a 4-36-1 softplus net (217 parameters) on 200 noisy samples, from Adam: the minimum
    # manifold is degenerate (Hessian eigenvalues 1e-13 to 5e2). Steihaug-CG steps reached
    # ||grad|| 2.9e-7 in 2,000 steps; the exact eigen-steps reach 1e-10 (measured: 562)
    import optax

    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    X = jax.random.normal(keys[0], (200, 4), jnp.float64)
    f64 = lambda m: jax.tree_util.tree_map(  # noqa: E731
        lambda x: x.astype(jnp.float64) if eqx.is_inexact_array(x) else x, m
    )
    teacher = f64(eqx.nn.MLP(4, 1, 8, 1, activation=jax.nn.softplus, key=keys[1]))
    y = jax.vmap(teacher)(X)[:, 0] + 0.3 * jax.random.normal(keys[3], (200,), jnp.float64)
    model = f64(eqx.nn.MLP(4, 1, 36, 1, activation=jax.nn.softplus, key=keys[2]))

    def loss(m, data):
        return 0.5 * jnp.mean((jax.vmap(m)(data[0])[:, 0] - data[1]) ** 2)

    params, static = eqx.partition(model, eqx.is_array)
    opt = optax.adam(1e-2)

    def adam(carry, _):
        p, s = carry
        g = jax.grad(lambda p: loss(eqx.combine(p, static), (X, y)))(p)
        u, s = opt.update(g, s)
        return (optax.apply_updates(p, u), s), None

    (params, _), _ = jax.lax.scan(adam, (params, opt.init(params)), None, length=3000)
    cp = critical_point(eqx.combine(params, static), loss, args=(X, y), kind="minimum",
                        max_steps=1000)  # fmt: skip
    assert cp.ok and float(cp.grad_norm) < 1e-10 and int(cp.morse_index) == 0
    assert float(cp.loss) < 1e-20  # it interpolates
