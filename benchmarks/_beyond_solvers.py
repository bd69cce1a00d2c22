"""The second section of `benchmarks.beyond_orthogonal`: the flows side by side on the
issue's cases (steps, wall time with compilation excluded, outcome, loss error against
`two_layer_flow`)."""

import equinox as eqx
import jax
import jax.numpy as jnp

from benchmarks._beyond import HORIZON, inputs
from benchmarks._common import Timer, log
from dynamics import balanced_init, loewdin, signs_and_directions, square_loss
from integrators import gradient_flow, neuron_units, orthogonal_flow, two_layer_flow
from theory import saddle_jumps


def _timed(fn, *args):
    """(fn(*args), wall seconds of a second call of the compiled `fn`: compilation excluded)."""
    fn = eqx.filter_jit(fn)
    jax.block_until_ready(fn(*args))
    t = Timer()
    out = jax.block_until_ready(fn(*args))
    return out, t()


def _mse(model, data):
    X, y = data
    return 0.5 * jnp.mean((jax.vmap(model)(X)[:, 0] - y) ** 2)


def _scaled(model, scale):
    """The model with every inexact array times `scale`, in float64."""
    return jax.tree_util.tree_map(
        lambda x: jnp.asarray(x, jnp.float64) * scale if eqx.is_inexact_array(x) else x, model
    )


def _generic(loss, units, max_steps):
    """The generic flow with its (concrete) unit labels closed over."""
    return lambda model, data, ts, tau: gradient_flow(
        model, loss, ts, args=data, time_scale=tau, units=units, max_steps=max_steps
    )


def solvers(n, width, ps, max_steps) -> list:
    """Steps and wall time of the flows on the issue's cases, side by side: the two-layer net
    on orthonormal and correlated (c = 0.1) inputs at alpha = 10^-p (`two_layer_flow` the
    reference), a one-hidden-layer ReLU MLP with biases at the same scale, and a three-layer
    ReLU MLP from its standard init in ordinary time."""
    kx, ky, kw = jax.random.split(jax.random.PRNGKey(0), 3)
    y = jax.random.normal(ky, (n,), jnp.float64)
    base = balanced_init(width, n + 1, 0.5, key=kw, dtype=jnp.float64)
    rows = []

    def record(case, p, name, sol, wall, ref=None):
        err = None if ref is None else float(jnp.max(jnp.abs(sol.loss - ref.loss)))
        rows.append(
            dict(case=case, log10_inv_alpha=p, flow=name, ok=bool(sol.ok),
                 steps=int(sol.stats["num_steps"]),
                 rejected=int(sol.stats["num_rejected_steps"]),
                 final_loss=float(sol.loss[-1]), wall_seconds=wall, max_loss_error=err)
        )  # fmt: skip
        log(f"  {case:<22} p={p:<3} {name:<20} ok={sol.ok!s:<5} steps={rows[-1]['steps']:>7}"
            f" wall={wall:.2f}s err={err}")  # fmt: skip

    for p in ps:
        tau = p * jnp.log(10.0)
        model = _scaled(base, 2.0 * 10.0**-p)  # |a_j| = ||w_j|| = alpha
        for case, c in (("orthonormal two-layer", 0.0), ("correlated c=0.1", 0.1)):
            # the orthonormal case is X = I exactly: the rounding coupling of a computed
            # orthonormal basis (1e-16, far above alpha = 1e-30) would change the flow that
            # the generic flows integrate (see `orthogonal_flow`)
            X = jnp.eye(n, n + 1) if c == 0.0 else inputs(kx, "correlated", n, n + 1, c)
            pred = saddle_jumps(y, *signs_and_directions(model, loewdin(X)))
            ts = jnp.linspace(0.0, pred.horizon(HORIZON), 200)
            ref, wall = _timed(
                lambda model, X, ts, tau: two_layer_flow(X, y, model, ts, time_scale=tau),
                model, X, ts, tau,
            )  # fmt: skip
            record(case, p, "two_layer_flow", ref, wall)
            if c == 0.0:
                sol, wall = _timed(
                    lambda model, X, ts, tau: orthogonal_flow(
                        X, y, model, ts, time_scale=tau, rtol=1e-8, atol=1e-8),
                    model, X, ts, tau,
                )  # fmt: skip
                record(case, p, "orthogonal_flow", sol, wall, ref)
            for name, units in (("gradient_flow units", neuron_units(model)), ("plain", None)):
                sol, wall = _timed(_generic(square_loss, units, max_steps), model, (X, y), ts, tau)
                record(case, p, name, sol, wall, ref)
        X = inputs(kx, "correlated", n, n + 1, 0.1)
        mlp = _scaled(eqx.nn.MLP(n + 1, 1, width, 1, activation=jax.nn.relu, key=kw), 10.0**-p)
        ts = jnp.linspace(0.0, 40.0, 200)
        for name, units in (("gradient_flow units", neuron_units(mlp)), ("plain", None)):
            sol, wall = _timed(_generic(_mse, units, max_steps), mlp, (X, y), ts, tau)
            record("ReLU MLP with biases", p, name, sol, wall)
    X = inputs(kx, "correlated", n, n + 1, 0.1)
    deep = _scaled(eqx.nn.MLP(n + 1, 1, width, 2, activation=jax.nn.relu, key=kw), 1.0)
    ts = jnp.linspace(0.0, 40.0, 200)
    for name, units in (("gradient_flow units", neuron_units(deep)), ("plain", None)):
        sol, wall = _timed(_generic(_mse, units, max_steps), deep, (X, y), ts, 1.0)
        record("three-layer MLP", 0, name, sol, wall)
    return rows
