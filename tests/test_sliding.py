import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import relu_mlp_problem

from integrators import gradient_flow
from theory import RESULTS


def _zero_linear(out):
    model = eqx.nn.Linear(1, out, use_bias=False, key=jax.random.PRNGKey(0))
    return eqx.tree_at(lambda m: m.weight, model, jnp.zeros((out, 1)))


@pytest.mark.slow  # default-run budget: the capability keeps other default tests
def test_a_kink_pushed_from_both_sides_is_slid_on():
    # d w/dt = -sign(w - 1/2): w reaches the kink at t = 1/2 and stays there (Filippov)
    def loss(m, args):
        return jnp.abs(m.weight[0, 0] - 0.5)

    ts = jnp.linspace(0.0, 2.0, 5)
    sol = gradient_flow(_zero_linear(1), loss, ts)
    assert sol.ok and int(sol.stats["sliding_entries"]) == 1
    np.testing.assert_allclose(sol.loss, [0.5, 0.0, 0.0, 0.0, 0.0], atol=1e-6)
    assert sol.stats["num_steps"] < 200


@pytest.mark.slow  # default-run budget: the regrowth above keeps the capability's default test
def test_max_sliding_caps_the_slots():
    # the same 40 entries with `max_sliding=8`: the ninth to slide ends the solve, t ~ 0.45
    c = 0.05 * jnp.arange(1, 41)

    def loss(m, args):
        return jnp.sum(jnp.abs(m.weight[:, 0] - c))

    cut = gradient_flow(_zero_linear(40), loss, jnp.linspace(0.0, 2.5, 6), max_sliding=8)
    assert cut.result == RESULTS.kink_limited
    assert 0.45 <= float(cut.stats["kink_time"]) < 0.5


@pytest.mark.slow
def test_a_sliding_relu_mlp_against_gradient_descent_extrapolated_to_step_0():
    # a ReLU MLP with biases whose flow slides on two entries (plain Tsit5 at tol 1e-9 runs
    # out of 100,000 steps there): against GD at lr 2e-4 and 1e-4, extrapolated
    mlp, loss, (X, y) = relu_mlp_problem(16, 8, bias=True)
    ts = np.linspace(0.0, 3.0, 31)
    sol = gradient_flow(mlp, loss, jnp.asarray(ts), args=(X, y), rtol=1e-9, atol=1e-9)
    assert sol.ok and int(sol.stats["sliding_entries"]) >= 1
    params, static = eqx.partition(mlp, eqx.is_inexact_array)

    def gd(lr):
        def body(p, _):
            g = jax.grad(lambda q: loss(eqx.combine(q, static), (X, y)))(p)
            return jax.tree_util.tree_map(lambda a, b: a - lr * b, p, g), loss(
                eqx.combine(p, static), (X, y)
            )

        steps = np.rint(ts / lr).astype(int)
        _, losses = jax.lax.scan(body, params, None, length=int(steps[-1]) + 1)
        return np.asarray(losses)[steps]

    reference = 2 * gd(1e-4) - gd(2e-4)
    np.testing.assert_allclose(sol.loss, reference, rtol=2e-5)


@pytest.mark.slow  # default-run budget (10 s)
def test_a_kink_that_turns_repelling_is_left_as_gradient_descent_leaves_it():
    """L = v |u| + (v + 1)^2 / 2 from (u, v) = (0.1, 3): u reaches its kink at t1 and slides
    while v > 0; at t0 = t1 + log(v(t1) + 1), v = 0 and the kink turns repelling (a held
    entry there is a Filippov solution, not gradient descent's limit). The flow must leave
    it then, as the smooth solution from (0, 0) at t0 does (scipy, rtol 1e-12)."""
    from scipy.integrate import solve_ivp

    class Pair(eqx.Module):
        u: jax.Array
        v: jax.Array

    def loss(p, args):
        return jnp.sum(p.v * jnp.abs(p.u)) + 0.5 * jnp.sum((p.v + 1.0) ** 2)

    ts = jnp.linspace(0.0, 3.0, 31)
    sol = gradient_flow(Pair(jnp.array([0.1]), jnp.array([3.0])), loss, ts, rtol=1e-10,
                        atol=1e-10)  # fmt: skip
    assert sol.ok and int(sol.stats["sliding_entries"]) >= 1

    def reaches(t, w):
        return w[0]

    reaches.terminal = True
    before = solve_ivp(lambda t, w: [-w[1], -(w[0] + w[1] + 1.0)], (0.0, 3.0), [0.1, 3.0],
                       events=reaches, rtol=1e-12, atol=1e-12)  # fmt: skip
    t1, v1 = before.t_events[0][0], before.y_events[0][0][1]
    t0 = t1 + np.log(v1 + 1.0)
    side = float(np.sign(sol.model.u[0]))  # either side is gradient descent's limit
    after = solve_ivp(lambda t, w: [-w[1] * side, -(abs(w[0]) + w[1] + 1.0)], (t0, 3.0),
                      [0.0, 0.0], dense_output=True, rtol=1e-12, atol=1e-14)  # fmt: skip
    late = np.asarray(ts) > t0 + 0.2
    u, v = after.sol(np.asarray(ts)[late])
    expected = v * np.abs(u) + 0.5 * (v + 1.0) ** 2
    np.testing.assert_allclose(np.asarray(sol.loss)[late], expected, rtol=1e-7)
    assert abs(float(sol.model.u[0])) > 0.9  # it left: held, u would stay at 0


@pytest.mark.slow  # the default test is test_kinks' tie test
def test_a_relu_sliding_inside_a_max_pool_against_the_closed_form():
    # L = 2 max_j relu(a + b + c_j) - a + (b - 1)^2 / 2, c = (0, -5, -3): the pool is relu(a + b)
    # wherever it matters, so h = a + b reaches its kink at t1 (-0.7 - t1 + 1.5 e^-t1 = 0) and
    # slides there with lambda = (2 - b) / 4: b = b1 e^(-(t - t1) / 2), a = -b. The pool's
    # clamped entries tie at 0 with the sliding one; taking the second by convention cut its
    # gradient, and the flow ended ok with a = 2.84 for -0.0032
    class Pair(eqx.Module):
        a: jax.Array
        b: jax.Array

    def loss(p, args):
        h = p.a + p.b + jnp.array([0.0, -5.0, -3.0])
        return 2.0 * jnp.max(jax.nn.relu(h)) - p.a + 0.5 * (p.b - 1.0) ** 2

    ts = jnp.linspace(0.0, 6.0, 13)
    sol = gradient_flow(Pair(jnp.array(0.3), jnp.array(0.5)), loss, ts, rtol=1e-10,
                        atol=1e-10, save_trajectory=True)  # fmt: skip
    t1 = 0.35342158728762746  # brentq on -0.7 - t + 1.5 e^-t
    b1 = -1.0 + 1.5 * np.exp(-t1)
    later = np.asarray(ts) > t1
    b = b1 * np.exp(-(np.asarray(ts)[later] - t1) / 2.0)
    assert sol.ok and int(sol.stats["sliding_entries"]) == 1
    np.testing.assert_allclose(np.asarray(sol.trajectory.b)[later], b, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(np.asarray(sol.trajectory.a)[later], -b, rtol=1e-7, atol=1e-9)


def test_the_sliding_solve_is_least_squares_where_rows_are_dependent():
    # two sliding relus tied in a pool make the pool's row a combination of theirs: the
    # normal equations' A^T A + eps^2 I (eps = 1e-10 max|A|) rounds to a singular matrix and
    # gave lambda ~ 1e19; the QR of [A; eps I] gives the least-norm solution
    from integrators._filippov import ridge_solve
    from theory.numerics import lu_solve

    rng = np.random.default_rng(0)
    A = rng.normal(size=(8, 8))
    A[1] = 0.7 * A[0] + 0.3 * A[2]
    B = A @ rng.normal(size=(8, 3))  # consistent, as the sliding residual is
    eps = 1e-10 * np.abs(A).max()
    X = np.asarray(ridge_solve(jnp.asarray(A), eps, jnp.asarray(B)))
    least_norm = np.linalg.lstsq(A, B, rcond=1e-12)[0]
    np.testing.assert_allclose(X, least_norm, rtol=0, atol=1e-10 * np.abs(least_norm).max())
    normal = lu_solve(jnp.asarray(A.T @ A + eps**2 * np.eye(8)), jnp.asarray(A.T @ B))
    assert np.abs(np.asarray(normal) - least_norm).max() > 1e-3  # what the former solve gave
