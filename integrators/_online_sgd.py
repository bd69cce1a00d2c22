"""Online SGD of a two-layer student on a two-layer teacher: the simulation that
`theory.online_sgd_ode` describes as d -> infinity."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from dynamics import TwoLayerNet, order_parameters
from theory import ONLINE_EXACT, RESULTS, AbstractSolution, OrderParameters, generalization_error
from theory.checks import (
    check_key,
    check_positive,
    check_positive_int,
    check_time_grid,
    check_value,
)

_BLOCK = 32  # steps whose samples are drawn at once


class OnlineSGDSolution(AbstractSolution):
    """Result of `online_sgd`: the order parameters `state` at the times `ts` (leading time
    axis), the exact generalization error `eg` of the network there (from its order
    parameters: the inputs are Gaussian), the trained `model`, the number of samples seen
    `steps` at each save, `result` (`RESULTS.diverged` where the weights became non-finite)
    and `stats`."""

    ts: Float[Array, " T"]
    steps: Array
    state: OrderParameters
    eg: Float[Array, " T"]
    model: TwoLayerNet
    result: RESULTS
    stats: dict


def online_sgd(
    model: TwoLayerNet,
    teacher: TwoLayerNet,
    ts: Float[Array, " T"],
    *,
    key,
    lr,
    lr_second=0.0,
    noise=0.0,
    nodes: int = 12,
    throw: bool = False,
) -> OnlineSGDSolution:
    """Online SGD, one fresh sample per step (`theory.online_sgd_ode`'s module docstring):
    x ~ N(0, I_d), y = teacher(x) + noise zeta, and

        W <- W - (lr / d) (a * g'(W x)) Delta x^T,   a <- a - (lr_second / d) g(W x) Delta,

    with Delta = model(x) - y, saved at the times `ts` (t = steps / d: the save at t comes
    after round(t d) samples; they are drawn 32 at a time). The teacher and the student share one activation without
    biases ("erf", "relu", "linear", or any other the ODEs take). Pure and jit-able: `vmap`
    over keys (or `integrators.sweep`) for seeds. One step costs O(K d).

    **Arguments:** `model`, `teacher` (`dynamics.TwoLayerNet`s without biases, same input
    dimension d and activation); `ts`; `key` (a PRNG key: the samples); `lr`, `lr_second`,
    `noise` as in `theory.online_sgd_ode`; `nodes` for `eg` of a callable activation.

    **Returns:** an `OnlineSGDSolution`.

    **Raises:** `ValueError` on mismatched nets, biases, a bad key, rates or time grid.

    >>> jax.config.update("jax_enable_x64", True)
    >>> key = jax.random.PRNGKey(0)
    >>> teacher = TwoLayerNet(jax.random.normal(key, (2, 100)) / 10, jnp.ones(2), activation="erf")
    >>> student = TwoLayerNet(jnp.zeros((2, 100)) + 1e-3, jnp.ones(2), activation="erf")
    >>> sol = online_sgd(student, teacher, jnp.array([0.0, 1.0]), key=key, lr=0.5)
    >>> sol.steps.tolist(), bool(sol.ok)
    ([0, 100], True)
    """  # noqa: E501
    start = order_parameters(model, teacher)  # checks both nets and their match
    if model.b is not None or teacher.b is not None:
        raise ValueError("`model` and `teacher` must have no biases (`b=None`): the ODEs have none")
    key = check_key(key)
    dtype = start.Q.dtype
    ts = check_time_grid("ts", ts, dtype)
    check_positive("lr", lr, scalar=True)
    check_positive("lr_second", lr_second, allow_zero=True, scalar=True)
    check_positive("noise", noise, allow_zero=True, scalar=True)
    if not model.train_second_layer and float(lr_second) != 0.0:
        raise ValueError(
            "`lr_second` must be 0 for a model with `train_second_layer=False` (its second "
            f"layer is held fixed), got {lr_second!r}"
        )
    # steps are int32: past 2^31 the loop bound wrapped and nothing was trained, marked ok
    most = (2**31 - 1 - _BLOCK) / model.W.shape[1]
    check_value(
        ts,
        ts[-1] <= most,
        f"`ts` must end at most at {most:.6g} (2^31 samples at d = {model.W.shape[1]}), "
        "the step counter's range",
    )
    rates = tuple(jnp.asarray(x, dtype) for x in (lr, lr_second, noise))
    nodes = check_positive_int("nodes", nodes, minimum=4)
    return _run(model, teacher, ts, key, rates, nodes).raise_if_failed(throw)


@eqx.filter_jit
def _run(model, teacher, ts, key, rates, nodes):
    lr, lr_second, noise = rates
    d = model.W.shape[1]
    g = model.sigma
    dg = jax.vmap(jax.grad(g))
    steps = jnp.round(ts * d).astype(jnp.int32)

    def step(params, sample):
        W, a = params
        x, z, live = sample
        y = teacher.a @ g(teacher.W @ x) + noise * z
        u = W @ x
        delta = jnp.where(live, a @ g(u) - y, 0.0)  # past the save: no update
        W = W - (lr / d) * jnp.outer(a * dg(u) * delta, x)
        a = a - (lr_second / d) * g(u) * delta
        return (W, a), None

    def save(params, bounds):
        lo, hi = bounds

        def block(b, params):
            # the samples of steps start .. start + B - 1 in one draw (one RNG call per block)
            start = lo + b * _BLOCK
            kx, kz = jax.random.split(jax.random.fold_in(key, start))
            X = jax.random.normal(kx, (_BLOCK, d), params[0].dtype)
            Z = jax.random.normal(kz, (_BLOCK,), params[0].dtype)
            live = start + jnp.arange(_BLOCK) < hi
            return jax.lax.scan(step, params, (X, Z, live))[0]

        params = jax.lax.fori_loop(0, (hi - lo + _BLOCK - 1) // _BLOCK, block, params)
        return params, params

    lo = jnp.concatenate([jnp.zeros(1, steps.dtype), steps[:-1]])
    (W, a), (Ws, As) = jax.lax.scan(save, (model.W, model.a), jnp.stack([lo, steps], 1))
    final = TwoLayerNet(W, a, None, model.activation, model.train_second_layer)
    finite = jnp.all(jnp.isfinite(W)) & jnp.all(jnp.isfinite(a))
    V, c = teacher.W.astype(W.dtype), teacher.a.astype(W.dtype)
    states = OrderParameters(
        Q=Ws @ jnp.swapaxes(Ws, 1, 2),
        R=Ws @ V.T,
        T=jnp.broadcast_to(V @ V.T, (len(ts),) + (len(c),) * 2),
        a=As,
        c=jnp.broadcast_to(c, (len(ts), len(c))),
    )
    # a diverged run's states are not finite: its eg is inf, never a refused check
    safe = jax.tree_util.tree_map(lambda x: jnp.where(finite, x, 0.0), states)
    eg = jax.vmap(lambda s: generalization_error(s, activation=ode_activation(model),
                                                 nodes=nodes))(safe)  # fmt: skip
    eg = jnp.where(finite, eg, jnp.inf)
    result = RESULTS.where(finite, RESULTS.successful, RESULTS.diverged)
    return OnlineSGDSolution(ts=ts, steps=steps, state=states, eg=eg, model=final, result=result,
                             stats={"num_steps": steps[-1]})  # fmt: skip


def ode_activation(model: TwoLayerNet):
    """The activation as `theory.online_sgd_ode` takes it: a closed-form name, or the
    function (Gauss-Hermite)."""
    return model.activation if model.activation in ONLINE_EXACT else model.sigma
