"""One solution convention for everything that integrates or iterates.

As in optimistix and diffrax: a result is an Equinox module with `result` (an item of
`RESULTS`), an `ok` property (`result == RESULTS.successful`, a boolean array under `vmap`)
and a `stats` dict (steps, and accepted/rejected steps where they exist). Functions that
return one take `throw=False`; with `throw=True` a failed solve raises instead (eagerly, or
through `eqx.error_if` under `jit`).
"""

import dataclasses

import diffrax
import equinox as eqx
import jax
import numpy as np

from ._hold import _finite
from .checks import check_flag, is_concrete


class RESULTS(diffrax.RESULTS):  # pyright: ignore[reportGeneralTypeIssues]
    """diffrax's `RESULTS` (and optimistix's), plus the outcomes of gradient descent and of
    convex programs. A diffrax result converts with `RESULTS.promote(sol.result)`.

    >>> RESULTS.promote(diffrax.RESULTS.successful) == RESULTS.successful
    Array(True, dtype=bool)
    """

    diverged = (
        "The iteration diverged: the loss became non-finite or exceeded `max_loss`. "
        "Try a smaller `learning_rate`."
    )
    infeasible = "The program is infeasible: no point satisfies its constraints."
    uncrossed = (
        "A predicted jump was never crossed by the predicted loss curve (the prediction did "
        "not reach it before its horizon)."
    )
    kink_limited = (
        "The flow could not go on through the ReLU kinks: `two_layer_flow` used up its "
        "`max_kink_events` (crossings, sliding entries and exits; raise it), or in "
        "`gradient_flow` more pre-activations slide along their kinks at once than "
        "`max_sliding` allows (raise it, or leave it None so that the slots grow, up to 4096, "
        "outside an outer `jax.jit`; `stats['kink_time']` says when)."
    )
    below_tolerance = (
        "Some parameters are far below the absolute tolerance (a parameter leaf's largest "
        "entry is nonzero and below atol / sqrt(rtol)), where a plain solve has no relative "
        "accuracy: pass `units=` (e.g. `neuron_units(model)`) to integrate each unit on its "
        "own log scale, or lower `atol`."
    )
    nonfinite_point = (
        "The loss, its gradient or a Hessian-vector product is not finite at the point given "
        "(or became so during the iteration)."
    )
    stalled = (
        "The iteration stalled before reaching `tol`: its trust region shrank to rounding level "
        "(a local minimum of ||grad L|| that is not a critical point, a point where the loss is "
        "not smooth, or `tol` below what the dtype resolves)."
    )
    max_jumps_reached = (
        "The jump process did not reach its end within `max_jumps` jumps: raise `max_jumps`."
    )
    unbounded = (
        "The loss decreases without bound from this start: the iterate's norm grew past 1e20 "
        "times its start (or 1e20) with no critical point in reach (a loss with no minimum, "
        "or none along this path)."
    )
    runs_to_infinity = (
        "The steps ran out while the iterate ran away: over the budget's second half ||x|| "
        "grew by 5% or more (`stats`: `start_norm`, `midway_norm`, `end_norm`) while "
        "||grad|| fell by less than 10x. It looks to be heading for a critical point at "
        "infinity (saturating or cancelling units, where the gradient vanishes only "
        "asymptotically), not a finite one. Start nearer a critical point (a longer flow), "
        "or use kind='minimum'."
    )
    uncertified_index = (
        "The point is critical to `tol`, but its Morse index is not certified: the Lanczos "
        "bounds did not meet and P is above 8192, where the dense count is not made, or "
        "certification was not asked (`certify=False`) "
        "(`spectrum.morse_lower` is the bound reached; pass `certify=False` not to ask)."
    )
    chunks_failed = (
        "Some chunks of the sweep raised or are missing: its `failed` and `missing` say which "
        "seeds (their outputs are NaN / -1 / False); a rerun into the same `out` retries them."
    )
    unconverged_eigenvalues = (
        "Lanczos did not converge every requested eigenvalue to `tol` within `max_restarts` "
        "restarts (`residuals` says how far each is): raise `max_restarts` or `steps`."
    )


def name_nonfinite(result, *trees):
    """`RESULTS.nonfinite` in place of a spent step budget (`max_steps_reached`) where the state
    or the field at the stop (`trees`) is not finite: the solve was rejecting every step
    because of a NaN or an overflow, which no larger `max_steps` cures.

    **Arguments:**

    - `result`: a `RESULTS` item (a batch of them under `vmap`).
    - `*trees`: the state and the field at the stop, any pytrees of arrays.

    **Returns:** a `RESULTS` item: `RESULTS.nonfinite` where `result` is `max_steps_reached`
    and some leaf of `trees` holds a NaN or an inf, else `result`.

    **Raises:** `ValueError` where `result` is not a `RESULTS` item.

    >>> name_nonfinite(RESULTS.max_steps_reached, jnp.array([1.0, jnp.nan])) == RESULTS.nonfinite
    Array(True, dtype=bool)
    """
    _check_result(result)
    spent = result == RESULTS.max_steps_reached
    return RESULTS.where(spent & ~_finite(trees), RESULTS.nonfinite, result)


def diffrax_stats(sol: diffrax.Solution) -> dict:
    """The `stats` of a solution from a diffrax solve: its step counts.

    **Arguments:**

    - `sol`: a `diffrax.Solution`.

    **Returns:** a dict with the keys `"num_steps"`, `"num_accepted_steps"` and
    `"num_rejected_steps"`, each an integer array taken from `sol.stats`.

    >>> term = diffrax.ODETerm(lambda t, y, args: -y)
    >>> sol = diffrax.diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 0.1, 1.0)
    >>> int(diffrax_stats(sol)["num_steps"])
    10
    """
    return {k: sol.stats[k] for k in ("num_steps", "num_accepted_steps", "num_rejected_steps")}


def _check_result(result):
    if not (hasattr(result, "_enumeration") and hasattr(result, "_value")):
        raise ValueError(f"`result` must be a RESULTS item, got {type(result).__name__}")


def result_names(result) -> str:
    """The member name(s) of a RESULTS item: `RESULTS.successful`, or a list under `vmap`.

    **Arguments:**

    - `result`: a `RESULTS` item (of any enumeration with Equinox's item layout, diffrax's
      `RESULTS` included), one or a batch.

    **Returns:** a string: `"RESULTS.<name>"` for one item, the list of names as a string
    for a batch (flattened), and `"RESULTS.<traced>"` for a traced item; a value that names
    no member shows as its integer.

    **Raises:** `ValueError` where `result` is not a `RESULTS` item.

    >>> result_names(RESULTS.diverged)
    'RESULTS.diverged'
    """
    _check_result(result)
    enum = result._enumeration
    names = {int(item._value): name for name, item in enum._name_to_item.items()}
    values = np.asarray(result._value) if is_concrete(result._value) else None
    if values is None:
        return f"{enum.__name__}.<traced>"
    if values.ndim == 0:
        return f"{enum.__name__}.{names.get(int(values), int(values))}"
    return str([names.get(int(v), int(v)) for v in values.ravel()])


_SHOWN = 8  # arrays of at most this many entries print their values


def _shown(x) -> str:
    if hasattr(x, "_enumeration") and hasattr(x, "_value"):  # a RESULTS item (_check_result)
        return result_names(x)
    if isinstance(x, jax.Array | np.ndarray | np.generic):
        if not is_concrete(x):
            return f"{x.dtype}{list(x.shape)}"
        v = np.asarray(x)
        if v.size <= _SHOWN:
            wide = np.array2string(v, precision=6, separator=", ", max_line_width=10**6)
            return wide if v.ndim else f"{v.item()!r}"
        return f"{v.dtype}{list(v.shape)}"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {_shown(v)}" for k, v in x.items()) + "}"
    if isinstance(x, eqx.Module):
        leaves = [v for v in jax.tree_util.tree_leaves(x) if isinstance(v, jax.Array)]
        return f"{type(x).__name__}(" + ", ".join(f"{v.dtype}{list(v.shape)}" for v in leaves) + ")"
    return repr(x)


class Readable(eqx.Module):
    """Prints its fields with their values (arrays of up to 8 entries in full, larger ones as
    dtype[shape], a result as `RESULTS.name`), one per line."""

    def __repr__(self):
        fields = [f.name for f in dataclasses.fields(self)]
        lines = [f"  {name}={_shown(getattr(self, name))}," for name in fields]
        return f"{type(self).__name__}(\n" + "\n".join(lines) + "\n)"

    __str__ = __repr__


class AbstractSolution(Readable):
    """Base of every solution: `result`, `stats` and the `ok` property. Abstract, as in
    Equinox's abstract/final pattern: each solver's solution is a final subclass named after
    its function (`critical_point` returns a `CriticalPointSolution`) that declares `result`
    and `stats` among its own fields.

    >>> class DemoSolution(AbstractSolution):
    ...     result: RESULTS
    ...     stats: dict
    >>> sol = DemoSolution(result=RESULTS.successful, stats={"num_steps": 3})
    >>> bool(sol.ok)
    True
    >>> sol
    DemoSolution(
      result=RESULTS.successful,
      stats={'num_steps': 3},
    )
    """

    result: eqx.AbstractVar[RESULTS]
    stats: eqx.AbstractVar[dict]

    @property
    def ok(self):
        """True where `result` is `RESULTS.successful` (a boolean array under `vmap`)."""
        return self.result == RESULTS.successful

    def raise_if_failed(self, throw: bool = True):
        """`self`, or with `throw` an error carrying `result`'s message where it failed
        (eagerly, or through `eqx.error_if` under `jit`). Solvers end with
        `return solution.raise_if_failed(throw)`.

        >>> from theory.numerics import NNQPSolution
        >>> sol = NNQPSolution(RESULTS.diverged, {}, lam=jnp.zeros(1), passive=jnp.zeros(1, bool))
        >>> sol.raise_if_failed(False).ok
        Array(False, dtype=bool)
        """
        if not check_flag("throw", throw):
            return self
        return self.result.error_if(self, ~self.ok)
