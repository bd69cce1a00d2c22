"""`HoldArgs`: any diffrax solver, with a discrete state of the field held fixed per step.

A relu network's gradient field switches where a pre-activation crosses zero: the live set
{v_ji > 0} is a discrete state of the field. An adaptive solver that meets a switch inside a
step sees a jump in the field, shrinks the step to ~tol / |jump| and climbs back: ten or more
steps per crossing, for each of the m n components that cross. Holding the live set fixed
within each step (the one at the step's start) makes the field smooth inside every step;
a component that crossed zero is switched off from the next step on. The field must read the
held state from its `args`, which `step_args(t0, y0, args)` computes at each step's start.

This is exact where the switch only matters through quantities that are continuous across
it (relu(v) itself, evaluated at every stage), and the switched component's own value past
the switch is never used: the case of the frozen components of `orthogonal_flow` and
`vanishing_flow`.
"""

from collections.abc import Callable
from typing import ClassVar

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp


def _changed(a, b):
    leaves_a, leaves_b = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return jnp.any(jnp.stack([jnp.any(x != y) for x, y in zip(leaves_a, leaves_b, strict=True)]))


class HoldArgs(diffrax.AbstractAdaptiveSolver):
    """Wraps an adaptive diffrax `solver` so that every stage of a step sees the `args` that
    `step_args(t0, y0, args)` returns at the step's start (see the module docstring).

    **Arguments:** `solver`, any `diffrax.AbstractAdaptiveSolver`; `step_args`, a callable
    (t0, y0, args) -> args of the same structure whenever it is called. A first-same-as-last
    solver (Dopri5) re-evaluates its first stage after a step whose held args changed.

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

    term_structure: ClassVar = diffrax.AbstractTerm

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

    @property
    def interpolation_cls(self):
        return self.solver.interpolation_cls

    def order(self, terms):
        return self.solver.order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def init(self, terms, t0, t1, y0, args):
        held = self.step_args(t0, y0, args)
        return self.solver.init(terms, t0, t1, y0, held), held

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0, self.step_args(t0, y0, args))

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        inner_state, previous = solver_state
        held = self.step_args(t0, y0, args)
        made_jump = jnp.logical_or(made_jump, _changed(held, previous))
        y1, error, dense, inner_state, result = self.solver.step(
            terms, t0, t1, y0, held, inner_state, made_jump
        )
        if self.overshoot is not None:
            error = self._kink_error(terms, t0, t1, y0, y1, held, error)
        return y1, error, dense, (inner_state, held), result

    def _kink_error(self, terms, t0, t1, y0, y1, held, error):
        """The error of integrating across a switch inside the step, added to the estimate.

        A component c that crossed its switch during the step reaches the others through a
        kinked function of time (relu of it), which the step integrates as if smooth. With
        e_c its part past the switch at t1 (the overshoot) and delta_c = h |e_c| / |y1_c -
        y0_c| the time it spent past it (exact for a straight path), the area between the
        kinked function and its smooth continuation is |e_c| delta_c / 2, so the error the
        crossing makes in the others is about |J a| with a_c = e_c delta_c / 2 (one
        Jacobian-vector product at y0). The crossed components' own error is dropped: their
        values past the switch are never used.
        """
        e = self.overshoot(y0, y1, held)
        h = jnp.abs(t1 - t0)

        def area(ec, a, b):
            moved = jnp.abs(b - a)
            return jnp.where(
                ec != 0, 0.5 * ec * h * jnp.abs(ec) / jnp.where(ec != 0, moved, 1.0), 0.0
            )

        areas = jax.tree_util.tree_map(area, e, y0, y1)
        _, Ja = jax.jvp(lambda y: terms.vf(t0, y, held), (y0,), (areas,))
        return jax.tree_util.tree_map(
            lambda err, ja, ec: jnp.where(ec != 0, 0.0, jnp.abs(err) + jnp.abs(ja)), error, Ja, e
        )
