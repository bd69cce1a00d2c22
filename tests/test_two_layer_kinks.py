"""The kink events of `two_layer_flow`: the event-time locator and its condition, and the
Filippov sliding weights (the per-event inverses, their rank-one updates, the fallbacks)."""

import os
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics import correlated_data


def _correlated(n, c, seed=0):
    return correlated_data(n, c, key=jax.random.PRNGKey(seed + 10), dtype=jnp.float64)


def _frame(G, mode, factor=None):
    """A frame for the sliding weights alone (labels, time scale and `slow` unused)."""
    from integrators import _two_layer_field as F

    n = G.shape[0]
    return F._Frame(G, jnp.zeros(n), jnp.asarray(1.0), mode, jnp.asarray(1e-10), factor)


def _direct(G, r, row):
    """The sliding entries of one neuron's pattern `row` and their weights by numpy's solve of
    (G (r * s_j))_S = 0: G_SS u_S = -G_SA r_A, sigma = u / r."""
    from integrators import _two_layer_field as F

    Gn, rn, row = np.asarray(G), np.asarray(r), np.asarray(row)
    S, A = row == F.SLIDING, row == F.ACTIVE
    return S, np.linalg.solve(Gn[np.ix_(S, S)], -Gn[np.ix_(S, A)] @ rn[A]) / rn[S]


@pytest.mark.slow  # 8.5 s; the sliding-exit test holds the event condition by default
def test_event_condition_in_units_of_the_start_distance_is_not_flat():
    # an inactive entry resting 1e-12 below its kink held the unscaled condition flat near 0
    # while another entry fell through its kink: regula falsi stalled and the locator
    # bisected. Each entry in units of its distance at the segment's start: the same sign,
    # the same root, a straight line here
    import optimistix as optx

    from integrators import _two_layer_field as F
    from integrators._illinois import _TimeIllinois

    n, m = 4, 2
    G = jnp.eye(n)
    mode = jnp.asarray([[F.ACTIVE, F.INACTIVE, F.ACTIVE, F.INACTIVE]] * m)
    pz0 = jnp.asarray([[0.5, -1.0, 1.0, -1.0], [1.0, -1e-12, 1.0, -1.0]])
    pz1 = pz0.at[0, 0].set(-0.5)  # neuron 0's first entry crosses at t = 0.5

    def state(t):
        pz = pz0 + t * (pz1 - pz0)
        return jnp.zeros(m), jnp.concatenate([jnp.ones((m, 1)), pz], axis=1)

    frame = F._Frame(G, jnp.ones(n), jnp.asarray(1.0), mode, jnp.asarray(1e-10))
    r0 = F._residual(*state(0.0), frame)[1]
    d0 = F._distance(state(0.0), F._Frame(G, jnp.ones(n), frame.tau, mode, frame.slow, None, r0))
    scaled = F._Frame(G, jnp.ones(n), frame.tau, mode, frame.slow, None, r0, d0)
    assert float(F._event_condition(0.0, state(0.0), scaled)) == 1.0
    for t in (0.2, 0.4999, 0.5001, 0.9):
        plain = F._event_condition(t, state(t), frame)
        assert np.sign(F._event_condition(t, state(t), scaled)) == np.sign(plain)

    def locate(frame):
        sol = optx.root_find(
            lambda t, _: F._event_condition(t, state(t), frame),
            _TimeIllinois(rtol=1e-13, atol=1e-13), jnp.asarray(1.0),
            options=dict(lower=0.0, upper=1.0), throw=False,
        )  # fmt: skip
        return float(sol.value), int(sol.stats["num_steps"])

    (t_plain, steps_plain), (t_scaled, steps_scaled) = locate(frame), locate(scaled)
    assert 0.0 <= t_plain - 0.5 < 1e-12 and 0.0 <= t_scaled - 0.5 < 1e-12
    assert steps_scaled <= 4 and steps_plain > 3 * steps_scaled, (steps_scaled, steps_plain)


_TWO_DEVICES = """
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from integrators._two_layer_field import _weights_solve
def f(key):  # the sliding-weight solve of m = 2 neurons over n = 65 samples, in a loop
    M = jax.random.normal(key, (2, 65, 65)) + 9.0 * jnp.eye(65)
    body = lambda i, x: _weights_solve(M + 1e-3 * i * jnp.eye(65), jnp.ones((2, 65)) + 0 * x)
    return M, jax.lax.fori_loop(0, 50, body, jnp.zeros((2, 65)))
M, x = jax.block_until_ready(jax.pmap(f)(jax.random.split(jax.random.PRNGKey(0), 2)))
M = np.asarray(M) + 49e-3 * np.eye(65)
print(np.max(np.abs(np.asarray(x) - np.linalg.solve(M, np.ones((2, 2, 65, 1)))[..., 0])))
"""


@pytest.mark.slow  # a subprocess with two host devices (about 4 s)
def test_the_sliding_solve_does_not_hang_a_sweep_on_two_host_devices():
    # with jnp.linalg.solve (jaxlib 0.10's LAPACK splits a batch this size over the thread
    # pool and blocks) this program hung for good on two host devices
    env = dict(
        os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu"
    )
    proc = subprocess.run(
        [sys.executable, "-c", _TWO_DEVICES], capture_output=True, text=True, timeout=120,
        env=env, cwd=Path(__file__).parents[1],
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout) < 1e-12


def test_a_sliding_exit_through_the_weights_pole_is_not_stepped_over():
    # sigma = u / r has a pole where the sliding sample's residual crosses 0: the weight can
    # leave [0, 1] and come back within one step. In a segment (`r0`, the residual at its
    # start) the distance is min(sigma q, (1 - sigma) q), q = r / r0: negative once r flipped
    from integrators import _two_layer_field as F

    g = 0.5
    G = jnp.asarray([[1.0, g], [g, 1.0]])
    mode = jnp.asarray([[F.ACTIVE, F.SLIDING]])  # one neuron: sigma = -g r_0 / r_1
    state = (jnp.zeros(1), jnp.asarray([[1.0, 0.5, 0.0]]))
    f = F._residual(*state, F._Frame(G, jnp.zeros(2), jnp.asarray(1.0), mode, 1e-10))[1]

    def distance(r, r0=None):
        frame = F._Frame(G, f - r, jnp.asarray(1.0), mode, jnp.asarray(1e-10), None, r0)
        return np.asarray(F._distance(state, frame))[0, 1]

    start, flipped = jnp.asarray([-1.0, 1.0]), jnp.asarray([1.0, -1.0])
    assert distance(start) == distance(start, start) == 0.5  # sigma = 0.5 either way
    assert distance(flipped) == 0.5  # back inside [0, 1] past the pole: the old distance
    assert distance(flipped, start) == -0.5  # the segment's: the exit is seen
    # finite and continuous through the pole (r_1 -> 0): sigma q = u / r0_1 = 0.5 here, and
    # (1 - sigma) q = q - 0.5 (sigma itself is +-5e8 at r_1 = +-1e-9)
    near = [distance(jnp.asarray([-1.0, e]), start) for e in (1e-3, 1e-9, -1e-9)]
    np.testing.assert_allclose(near, [-0.499, -0.5, -0.5], rtol=1e-8)


def test_a_factored_gram_gives_the_same_products_and_weights():
    # where d < n / 2 the flow multiplies by G = X X^T through X (2 m n d, not m n^2): the
    # products, the sliding weights and the field agree with the dense G's to rounding
    # (three sliding entries per neuron, fewer than d: each G_SS is invertible)
    from integrators import _two_layer_field as F

    keys = jax.random.split(jax.random.PRNGKey(4), 5)
    n, d, m = 24, 5, 3
    X = jax.random.normal(keys[0], (n, d), jnp.float64)
    G = X @ X.T
    mode = jax.random.randint(keys[1], (m, n), 0, 2)
    sliding = jax.vmap(lambda k: jax.random.permutation(k, n)[:3])(jax.random.split(keys[4], m))
    mode = mode.at[jnp.arange(m)[:, None], sliding].set(2)
    psi = jax.random.normal(keys[2], (m, n + 1), jnp.float64)
    state = (jnp.zeros(m), psi.at[:, 1:].set(jnp.where(mode == 2, 0.0, psi[:, 1:])))
    y = jax.random.normal(keys[3], (n,), jnp.float64)
    dense = F._Frame(G, y, jnp.asarray(2.0), mode, jnp.asarray(1e-10))
    factored = F._Frame(G, y, jnp.asarray(2.0), mode, jnp.asarray(1e-10), F=X)
    v = psi[:, 1:]
    np.testing.assert_allclose(F._times_gram(v, factored), v @ G, rtol=1e-12, atol=1e-12)
    r = F._residual(*state, dense)[1]
    # compiled (op by op, the sliding solves' loops took 13 s of the default tests)
    weights, field = eqx.filter_jit(F._sliding_weights), eqx.filter_jit(F._vector_field)
    sigma = weights(r, factored)
    assert np.all(np.isfinite(sigma)) and np.count_nonzero(sigma) == 3 * m
    np.testing.assert_allclose(sigma, weights(r, dense), rtol=1e-9, atol=1e-12)
    for a, b in zip(field(0.0, state, factored), field(0.0, state, dense), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
