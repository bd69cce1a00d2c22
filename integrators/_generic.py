"""The gradient flow of any Equinox model under any loss (`gradient_flow`).

    d theta/dt = -tau grad_theta loss(model(theta), args),

where theta are the model's inexact arrays (weights, biases; everything else in the module is
static) and tau the time scale (tau = log(1/alpha) for the saddle-to-saddle clock, 1 for
ordinary time). Integrated with diffrax in the model's own coordinates: any explicit solver,
or an implicit one (`diffrax.Kvaerno5()`, whose Newton iterations solve with lineax; give it
`root_finder=optimistix.Newton(rtol, atol, linear_solver=lineax.GMRES(...))` for a
matrix-free solve on Jacobian-vector products when the dense Jacobian, (number of
parameters)^2, is too large; tested on a tanh MLP. diffrax 0.7.2's `VeryChord` with GMRES
raises a TypeError: it stop-gradients a linear state that holds the operator's closure).

**Per-unit log scale (`units=`).** Plain tolerances are absolute and relative to the whole
parameter vector, so at tiny initialization (alpha far below atol) the small neurons are
integrated with no relative accuracy. With `units` (an integer label per parameter entry,
e.g. `neuron_units(model)`: (a_j, w_j) of a `TwoLayerReLU`, a neuron's incoming weights and
bias in an `eqx.nn.MLP`), every
unit u is integrated as theta_u = exp(kappa_u) psi_u with the gauge

    d kappa_u/dt = -tau <psi_u, e^(-kappa_u) g_u> / ||psi_u||^2,
    d psi_u/dt = -tau e^(-kappa_u) g_u - psi_u d kappa_u/dt,

(g = grad_theta loss), which keeps ||psi_u|| = 1: each unit's tolerance is relative to its
own size, whatever alpha is (down to alpha ~ 1e-150, where theta_u itself underflows
float64). Entries labelled -1 are integrated plainly. This is the generalization of the
per-neuron log scale of `orthogonal_flow`.

**Kinks.** A ReLU net's flow is a differential inclusion that can slide along a kink, where
an adaptive explicit solver collapses its step; this generic flow has no kink method (a
sliding solve ends with `max_steps_reached`). For the two-layer ReLU net
`two_layer_flow` locates kinks by events and slides on them (Filippov), on any inputs.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from dynamics import TwoLayerReLU
from theory import RESULTS, Solution, diffrax_stats
from theory.checks import (
    check_positive,
    check_solver_options,
    check_time_grid,
    check_time_scale,
    check_value,
)

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
    - `log_scale` (T, U): kappa_u, each unit's log size, with `units=`; else `None`.

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
    log_scale: Float[Array, "T U"] | None


def neuron_units(model) -> eqx.Module:
    """Unit labels for `gradient_flow(..., units=)`: one unit per neuron.

    - `dynamics.TwoLayerReLU`: neuron j is (a_j, w_j).
    - `eqx.nn.MLP`: every neuron of every layer is its row of the layer's weight and its
      bias (its incoming parameters), numbered layer by layer.

    Returns a pytree shaped like the model's inexact arrays, holding integer labels.

    >>> from dynamics import TwoLayerReLU
    >>> units = neuron_units(TwoLayerReLU(jnp.ones(2), jnp.ones((2, 3))))
    >>> units.a.tolist(), units.W.tolist()
    ([0, 1], [[0, 0, 0], [1, 1, 1]])
    """
    if isinstance(model, TwoLayerReLU):
        m, d = model.W.shape
        j = jnp.arange(m)
        return eqx.tree_at(lambda t: (t.a, t.W), model, (j, jnp.broadcast_to(j[:, None], (m, d))))
    if isinstance(model, eqx.nn.MLP):
        start, layers = 0, []
        for layer in model.layers:
            out = layer.weight.shape[0]
            j = jnp.arange(start, start + out)
            weight = jnp.broadcast_to(j[:, None], layer.weight.shape)
            bias = None if layer.bias is None else j.reshape(layer.bias.shape)
            layers.append(
                eqx.tree_at(
                    lambda lay: (lay.weight, lay.bias),
                    layer,
                    (weight, bias),
                    is_leaf=lambda x: x is None,
                )
            )
            start += out
        params = eqx.filter(model, eqx.is_inexact_array)
        return eqx.tree_at(lambda mlp: mlp.layers, params, tuple(layers))
    raise ValueError(
        f"`model` must be a TwoLayerReLU or an eqx.nn.MLP for neuron_units, got "
        f"{type(model).__name__}: pass `units` as integer labels shaped like its arrays"
    )


def _unit_labels(units, params):
    """Flatten `units` against `params`: one integer array per parameter leaf."""
    leaves, treedef = jax.tree_util.tree_flatten(params)
    try:
        labels = treedef.flatten_up_to(units)
    except (ValueError, TypeError) as error:
        raise ValueError(
            "`units` must have the structure of the model's inexact arrays "
            f"(one integer array per weight), got a mismatch: {error}"
        ) from None
    out = []
    for leaf, label in zip(leaves, labels, strict=True):
        if isinstance(label, jax.core.Tracer):
            raise ValueError(
                "`units` must be concrete labels (they fix the number of units), got a traced "
                "value: close over them instead of passing them through jit or vmap"
            )
        label = np.asarray(label)
        if label.shape != leaf.shape or not jnp.issubdtype(label.dtype, jnp.integer):
            raise ValueError(
                f"`units` entries must be integer arrays shaped like the weights, got "
                f"{label.dtype}{tuple(label.shape)} for a weight of shape {tuple(leaf.shape)}"
            )
        out.append(label)
    count = max(int(np.max(label, initial=-1)) for label in out) + 1
    low = min(int(np.min(label, initial=0)) for label in out)
    if low < -1 or count == 0:
        raise ValueError(
            "`units` labels must be -1 (no unit) or 0, 1, ... with at least one unit, got "
            f"labels from {low} to {count - 1}"
        )
    return out, count


def _unit_sum(labels, leaves, count):
    """sum over each unit's entries of `leaves` (entries labelled -1 dropped)."""
    total = 0.0
    for lab, x in zip(labels, leaves, strict=True):
        total = total + jax.ops.segment_sum(
            jnp.where(lab >= 0, x, 0.0).ravel(), jnp.maximum(lab, 0).ravel(), count
        )
    return total


def _to_log_scale(params, labels, count, dtype):
    """(kappa, psi): kappa_u = log ||theta_u|| without underflow, psi = theta / e^kappa."""
    leaves = jax.tree_util.tree_leaves(params)
    top = 0.0
    for lab, x in zip(labels, leaves, strict=True):
        top = jnp.maximum(
            top,
            jax.ops.segment_max(
                jnp.where(lab >= 0, jnp.abs(x), 0.0).ravel(), jnp.maximum(lab, 0).ravel(), count
            ),
        )
    top = jnp.where(top > 0, top, 1.0)
    scaled = [(x / top[jnp.maximum(lab, 0)]) ** 2 for lab, x in zip(labels, leaves, strict=True)]
    norm2 = _unit_sum(labels, scaled, count)
    kappa = jnp.asarray(jnp.log(top) + 0.5 * jnp.log(jnp.where(norm2 > 0, norm2, 1.0)), dtype)
    psi = [
        jnp.where(lab >= 0, x * jnp.exp(-kappa[jnp.maximum(lab, 0)]), x)
        for lab, x in zip(labels, leaves, strict=True)
    ]
    return kappa, jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(params), psi)


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
    units=None,
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
    - `units`: integer unit labels shaped like the model's arrays (`neuron_units(model)`;
      -1 for none): integrate each unit on its own log scale (module docstring); the
      solution's `log_scale` (T, U) holds kappa_u.
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

    treedef = jax.tree_util.tree_structure(params)
    if units is None:
        y0 = params

        def to_params(y):
            return y

        def field(t, y, args):
            return jax.tree_util.tree_map(lambda g: -tau * g, value_and_grad(y, args)[1])

    else:
        labels, count = _unit_labels(units, params)
        y0 = _to_log_scale(params, labels, count, dtype)
        # a unit that is zero at the start has no scale to follow (its kappa would run off
        # like log t): label it -1 instead
        sizes = _unit_sum(labels, [x * x for x in jax.tree_util.tree_leaves(params)], count)
        used = np.zeros(count, bool)
        for lab in labels:
            used[lab[lab >= 0]] = True
        y0 = (
            check_value(
                y0[0],
                (sizes > 0) | ~jnp.asarray(used),
                "every unit of `units` must be nonzero at the start (label a zero unit -1), "
                "got a unit with all its weights 0",
            ),
            y0[1],
        )

        def to_params(y):
            kappa, psi = y
            leaves = [
                jnp.where(lab >= 0, jnp.exp(kappa[jnp.maximum(lab, 0)]), 1.0) * x
                for lab, x in zip(labels, jax.tree_util.tree_leaves(psi), strict=True)
            ]
            return jax.tree_util.tree_unflatten(treedef, leaves)

        def field(t, y, args):
            kappa, psi = y
            grads = jax.tree_util.tree_leaves(value_and_grad(to_params(y), args)[1])
            psis = jax.tree_util.tree_leaves(psi)
            scaled = [
                jnp.where(lab >= 0, jnp.exp(-kappa[jnp.maximum(lab, 0)]), 1.0) * g
                for lab, g in zip(labels, grads, strict=True)
            ]
            dot = _unit_sum(labels, [x * g for x, g in zip(psis, scaled, strict=True)], count)
            norm2 = _unit_sum(labels, [x * x for x in psis], count)
            dkappa = -tau * dot / jnp.where(norm2 > 0, norm2, 1.0)
            dpsi = [
                -tau * g - jnp.where(lab >= 0, dkappa[jnp.maximum(lab, 0)], 0.0) * x
                for lab, x, g in zip(labels, psis, scaled, strict=True)
            ]
            return dkappa, jax.tree_util.tree_unflatten(treedef, dpsi)

    def save(t, y, args):
        p = to_params(y)
        value, grad = value_and_grad(p, args)
        out = (value, _tree_norm(grad), y[0] if units is not None else None)
        if observables is not None:
            out = out + (observables(t, eqx.combine(p, static), args),)
        return out + ((p,) if save_model else ())

    event = None
    if steady_state is not None:
        tol = check_positive("steady_state", steady_state, scalar=True)

        def steady(t, y, args, **kwargs):
            return _tree_norm(value_and_grad(to_params(y), args)[1]) < tol

        event = diffrax.Event(steady)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field),
        diffrax.Tsit5() if solver is None else solver,
        t0=ts[0],
        t1=ts[-1],
        dt0=None,
        y0=y0,
        args=args,
        saveat=diffrax.SaveAt(subs=[diffrax.SubSaveAt(ts=ts, fn=save), diffrax.SubSaveAt(t1=True)]),
        stepsize_controller=(
            default_controller(rtol, atol) if stepsize_controller is None else stepsize_controller
        ),
        event=event,
        max_steps=max_steps,
        throw=False,
    )
    saved, y_final = sol.ys
    y_final = jax.tree_util.tree_map(lambda x: x[-1], y_final)
    final = to_params(y_final)
    t_stop = sol.ts[1][-1]
    stopped = jnp.asarray(False)
    result = RESULTS.promote(sol.result)
    if event is not None:
        stopped = sol.event_mask if isinstance(sol.event_mask, jax.Array) else jnp.asarray(True)
        stopped = jnp.any(jnp.asarray(stopped)) & (t_stop < ts[-1])
        result = RESULTS.where(stopped, RESULTS.successful, result)
        # after a steady state every later save time holds the steady state's values
        at_stop = save(t_stop, y_final, args)
        later = ts >= t_stop

        def fill(x, v):
            mask = later.reshape(later.shape + (1,) * (x.ndim - 1))
            return jnp.where(stopped & mask, v[None], x)

        saved = jax.tree_util.tree_map(fill, saved, at_stop)
    return GradientFlowSolution(
        ts=ts,
        loss=saved[0],
        grad_norm=saved[1],
        observables=saved[3] if observables is not None else None,
        log_scale=saved[2],
        model=eqx.combine(final, static),
        trajectory=(eqx.combine(saved[-1], static) if save_model else None),
        steady_time=jnp.where(stopped, t_stop, jnp.inf),
        time_scale=tau,
        result=result,
        stats=diffrax_stats(sol),
    ).raise_if_failed(throw)
