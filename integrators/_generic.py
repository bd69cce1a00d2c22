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

**Small initialization.** Tolerances are absolute and relative to the whole parameter
vector, so parameters far below `atol` are integrated with no relative accuracy: a diagonal
linear network at alpha = 1e-10 learns its jumps late and ends with its log-loss off by 0.25,
and nothing in the plain solve can see it. So, without `units=`, a parameter leaf whose
largest entry is nonzero and below atol / sqrt(rtol) makes the solution not ok
(`RESULTS.below_tolerance`, naming `units=`; measured there the log-loss error is 1e-5 at
the defaults). With `units` (integer labels per parameter entry, e.g.
`neuron_units(model)`), each unit is integrated on its own log scale (`integrators._units`),
with a tolerance relative to its own size whatever alpha is.

**Kinks.** A piecewise-linear activation (relu, leaky relu, abs, max/min, a `jnp.where` on a
comparison) makes the field jump where a pre-activation crosses zero, and an adaptive solver
that meets the jump inside a step shrinks it to ~tol / |jump|. With `hold_kinks=True` (the
default) the loss is traced once and every kink site is evaluated on the pattern held at the
step's start (`theory.numerics.HoldArgs` around the solver, `integrators._kinks`), so the field is
smooth inside each step; the error of integrating a crossing as if it were smooth (the
kinked function's area past the switch, sum_k (other_k - held_k) delta_k / 2 with delta_k the
time spent past it) is added to the error estimate by one Jacobian-vector product, and a step
whose dense output dips past a kink at its midpoint and comes back is rejected. A
pre-activation that is pushed into its kink from both sides (a Filippov sliding mode) would
flip its held side at every step: it slides instead, its output blended between the two
branches so that it stays on the kink (`integrators._sliding`; `stats['sliding_entries']`
counts them, `stats['max_sliding']` the most at once, `stats['kink_crossings']` the held
sides changed). The sliding weights are one box complementarity problem (an entry pushed off
its kink is pinned at a bound and leaves), formed on the entries in use at a step's start and
corrected by two chord steps at each field evaluation (`integrators._filippov`). Any number
may slide: the solve starts with 32 slots and, where more want to slide, goes on from there
with 4 times as many (`integrators._capacity`, up to 4096: memory is the bound);
`max_sliding=` fixes the number instead, and more then end the solve with
`RESULTS.kink_limited` at `stats['kink_time']` (as they do under an outer `jax.jit`, where the
stop cannot be looked at). With the default PI controller a rejected step that crossed a kink
is retried to just past it (`theory.numerics.LandingController`).

**Compilation.** The solve is compiled once per shapes and options (`loss`, `observables`,
solver and controller are part of the key, so pass the same function objects): a second
call with new values compiles nothing.
"""

import dataclasses
import warnings

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Float

from theory import RESULTS, AbstractSolution, diffrax_stats, name_nonfinite
from theory.checks import (
    check_flag,
    check_positive,
    check_positive_int,
    check_solver_choice,
    check_solver_options,
    check_time_grid,
    check_time_scale,
    check_value,
)
from theory.numerics import HoldArgs, LandingController, default_controller, diffeqsolve

from ._capacity import FIRST_CAPACITY, capacity_for, regrow
from ._kinks import KinkedFunction
from ._sliding import Held, KinkFlow
from ._stepped import (
    ModelLoss,
    StepOptions,
    choose_method,
    fell_short,
    stepped_solve,
    tree_norm,
    tried_steps,
)
from ._units import LogScale, unit_labels, zero_units


class GradientFlowSolution(AbstractSolution):
    """Result of `gradient_flow`.

    - `ts` (T,): save times; `loss` (T,) and `grad_norm` (T,): loss(model, args) and
      ||grad_theta loss|| there (JAX's gradient: on a kink, one of its one-sided values).
    - `observables`: what `observables(t, model, args)` returned, with a leading T axis
      (`None` without it).
    - `model`: the model at `ts[-1]` (or at the steady state); `trajectory`: the model at
      every save time, leading axis T, when `save_trajectory=True`, else `None`.
    - `steady_time`: the time at which ||grad|| fell below `steady_state` (`inf` if never or
      without it); later saved values repeat the steady state's.
    - `time_scale`: tau; `result`, `stats`: diffrax's outcome and step counts.
    - `log_scale` (T, U): kappa_u, each unit's log size, with `units=`; else `None`.
    - `method`: which solve ran, `"events"` (diffrax, kinks held) or `"steps"` (Euler levels
      extrapolated, `integrators._stepped`; its `stats` hold `num_levels`, `finest_step`,
      `error_estimate`, the scaled gap that made it ok where at most 1, and
      `extrapolation_order`, 2 or 1, the extrapolant returned).

    >>> model = eqx.nn.Linear(1, 1, key=jax.random.PRNGKey(0))
    >>> loss = lambda m, args: 0.5 * jnp.sum((m(jnp.ones(1)) - 2.0) ** 2)
    >>> sol = gradient_flow(model, loss, jnp.linspace(0.0, 10.0, 3))
    >>> bool(sol.ok), sol.loss.shape, float(sol.loss[-1]) < 1e-6
    (True, (3,), True)
    """

    result: RESULTS
    stats: dict
    ts: Float[Array, " T"]
    loss: Float[Array, " T"]
    grad_norm: Float[Array, " T"]
    observables: object
    model: eqx.Module
    trajectory: eqx.Module | None
    steady_time: Float[Array, ""]
    time_scale: Float[Array, ""]
    log_scale: Float[Array, "T U"] | None
    method: str = eqx.field(static=True, default="events")


def gradient_flow(
    model: eqx.Module,
    loss,
    ts: Float[Array, " T"],
    *,
    args=None,
    time_scale=1.0,
    observables=None,
    save_trajectory: bool = False,
    steady_state=None,
    units=None,
    hold_kinks: bool = True,
    max_sliding: int | None = None,
    method: str = "auto",
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
    - `ts` (T,): increasing save times, from t = 0 or later (the flow starts at `ts[0]`).
    - `args`: passed to `loss` and `observables` (data, labels...).
    - `time_scale`: tau > 0 (e.g. log(1/alpha)).
    - `observables`: optional `fn(t, model, args) -> pytree`, saved at `ts`.
    - `save_trajectory`: save the model at every save time (`trajectory`).
    - `steady_state`: stop where ||grad|| falls to this (located by root finding on the
      step's dense output, to the solver's tolerance); with held kinks (and a PID
      controller) ||grad|| is the flow's own speed ||d theta/dt|| / tau, which is 0 where
      the flow rests on a kink (the plain gradient is not), checked at each step's end;
      `None`: run to `ts[-1]`.
    - `units`: integer unit labels shaped like the model's arrays (`neuron_units(model)`;
      -1 for none): integrate each unit on its own log scale (module docstring); the
      solution's `log_scale` (T, U) holds kappa_u. Without it, parameters far below `atol`
      make the solution not ok (`RESULTS.below_tolerance`).
    - `hold_kinks`: hold each step's pattern of the loss's kinks (module docstring); a loss
      without kink sites (max, min, abs, clamp, max-pooling, float comparisons: logsumexp
      has them) is integrated plainly either way. Kinks it cannot hold (`sort`, `top_k`,
      `argmax`, a relu inside `lax.scan`) are evaluated as written, and a warning says so.
    - `max_sliding`: how many kink entries may slide at once (a max_sliding^2 matrix is
      carried); more end the solve as `RESULTS.kink_limited`. `None`: as many as want to,
      in slots grown from 32 (module docstring); `stats['regrown']` counts the growths.
    - `method`: `"events"`, the adaptive diffrax solve above; `"steps"`, explicit Euler
      over the kinks at halved steps, extrapolated to step 0 until the extrapolants agree
      to rtol and atol (`integrators._stepped`: first order through the kinks, so cheap
      at rtol 1e-4 and dear at 1e-8; no `units`, `steady_state`, `solver`,
      `stepsize_controller` or `max_sliding`; `max_steps` caps one level's Euler steps in
      a save interval); `"auto"` (default): `"steps"` where the loss has at least 4096
      kink entries (sites times samples: many crossings), `hold_kinks` is on, rtol is at
      least 1e-5, the state is float64 and concrete (not under `jit`) and none of those
      options is given, else `"events"`; where the steps fall short of the tolerance in
      `max_steps`, the events solve it again (`stats['steps_tried']` then holds the
      levels the steps ran). `method` on the solution says which ran.
    - `rtol`, `atol`, `max_steps`: PI step control (pcoeff 0.4, icoeff 0.3, as the other
      flows) and the step budget; `solver` (default `diffrax.Tsit5()`) and
      `stepsize_controller` replace them. `throw=True` raises where the solve fails.

    **Returns:** a `GradientFlowSolution`. Pure: `eqx.filter_jit` and `eqx.filter_vmap`
    over models (a batch of models from `eqx.filter_vmap`) and data work (plain `jax.vmap`
    cannot return a model whose activation is a function, as `eqx.nn.MLP`'s is).

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
    rtol, atol, max_steps = check_solver_options(rtol, atol, max_steps)
    hold_kinks = check_flag("hold_kinks", hold_kinks)
    check_solver_choice(solver, stepsize_controller, adaptive=False)
    save_trajectory = check_flag("save_trajectory", save_trajectory)
    if max_sliding is not None:
        max_sliding = check_positive_int("max_sliding", max_sliding)
    _check_loss_and_observables(loss, observables, ts, model, args)
    given = {
        "units": units, "steady_state": steady_state, "solver": solver,
        "stepsize_controller": stepsize_controller, "max_sliding": max_sliding,
    }  # fmt: skip
    chosen = _choose_method(method, given, hold_kinks, rtol, loss, params, static, args)
    short = None  # the steps' solution where "auto" tried them and they fell short
    if chosen == "steps":
        short = _steps(params, static, loss, ts, args, tau, rtol, atol, observables,
                       save_trajectory, max_steps)  # fmt: skip
        if method == "steps" or not fell_short(short):
            return short.raise_if_failed(throw)
    out = _events(params, static, loss, ts, args, tau, (rtol, atol, max_steps), given,
                  (observables, save_trajectory, hold_kinks))  # fmt: skip
    return tried_steps(out, short).raise_if_failed(throw)


def _events(params, static, loss, ts, args, tau, tolerances, given, saves):
    """`gradient_flow`'s event-driven solve (checked inputs; `given`: the options of the
    events alone, `saves`: observables, save_trajectory, hold_kinks), its sliding slots
    regrown where they ran out and `max_sliding` was not given."""
    rtol, atol, max_steps = tolerances
    observables, save_trajectory, hold_kinks = saves
    units, steady_state, max_sliding = given["units"], given["steady_state"], given["max_sliding"]
    dtype = tau.dtype
    scale, tau = (None, tau) if units is None else _unit_scale(units, params, tau)
    tol = None
    if steady_state is not None:
        tol = jnp.asarray(check_positive("steady_state", steady_state, scalar=True), dtype)
    stepsize_controller = given["stepsize_controller"]
    if stepsize_controller is None:
        stepsize_controller = default_controller(rtol, atol)
    floor = jnp.asarray(
        getattr(stepsize_controller, "atol", atol)
        / np.sqrt(getattr(stepsize_controller, "rtol", rtol)),
        dtype,
    )
    solver = diffrax.Tsit5() if given["solver"] is None else given["solver"]

    capacity = FIRST_CAPACITY if max_sliding is None else max_sliding
    options = _Options(
        observables, save_trajectory, hold_kinks, capacity, solver, stepsize_controller, max_steps
    )
    out = _solve(params, static, loss, ts, args, tau, tol, scale, floor, options)
    if hold_kinks and max_sliding is None:

        def more(model, ts, capacity):
            grown = dataclasses.replace(options, capacity=capacity)
            params = eqx.filter(model, eqx.is_inexact_array)
            return _solve(params, static, loss, ts, args, tau, tol, scale, floor, grown)

        out = regrow(out, more, ts, capacity)
    return out


def _choose_method(method, given, hold_kinks, rtol, loss, params, static, args) -> str:
    """`"events"` or `"steps"` (`gradient_flow`'s `method`, `integrators._stepped`'s
    `choose_method`): the kink entries counted only where the choice turns on them."""

    def entries():
        if not hold_kinks:
            return 0
        dynamic, args_static = eqx.partition(args, eqx.is_array)
        kinked = KinkedFunction(ModelLoss(loss, static, args_static), params, dynamic)
        if kinked.num_sites == 0:
            return 0
        return sum(x.size for x in jax.eval_shape(kinked.record, params, dynamic)[1])

    return choose_method(method, given, rtol, entries, jax.tree_util.tree_leaves(params)[0])


def _steps(params, static, loss, ts, args, tau, rtol, atol, observables, save_trajectory,
           max_steps) -> GradientFlowSolution:  # fmt: skip
    """`gradient_flow(method="steps")`: Euler levels extrapolated (`integrators._stepped`),
    the saves evaluated on the extrapolated trajectory."""
    dynamic, args_static = eqx.partition(args, eqx.is_array)
    plain_loss = ModelLoss(loss, static, args_static)
    dtype = ts.dtype
    options = StepOptions(30, max_steps)
    rtol, atol = jnp.asarray(rtol, dtype), jnp.asarray(atol, dtype)
    trajectory, result, stats = stepped_solve(
        params, plain_loss, plain_loss.field, dynamic, ts, tau, rtol, atol, options
    )
    value, grads = jax.vmap(jax.value_and_grad(plain_loss), in_axes=(0, None))(trajectory, dynamic)
    norms = jax.vmap(tree_norm)(grads)
    seen = None
    if observables is not None:
        seen = jax.vmap(lambda t, p: observables(t, eqx.combine(p, static), args))(ts, trajectory)
    final = jax.tree_util.tree_map(lambda x: x[-1], trajectory)
    result = name_nonfinite(result, final, (value[-1], norms[-1]))
    overflow = ~(jnp.all(jnp.isfinite(value)) & jnp.all(jnp.isfinite(norms)))
    result = RESULTS.where(overflow & (result == RESULTS.successful), RESULTS.nonfinite, result)
    small = _below_tolerance(params, None, jnp.asarray(atol / jnp.sqrt(rtol), dtype))
    result = RESULTS.where(small & (result == RESULTS.successful), RESULTS.below_tolerance, result)
    return GradientFlowSolution(
        ts=ts,
        loss=value,
        grad_norm=norms,
        observables=seen,
        log_scale=None,
        model=eqx.combine(final, static),
        trajectory=eqx.combine(trajectory, static) if save_trajectory else None,
        steady_time=jnp.asarray(jnp.inf, dtype),
        time_scale=tau,
        result=result,
        stats=stats,
        method="steps",
    )


def _unit_scale(units, params, tau):
    """The per-unit log scale of `units` (checked against the parameters), and tau with the
    check that no unit is zero at the start."""
    labels, count = unit_labels(units, params)
    zero = zero_units(params, labels, count)
    tau = check_value(
        tau,
        ~jnp.any(zero),
        "every unit of `units` must be nonzero at the start (label a zero unit -1), "
        "got a unit with all its weights 0",
    )
    return LogScale([jnp.asarray(lab) for lab in labels], count), tau


def _check_loss_and_observables(loss, observables, ts, model, args):
    """`loss(model, args)` must be a scalar, and `observables(t, model, args)` (where given)
    callable, tracing to a pytree of arrays (they are saved with a leading T axis)."""
    shape = eqx.filter_eval_shape(loss, model, args)
    if not (hasattr(shape, "shape") and shape.shape == ()):
        raise ValueError(f"`loss(model, args)` must return a scalar, got {shape}")
    dtypes = {
        str(x.dtype) for x in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    }
    if len(dtypes) > 1 or str(shape.dtype) not in dtypes:
        # the flow's state and its field must share one dtype (diffrax's loop refuses a
        # float32 state whose field comes out float64, in words that do not say dtype)
        raise ValueError(
            f"`model`'s arrays are {', '.join(sorted(dtypes))} and `loss(model, args)` comes "
            f"out {shape.dtype}: they must share one dtype (cast the model and args alike, "
            "e.g. with float64 enabled, or float32 args for a float32 model)"
        )
    if observables is None:
        return
    if not callable(observables):
        raise ValueError(
            f"`observables` must be callable as observables(t, model, args), got {observables!r}"
        )
    try:
        out = eqx.filter_eval_shape(observables, ts[0], model, args)
    except Exception as err:  # noqa: BLE001 - said in our words, with the cause
        raise ValueError(
            f"`observables` must be callable as observables(t, model, args) -> pytree of "
            f"arrays; calling it failed: {type(err).__name__}: {err}"
        ) from err
    bad = [x for x in jax.tree_util.tree_leaves(out) if not hasattr(x, "shape")]
    if bad:
        raise ValueError(
            f"`observables` must return a pytree of arrays, got a leaf {bad[0]!r} "
            f"({type(bad[0]).__name__})"
        )


def _below_tolerance(params, scale, floor):
    """A leaf (without `units`: the whole leaf; with them: its entries labelled -1) whose
    largest entry is nonzero and below `floor`."""
    leaves = jax.tree_util.tree_leaves(params)
    labels = [None] * len(leaves) if scale is None else scale.labels
    small = jnp.asarray(False)
    for lab, x in zip(labels, leaves, strict=True):
        size = jnp.max(jnp.abs(x if lab is None else jnp.where(lab < 0, x, 0.0)), initial=0.0)
        small = small | ((size > 0) & (size < floor))
    return small


def _coordinates(scale, tau, land):
    """The solver state's maps: to the flow's own state (without theta, where `land`), to
    the parameters, and from a loss gradient to dy/dt."""

    def state(y):
        return y[0] if land else y

    def to_params(y):
        return state(y) if scale is None else scale.to_params(state(y))

    def transform(y, g):
        if scale is None:
            dy = jax.tree_util.tree_map(lambda x: -tau * x, g)
        else:
            dy = scale.field(state(y), g, tau)
        return (dy, *(jnp.zeros_like(a) for a in y[1:])) if land else dy

    return state, to_params, transform


def _hold_after(saved, at_stop, later, stopped):
    """After a steady state every later save time holds the steady state's values."""

    def fill(x, v):
        mask = later.reshape(later.shape + (1,) * (x.ndim - 1))
        return jnp.where(stopped & mask, v[None], x)

    return jax.tree_util.tree_map(fill, saved, at_stop)


def _plain_field(plain_loss, to_params, transform):
    """dy/dt without held kinks."""

    def field(t, y, held):
        dyn = eqx.filter(held.user, eqx.is_array)
        return transform(y, jax.grad(plain_loss)(to_params(y), dyn))

    return field


class _Options(eqx.Module):
    """What selects the compiled program besides the shapes (static for `_solve`)."""

    observables: object
    save_trajectory: bool
    hold_kinks: bool
    capacity: int
    solver: diffrax.AbstractSolver
    stepsize_controller: diffrax.AbstractStepSizeController
    max_steps: int


def _steady_event(tol, land, plain_loss, to_params, stepsize_controller):
    """The steady-state event (`None` without `tol`) and ||grad|| - tol as a function of the
    solver state: with held kinks and a PID controller, at the first step's end where the
    flow's own speed is below tol; else located by the root finder on the dense output."""
    if tol is None:
        return None, None

    def steady(t, y, args, **kwargs):
        p = to_params(y)
        return tree_norm(jax.grad(plain_loss)(p, eqx.filter(args.user, eqx.is_array))) - tol

    if land:
        return diffrax.Event(lambda t, y, args, **kwargs: y[2] <= tol), steady
    rtol, atol = (getattr(stepsize_controller, k, 1e-8) for k in ("rtol", "atol"))
    return diffrax.Event(steady, root_finder=optx.Newton(rtol=rtol, atol=atol)), steady


def _steady_end(sol, ts, y0, held, steady, save, end):
    """Where the steady-state event stopped the solve: (t_stop, y_final, stopped, result,
    saved), the saves after the stop held at its values."""
    t_stop, y_final, result, saved = end
    mask = sol.event_mask if isinstance(sol.event_mask, jax.Array) else jnp.asarray(True)
    stopped = jnp.any(jnp.asarray(mask)) & (t_stop < ts[-1])
    # a float event fires on a sign change: a start below the threshold is its own stop
    start = steady(ts[0], y0, held) < 0
    t_stop = jnp.where(start, ts[0], t_stop)
    y_final = jax.tree_util.tree_map(lambda a, b: jnp.where(start, a, b), y0, y_final)
    stopped = stopped | start
    result = RESULTS.where(stopped, RESULTS.successful, result)
    saved = _hold_after(saved, save(t_stop, y_final, held), ts >= t_stop, stopped)
    return t_stop, y_final, stopped, result, saved


def _checked_result(result, saved, small):
    """A successful result made `nonfinite` where the saved loss or gradient norm overflows
    with a finite state (parameters near 1e200 with a quadratic loss: its saves are inf),
    or `below_tolerance` where the parameters are far below atol (`small`)."""
    overflow = ~(jnp.all(jnp.isfinite(saved[0])) & jnp.all(jnp.isfinite(saved[1])))
    result = RESULTS.where(overflow & (result == RESULTS.successful), RESULTS.nonfinite, result)
    return RESULTS.where(small & (result == RESULTS.successful), RESULTS.below_tolerance, result)


@eqx.filter_jit
def _solve(params, static, loss, ts, args, tau, tol, scale, floor, options):
    """The solve, compiled once per shapes and options (the inputs are checked)."""
    observables, save_trajectory, hold_kinks = (
        options.observables,
        options.save_trajectory,
        options.hold_kinks,
    )
    solver, stepsize_controller = options.solver, options.stepsize_controller
    dtype = ts.dtype
    dynamic, args_static = eqx.partition(args, eqx.is_array)

    def plain_loss(p, dyn):
        return loss(eqx.combine(p, static), eqx.combine(dyn, args_static))

    kinked = KinkedFunction(plain_loss, params, dynamic) if hold_kinks else None
    if kinked is not None and kinked.unheld:
        warnings.warn(
            f"gradient_flow: the loss has kinks that are not held ({', '.join(kinked.unheld)}): "
            "they are evaluated as written, and only the solver's error estimate charges "
            "their crossings; check the result with method='steps' (explicit Euler through "
            "any kink, extrapolated to step 0)",
            stacklevel=3,
        )
    if kinked is not None and kinked.num_sites == 0:
        kinked = None

    # with held kinks and a PID controller the state is (y, theta, speed): theta where a
    # rejected trial step crossed its first kink (`theory.numerics.LandingController`), speed
    # the flow's own ||d theta/dt|| / tau at the step's end (the Filippov velocity: on a kink
    # the plain gradient is not the flow's, and a flow at rest there never met its steady
    # state), both set by `KinkFlow.kink_error`
    land = kinked is not None and isinstance(stepsize_controller, diffrax.PIDController)
    state, to_params, transform = _coordinates(scale, tau, land)
    y0 = params if scale is None else scale.initial(params, dtype)
    if land:
        speed0 = tree_norm(jax.grad(plain_loss)(params, dynamic))
        y0 = (y0, jnp.ones((), dtype), speed0.astype(dtype))
        stepsize_controller = LandingController(stepsize_controller)
    if kinked is None:
        field, flow = _plain_field(plain_loss, to_params, transform), None
    else:
        entries = sum(x.size for x in jax.eval_shape(kinked.record, params, dynamic)[1])
        capacity = capacity_for(entries, options.capacity)
        flow = KinkFlow(kinked, to_params, transform, tau, capacity, land)
        field, solver = flow.field, flow.held_solver(solver)

    def save(t, y, held):
        p = to_params(y)
        value, g = jax.value_and_grad(plain_loss)(p, eqx.filter(held.user, eqx.is_array))
        out = (value, tree_norm(g), None if scale is None else state(y)[0])
        if observables is not None:
            out = out + (observables(t, eqx.combine(p, static), held.user),)
        return out + ((p,) if save_trajectory else ())

    event, steady = _steady_event(tol, land, plain_loss, to_params, stepsize_controller)
    sol = diffeqsolve(
        diffrax.ODETerm(field),
        solver,
        t0=ts[0],
        t1=ts[-1],
        dt0=None,
        y0=y0,
        args=Held(args),
        saveat=diffrax.SaveAt(
            subs=[diffrax.SubSaveAt(ts=ts, fn=save), diffrax.SubSaveAt(t1=True)],
            solver_state=kinked is not None,
        ),
        stepsize_controller=stepsize_controller,
        event=event,
        max_steps=options.max_steps,
        throw=False,
        grid_checked=True,
    )
    saved, y_final = sol.ys
    y_final = jax.tree_util.tree_map(lambda x: x[-1], y_final)
    t_stop = sol.ts[1][-1]
    result = RESULTS.promote(sol.result)
    result = name_nonfinite(result, y_final, save(t_stop, y_final, Held(args))[:2])
    stats = diffrax_stats(sol)
    stopped = jnp.asarray(False)
    if event is not None:
        end = (t_stop, y_final, result, saved)
        t_stop, y_final, stopped, result, saved = _steady_end(sol, ts, y0, Held(args), steady,
                                                              save, end)  # fmt: skip
    if kinked is not None:
        last = HoldArgs.held_args(sol.solver_state)
        result = RESULTS.where(last.overflow, RESULTS.kink_limited, result)
        stats.update(flow.stats(last))
    result = _checked_result(result, saved, _below_tolerance(params, scale, floor))
    return GradientFlowSolution(
        ts=ts,
        loss=saved[0],
        grad_norm=saved[1],
        observables=saved[3] if observables is not None else None,
        log_scale=saved[2],
        model=eqx.combine(to_params(y_final), static),
        trajectory=(eqx.combine(saved[-1], static) if save_trajectory else None),
        steady_time=jnp.where(stopped, t_stop, jnp.inf),
        time_scale=tau,
        result=result,
        stats=stats,
    )
