"""`HoldArgs`: any diffrax solver, with a discrete state of the field held fixed per step.

A relu network's gradient field switches where a pre-activation crosses zero: the live set
{v_ji > 0} is a discrete state of the field. An adaptive solver that meets a switch inside a
step sees a jump in the field, shrinks the step to ~tol / |jump| and climbs back: ten or more
steps per crossing, for each of the m n components that cross. Holding the live set fixed
within each step (the one at the step's start) makes the field smooth inside every step;
a component that crossed zero is switched off from the next step on. The field must read the
held state from its `args`, which `step_args(t0, y0, args)` computes at each step's start,
and must also accept the raw `args` (diffrax evaluates the field with them to check the term
and to pick the first step).

This is exact where the switch only matters through quantities that are continuous across
it (relu(v) itself, evaluated at every stage), and the switched component's own value past
the switch is never used: the case of the frozen components of `orthogonal_flow`,
`vanishing_flow` and the finite-alpha fast phases (`HoldArgs.live_set` and
`HoldArgs.past_kink` are their hooks).
What the held step integrates as if smooth is relu of a crossing component, a kinked function
of time; `overshoot` lets `HoldArgs` charge that to the error estimate (see `_kink_error`),
and a component that dips past the switch inside a step and comes back (as the step's dense
output at its midpoint sees it) rejects the step. A flow whose held state is not a part of
y (the kink sites of any model, `integrators.gradient_flow`) charges its own error through
`kink_error` instead.

**Memory and stop.** With `memory=True`, `step_args(t0, y0, args, previous)` also gets the
held args of the last accepted step (`None` at the first): a field can keep a discrete state
of its own there (the sliding set of `integrators.gradient_flow`). With `stop`, a step whose
held args say `stop(held)` ends the solve where it starts, with
`diffrax.RESULTS.dt_min_reached`; `HoldArgs.held_args(solver_state)` returns the last held
args from a final solver state (`diffrax.SaveAt(solver_state=True)`) to say why.
"""

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

_DIP_POINT = 0.5  # where a step's dense output is probed for a dip (3 points cost +13% time)


def _changed(a, b):
    out = jnp.asarray(False)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        out = out | jnp.any(x != y)
    return out


def _finite(tree):
    out = jnp.asarray(True)
    for x in jax.tree_util.tree_leaves(tree):
        out = out & jnp.all(jnp.isfinite(x))
    return out


def _nonzero(tree):
    out = jnp.asarray(False)
    for x in jax.tree_util.tree_leaves(tree):
        out = out | jnp.any(x != 0)
    return out


def _bool_leaves(tree):
    return [x for x in jax.tree_util.tree_leaves(tree) if jnp.result_type(x) == jnp.bool_]


class HoldArgs(diffrax.AbstractAdaptiveSolver, diffrax.AbstractWrappedSolver):
    """Wraps an adaptive diffrax `solver` so that every stage of a step sees the `args` that
    `step_args(t0, y0, args)` returns at the step's start (see the module docstring).

    **Arguments:**

    - `solver`: any `diffrax.AbstractAdaptiveSolver` (its term structure is kept).
    - `step_args`: (t0, y0, args) -> args, of the same structure whenever it is called.
    - `overshoot`: `None`, or (y0, y, held_args) -> a y-shaped pytree, nonzero exactly on the
      components past their switch at y that were held live (`past_kink`). With it, a
      crossing's kink is charged to the error estimate, and a dip past the switch at the
      step's midpoint (dense output) that is gone at its end rejects the step.
    - `kink_error`: `None`, or (t0, t1, y0, y1, held_args, interpolation) -> (a y-shaped
      error added to the estimate, a boolean: reject the step), for a field whose switches
      are not components of y (exclusive with `overshoot`); a third value, where given,
      replaces y1 (a state (y, theta) that tells `LandingController` where the step crossed
      its first switch).
    - `memory`: call `step_args(t0, y0, args, previous)` (module docstring).
    - `stop`: `None`, or held_args -> bool: end the solve at a step whose held args say so.

    A first-same-as-last solver (Dopri5) re-evaluates its first stage after a step whose held
    args changed.

    A field whose sign switch is held per step:

    >>> def field(t, y, sign):
    ...     return sign * jnp.ones_like(y)
    >>> hold = HoldArgs(diffrax.Dopri5(), lambda t, y, args: jnp.where(y < 1.0, 1.0, 0.0))
    >>> sol = diffrax.diffeqsolve(diffrax.ODETerm(field), hold, 0.0, 2.0, 0.1, jnp.array(0.0),
    ...                           args=jnp.array(1.0))
    >>> bool(sol.ys[-1] >= 1.0), bool(sol.ys[-1] < 1.2)  # climbs to 1, stops within a step
    (True, True)
    """

    solver: diffrax.AbstractAdaptiveSolver
    step_args: Callable = eqx.field(static=True)
    overshoot: Callable | None = eqx.field(static=True, default=None)
    kink_error: Callable | None = eqx.field(static=True, default=None)
    memory: bool = eqx.field(static=True, default=False)
    stop: Callable | None = eqx.field(static=True, default=None)

    @staticmethod
    def live_set(psi):
        """The live set of relu pre-activations `psi`: where they are > 0.

        >>> HoldArgs.live_set(jnp.array([0.5, 0.0, -1.0])).tolist()
        [True, False, False]
        """
        return psi > 0

    @staticmethod
    def past_kink(held_live, psi):
        """The part of `psi` past the kink on held-live components (0 elsewhere): the
        overshoot of the components that crossed zero during a step, for `overshoot`.

        >>> held = jnp.array([True, True, False])
        >>> HoldArgs.past_kink(held, jnp.array([0.5, -0.1, -1.0])).tolist()
        [0.0, -0.1, 0.0]
        """
        return jnp.where(held_live & (psi <= 0), psi, jnp.zeros_like(psi))

    def __check_init__(self):
        if not isinstance(self.solver, diffrax.AbstractAdaptiveSolver):
            raise ValueError(
                f"`solver` must be an adaptive diffrax solver, got {type(self.solver).__name__}"
            )
        if not callable(self.step_args):
            raise ValueError(
                "`step_args` must be callable (t, y, args) -> args, got "
                f"{type(self.step_args).__name__}"
            )
        if self.overshoot is not None and not callable(self.overshoot):
            raise ValueError(
                "`overshoot` must be None or callable (y0, y1, args) -> y-shaped pytree, got "
                f"{type(self.overshoot).__name__}"
            )
        if self.kink_error is not None and (
            not callable(self.kink_error) or self.overshoot is not None
        ):
            raise ValueError(
                "`kink_error` must be None or callable, and not given with `overshoot`, got "
                f"{type(self.kink_error).__name__}"
            )
        if self.stop is not None and not callable(self.stop):
            raise ValueError(f"`stop` must be None or callable, got {type(self.stop).__name__}")

    @staticmethod
    def held_args(solver_state):
        """The held args of the last accepted step, from a final solver state."""
        return solver_state[1]

    @property
    def term_structure(self):
        return self.solver.term_structure

    @property
    def interpolation_cls(self):
        return self.solver.interpolation_cls

    def order(self, terms):
        return self.solver.order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def _held(self, t0, y0, args, previous):
        if self.memory:
            return self.step_args(t0, y0, args, previous)
        return self.step_args(t0, y0, args)

    def init(self, terms, t0, t1, y0, args):
        held = self._held(t0, y0, args, None)
        # (the inner state, the held args, zero-length trial steps accepted in a row)
        return self.solver.init(terms, t0, t1, y0, held), held, jnp.asarray(0)

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0, self._held(t0, y0, args, None))

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        inner_state, previous, idle = solver_state
        held = self._held(t0, y0, args, previous)
        # the field changes where a held boolean does (other held values only describe it)
        made_jump = jnp.logical_or(made_jump, _changed(_bool_leaves(held), _bool_leaves(previous)))
        y1, error, dense, inner_state, result = self.solver.step(
            terms, t0, t1, y0, held, inner_state, made_jump
        )
        if self.overshoot is not None:
            error = self._kink_error(terms, t0, t1, y0, y1, held, error, dense)
        if self.kink_error is not None:
            local = self.solver.interpolation_cls(t0=t0, t1=t1, **dense)
            extra, reject, *landing = self.kink_error(t0, t1, y0, y1, held, local)
            if landing:  # (y, theta): where the step crossed its first switch
                y1 = landing[0]
            error = jax.tree_util.tree_map(
                lambda err, x: jnp.where(reject, jnp.inf, jnp.abs(err) + jnp.abs(x)), error, extra
            )
        # a trial step whose stages overflowed (inf, or inf * 0 = NaN) is rejected: diffrax's
        # controller turns a NaN error into a NaN step size (a solve that spins to
        # `max_steps`), an infinite one into its smallest step factor
        bad = ~(_finite(y1) & _finite(error))
        error = jax.tree_util.tree_map(lambda e: jnp.where(bad, jnp.inf, e), error)
        # ...unless the field is not finite at the step's start, which no shorter step cures
        # (it would spin to `max_steps`): the solve then ends there with `nonfinite`, as does
        # a non-finite step that a constant-step controller keeps
        dead = jax.lax.cond(
            bad,
            lambda: ~(_finite(y0) & _finite(self.solver.func(terms, t0, y0, held))),
            lambda: jnp.asarray(False),
        )
        y1 = jax.tree_util.tree_map(lambda a, b: jnp.where(dead, a, b), y0, y1)
        error = jax.tree_util.tree_map(lambda e: jnp.where(dead, 0.0, e), error)
        result = diffrax.RESULTS.where(bad, diffrax.RESULTS.nonfinite, result)
        # a trial step shrunk to nothing (t0 + h rounds to t0, after an error that no shorter
        # step cures) ends the solve: accepted at zero length, with zero error, it repeated
        # until `max_steps` (a sliding solve's lambda of 1e19 spun 99,400 such steps). One
        # such step is diffrax's own where a solve starts a float step before a jump time
        # (diffrax issue #713), and the next goes on: the second in a row ends the solve
        zero = t1 == t0
        result = diffrax.RESULTS.where(zero & (idle > 0), diffrax.RESULTS.dt_min_reached, result)
        idle = jnp.where(zero, idle + 1, 0)
        if self.stop is not None:
            # the step that finds a stop ends the solve where it started
            stop = self.stop(held)
            y1 = jax.tree_util.tree_map(lambda a, b: jnp.where(stop, a, b), y0, y1)
            error = jax.tree_util.tree_map(lambda e: jnp.where(stop, 0.0, e), error)
            result = diffrax.RESULTS.where(stop, diffrax.RESULTS.dt_min_reached, result)
        return y1, error, dense, (inner_state, held, idle), result

    def _kink_error(self, terms, t0, t1, y0, y1, held, error, dense):
        """The error of integrating across a switch inside the step, added to the estimate.

        A component c that crossed its switch during the step reaches the others through a
        kinked function of time (relu of it), which the step integrates as if smooth. With
        e_c its part past the switch at t1 (the overshoot) and delta_c = h |e_c| / |y1_c -
        y0_c| the time it spent past it (exact for a straight path), the area between the
        kinked function and its smooth continuation is |e_c| delta_c / 2, so the error the
        crossing makes in the others is about |J a| with a_c = e_c delta_c / 2 (one
        Jacobian-vector product at y0). The crossed components' own error is dropped: their
        values past the switch are never used. A component past its switch at the midpoint of
        the dense output but not at t1 has dipped and come back, which the held field cannot
        see: the step's error is then infinite, and the step is retried shorter (a dip that
        misses the midpoint goes unseen). A step in which nothing crossed adds nothing, and
        its J a is not formed (where the field's Jacobian is infinite at a finite y0, sqrt at
        0 say, J 0 had come out NaN and every such step was rejected).
        """
        e = self.overshoot(y0, y1, held)
        h = jnp.abs(t1 - t0)

        def area(ec, a, b):
            moved = jnp.where(ec != 0, jnp.abs(b - a), 1.0)
            return jnp.where(ec != 0, 0.5 * ec * h * jnp.abs(ec) / moved, 0.0).astype(ec.dtype)

        areas = jax.tree_util.tree_map(area, e, y0, y1)
        # most steps cross nothing: their J a is 0 without the Jacobian-vector product (a
        # real branch unbatched; under vmap both sides run, as before)
        Ja = jax.lax.cond(
            _nonzero(e),
            lambda: jax.jvp(lambda y: terms.vf(t0, y, held), (y0,), (areas,))[1],
            lambda: jax.tree_util.tree_map(jnp.zeros_like, areas),
        )
        local = self.solver.interpolation_cls(t0=t0, t1=t1, **dense)
        inside = self.overshoot(y0, local.evaluate(t0 + _DIP_POINT * (t1 - t0)), held)
        dipped = _nonzero(jax.tree_util.tree_map(lambda a, b: (a != 0) & (b == 0), inside, e))
        return jax.tree_util.tree_map(
            lambda err, ja, ec: jnp.where(
                dipped, jnp.inf, jnp.where(ec != 0, 0.0, jnp.abs(err) + jnp.abs(ja))
            ),
            error,
            Ja,
            e,
        )
