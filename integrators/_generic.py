"""The gradient flow of any Equinox model under any loss (`gradient_flow`).

    d theta/dt = -tau grad_theta loss(model(theta), args),

where theta are the model's inexact arrays (weights, biases; everything else in the module is
static) and tau the time scale (tau = log(1/alpha) for the saddle-to-saddle clock, 1 for
ordinary time). Integrated with diffrax in the model's own coordinates: any explicit solver,
or an implicit one (`diffrax.Kvaerno5()`, whose Newton iterations solve with lineax; give it a
`root_finder=diffrax.VeryChord(linear_solver=lineax.GMRES(...))` for a matrix-free solve when
the dense Jacobian, (number of parameters)^2, is too large).

This is the plain flow: tolerances are absolute and relative to the whole parameter vector, so
at tiny initialization (alpha far below atol) the small neurons are integrated with no
relative accuracy, and a ReLU net's flow can slide along a kink. For the two-layer net on
orthonormal data `orthogonal_flow` and `vanishing_flow` give every neuron its own scale.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from theory import RESULTS, Solution, diffrax_stats
from theory.checks import check_positive, check_solver_options, check_time_grid, check_time_scale

from ._flow import default_controller


class GradientFlowSolution(Solution):
    """Result of `gradient_flow`.

    - `ts` (T,): save times; `loss` (T,) and `grad_norm` (T,): loss(model, args) and
      ||grad_theta loss|| there.
    - `observables`: what `observables(t, model, args)` returned, with a leading T axis
      (`None` without it).
    - `model`: the model at `ts[-1]` (or at the steady state); `trajectory`: the model at
      every save time, leading axis T, when `save_model=True`, else `None`.
    - `steady_time`: the time at which ||grad|| fell below `steady_state` (`inf` if never or
      without it); later saved values repeat the steady state's.
    - `time_scale`: tau; `result`, `stats`: diffrax's outcome and step counts.

    >>> model = eqx.nn.Linear(1, 1, key=jax.random.PRNGKey(0))
    >>> loss = lambda m, args: 0.5 * jnp.sum((m(jnp.ones(1)) - 2.0) ** 2)
    >>> sol = gradient_flow(model, loss, jnp.linspace(0.0, 10.0, 3))
    >>> bool(sol.ok), sol.loss.shape, float(sol.loss[-1]) < 1e-6
    (True, (3,), True)
    """

    ts: Float[Array, " T"]
    loss: Float[Array, " T"]
    grad_norm: Float[Array, " T"]
    observables: object
    model: eqx.Module
    trajectory: eqx.Module | None
    steady_time: Float[Array, ""]
    time_scale: Float[Array, ""]


def _tree_norm(tree):
    leaves = jax.tree_util.tree_leaves(tree)
    return jnp.sqrt(sum(jnp.sum(x * x) for x in leaves))


def gradient_flow(
    model: eqx.Module,
    loss,
    ts: Float[Array, " T"],
    *,
    args=None,
    time_scale=1.0,
    observables=None,
    save_model: bool = False,
    steady_state=None,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int = 100_000,
    solver: diffrax.AbstractSolver | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    throw: bool = False,
) -> GradientFlowSolution:
    """Gradient flow d theta/dt = -tau grad_theta loss(model, args) of any Equinox model.

    **Arguments:**

    - `model`: an Equinox module; its inexact arrays (`eqx.is_inexact_array`) are theta, the
      rest (activations, integer fields, Python values) is static.
    - `loss`: `loss(model, args) -> scalar`, differentiable in the model's arrays.
    - `ts` (T,): increasing save times, from t = 0 (the flow starts at `ts[0]`).
    - `args`: passed to `loss` and `observables` (data, labels...).
    - `time_scale`: tau > 0 (e.g. log(1/alpha)).
    - `observables`: optional `fn(t, model, args) -> pytree`, saved at `ts`.
    - `save_model`: save the model at every save time (`trajectory`).
    - `steady_state`: stop once ||grad|| < this (a diffrax event); `None`: run to `ts[-1]`.
    - `rtol`, `atol`, `max_steps`: PI step control (pcoeff 0.4, icoeff 0.3, as the other
      flows) and the step budget; `solver` (default `diffrax.Tsit5()`) and
      `stepsize_controller` replace them. `throw=True` raises where the solve fails.

    **Returns:** a `GradientFlowSolution`. Pure: `jax.jit` and `jax.vmap` over models (a
    batch of models from `eqx.filter_vmap`) and data work.

    A linear model fitting one point relaxes exponentially, loss(t) = loss(0) e^(-2 k t):

    >>> model = eqx.nn.Linear(2, 1, use_bias=False, key=jax.random.PRNGKey(0))
    >>> x = jnp.array([1.0, 0.0])
    >>> loss = lambda m, y: 0.5 * jnp.sum((m(x) - y) ** 2)
    >>> sol = gradient_flow(model, loss, jnp.array([0.0, 1.0]), args=jnp.array([3.0]))
    >>> round(float(sol.loss[1] / sol.loss[0]), 6), round(float(jnp.exp(-2.0)), 6)
    (0.135335, 0.135335)
    """
    if not isinstance(model, eqx.Module):
        raise ValueError(f"`model` must be an Equinox module, got {type(model).__name__}")
    params, static = eqx.partition(model, eqx.is_inexact_array)
    if not jax.tree_util.tree_leaves(params):
        raise ValueError("`model` has no inexact arrays to train (theta is empty)")
    if not callable(loss):
        raise ValueError(f"`loss` must be callable as loss(model, args), got {loss!r}")
    dtype = jnp.result_type(*jax.tree_util.tree_leaves(params))
    ts = check_time_grid("ts", ts, dtype)
    tau = check_time_scale(time_scale, dtype)
    max_steps = check_solver_options(rtol, atol, max_steps)
    shape = eqx.filter_eval_shape(loss, model, args)
    if not (hasattr(shape, "shape") and shape.shape == ()):
        raise ValueError(f"`loss(model, args)` must return a scalar, got {shape}")

    def value_and_grad(p, args):
        return jax.value_and_grad(lambda q: loss(eqx.combine(q, static), args))(p)

    def field(t, p, args):
        return jax.tree_util.tree_map(lambda g: -tau * g, value_and_grad(p, args)[1])

    def save(t, p, args):
        value, grad = value_and_grad(p, args)
        out = (value, _tree_norm(grad))
        if observables is not None:
            out = out + (observables(t, eqx.combine(p, static), args),)
        return out + ((p,) if save_model else ())

    event = None
    if steady_state is not None:
        tol = check_positive("steady_state", steady_state, scalar=True)

        def steady(t, y, args, **kwargs):
            return _tree_norm(value_and_grad(y, args)[1]) < tol

        event = diffrax.Event(steady)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field),
        diffrax.Tsit5() if solver is None else solver,
        t0=ts[0],
        t1=ts[-1],
        dt0=None,
        y0=params,
        args=args,
        saveat=diffrax.SaveAt(subs=[diffrax.SubSaveAt(ts=ts, fn=save), diffrax.SubSaveAt(t1=True)]),
        stepsize_controller=(
            default_controller(rtol, atol) if stepsize_controller is None else stepsize_controller
        ),
        event=event,
        max_steps=max_steps,
        throw=False,
    )
    saved, final = sol.ys
    final = jax.tree_util.tree_map(lambda x: x[-1], final)
    t_stop = sol.ts[1][-1]
    stopped = jnp.asarray(False)
    result = RESULTS.promote(sol.result)
    if event is not None:
        stopped = sol.event_mask if isinstance(sol.event_mask, jax.Array) else jnp.asarray(True)
        stopped = jnp.any(jnp.asarray(stopped)) & (t_stop < ts[-1])
        result = RESULTS.where(stopped, RESULTS.successful, result)
        # after a steady state every later save time holds the steady state's values
        at_stop = save(t_stop, final, args)
        later = ts >= t_stop

        def fill(x, v):
            mask = later.reshape(later.shape + (1,) * (x.ndim - 1))
            return jnp.where(stopped & mask, v[None], x)

        saved = jax.tree_util.tree_map(fill, saved, at_stop)
    return GradientFlowSolution(
        ts=ts,
        loss=saved[0],
        grad_norm=saved[1],
        observables=saved[2] if observables is not None else None,
        model=eqx.combine(final, static),
        trajectory=(eqx.combine(saved[-1], static) if save_model else None),
        steady_time=jnp.where(stopped, t_stop, jnp.inf),
        time_scale=tau,
        result=result,
        stats=diffrax_stats(sol),
    ).raise_if_failed(throw)
