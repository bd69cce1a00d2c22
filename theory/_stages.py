"""Stage times of the multi-index staircase: predicted from the stage ODEs
(`stage_times`), measured on a simulation (`measured_stage_times`), and the two side by side
with the plateaus and the masses (`compare_stages`).

Paper: *Learning Orthogonal Multi-Index Models Beyond Small Initialization: Incremental
Learning, Competitive Dynamics and Symmetry* (NeurIPS 2026, arXiv:2609.10879).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._equilibria import stage_equilibria
from ._hermite import hermite_coefficients
from ._solution import RESULTS, AbstractSolution, Readable
from ._staircase import (
    _lotka_volterra,
    mass_ratio,
    tensor_power,
    typical_alignment,
)
from .checks import (
    check_activation,
    check_finite,
    check_positive,
    check_positive_int,
    check_shape,
    check_time_grid,
    check_value,
    inexact,
)


@functools.partial(jax.jit, static_argnames="activation")
def _alignment_curves(p0, ts, activation):
    """`tensor_power` from each of the starts p0 (r,), batched and compiled once."""
    return jax.vmap(lambda p: tensor_power(p, ts, activation=activation))(p0)


def _first_time(ts, ok):
    return jnp.where(jnp.any(ok), ts[jnp.argmax(ok)], jnp.inf)


class StageTimesSolution(AbstractSolution):
    """Result of `stage_times`: the predicted times `t_0`, `t_2`, `t_4` (`inf` past the
    horizon), with the `result` and `stats` of the ODE solves behind them (the first failure,
    and the steps of both solves added).

    >>> st = StageTimesSolution(
    ...     t_0=jnp.asarray(1.0), t_2=jnp.asarray(5.0), t_4=jnp.asarray(jnp.inf),
    ...     result=RESULTS.successful, stats={"num_steps": jnp.asarray(10)})
    >>> bool(st.ok), float(st.t_4)  # t_4 past the horizon
    (True, inf)
    """

    result: RESULTS
    stats: dict
    t_0: Float[Array, ""]
    t_2: Float[Array, ""]
    t_4: Float[Array, ""]


def stage_times(
    *,
    activation: str,
    r: int,
    d: int,
    m: int,
    weight_decay,
    alpha0=1.0,
    threshold: float = 0.1,
    eps: float = 0.1,
    horizon: float = 1e3,
    points: int = 20_001,
    initial_alignment=None,
    throw: bool = False,
) -> StageTimesSolution:
    """Predicted stage times, from the ODEs above and a uniform start (beta = alpha0 / d):

    - t_0: alpha~ covers (1 - threshold) of the way to its stage-0 equilibrium
      (`stage_equilibria`, closed form).
    - t_2: q(t) <= threshold under the corrected Lotka-Volterra system.
    - t_4: t_2 + the time the mean over the r target directions of the tensor-power
      alignment p_k(t) takes to reach 1 - eps, each p_k started from the best neuron's
      alignment with e_k: `initial_alignment` (r,) when given (from the initialization, see
      `theory.initial_alignment`), else `typical_alignment(r=r, m=m)` for every k. (The old start
      2 log(m) / r is >= 1 whenever m >= e^(r/2), where it gave t_4 = t_2; at the paper's
      size it is above the actual best alignment, 0.552 against 0.383, and made t_4 30%
      early.)

    Times past `horizon` are `inf`.

    **Arguments:**

    - `activation`: an even activation, a name of `EVEN_ACTIVATIONS`.
    - `r`: the number of target directions, an integer >= 1.
    - `d`: the input dimension, an integer >= r.
    - `m`: the number of neurons, an integer >= 1 (it sets `typical_alignment`'s start).
    - `weight_decay`: lambda, one finite number >= 0, small enough that every stage's mass
      equilibrium (`stage_equilibria`) is > 0.
    - `alpha0`: the initial mass alpha~(0), finite, > 0 and below stage 0's equilibrium
      (default 1).
    - `threshold`: one number in (0, 1), the t_0 and t_2 criteria above (default 0.1).
    - `eps`: one number in (0, 1), the t_4 criterion above (default 0.1).
    - `horizon`: the last time solved for, finite and > 0 (default 1e3).
    - `points`: the size of the uniform time grid on [0, `horizon`] on which the crossings
      are read, an integer >= 2 (default 20001).
    - `initial_alignment`: None (default), or the starts p_k in [0, 1] of t_4 above: an array
      of shape (r,), or one number for every k.
    - `throw`: True raises where an ODE solve fails instead of returning a failed `result`
      (default False).

    **Returns:** a `StageTimesSolution`: `t_0`, `t_2`, `t_4` (scalar arrays, `inf` past the
    horizon), `result` and `stats`.

    **Raises:** `ValueError` where `activation` is not even, `r`, `m` or `points` is not an
    integer >= 1 (>= 2 for `points`), `d` < r, `weight_decay` is negative, not finite or so
    large that a stage's mass equilibrium is <= 0, `threshold` or `eps` is not one number in
    (0, 1), `alpha0` is not finite and > 0 or not below stage 0's equilibrium, `horizon` is
    not finite and > 0, `initial_alignment` is not of shape (r,) or () or leaves [0, 1], or
    `throw` is not True or False; with `throw=True`, `eqx.EquinoxRuntimeError` where a solve
    failed.

    >>> st = stage_times(activation="abs", r=8, d=40, m=20, weight_decay=0.4)
    >>> bool(st.ok), bool(0 < st.t_0 < st.t_2 < st.t_4)
    (True, True)
    """
    check_activation(activation, even=True)
    r = check_positive_int("r", r)
    d = check_positive_int("d", d, minimum=r)
    m = check_positive_int("m", m)
    c = hermite_coefficients(activation, 2)
    c0, c2 = c[0], c[2]
    equilibria = stage_equilibria(activation=activation, r=r, d=d, weight_decay=weight_decay)
    K = equilibria.mass[0]
    checked = []
    for name, value in (("threshold", threshold), ("eps", eps)):
        check_shape(name, value, ())
        v = inexact(value, name=name)
        # the checked value is the one used: under jit the check lives in its data flow
        checked.append(
            check_value(v, (v > 0) & (v < 1), f"`{name}` must lie in (0, 1), got {value}")
        )
    threshold, eps = checked
    alpha0 = check_positive("alpha0", alpha0)
    alpha0 = check_value(
        alpha0,
        jnp.asarray(alpha0) < K,
        "stage 0 grows the mass from `alpha0` to its equilibrium (`stage_equilibria`): "
        f"`alpha0` must be below it, got {alpha0}",
    )
    horizon = check_positive("horizon", horizon)
    points = check_positive_int("points", points, minimum=2)
    if initial_alignment is None:
        # the default dtype, not weakly typed: the same program as a given alignment
        p0 = jnp.full((r,), typical_alignment(r=r, m=m), dtype=jnp.result_type(float))
    else:
        if jnp.ndim(initial_alignment) != 0:
            check_shape("initial_alignment", initial_alignment, (r,))
        p0 = jnp.broadcast_to(
            inexact(initial_alignment, jnp.result_type(float), "initial_alignment"), (r,)
        )
        p0 = check_value(
            p0,
            (p0 >= 0) & (p0 <= 1),
            f"`initial_alignment` must lie in [0, 1] (squared cosines), got {initial_alignment}",
        )
    kw = dict(activation=activation, r=r, d=d, points=points)
    out = _stage_times(alpha0, threshold, eps, horizon, weight_decay, p0, equilibria, c0, c2, **kw)
    return out.raise_if_failed(throw)


@functools.partial(jax.jit, static_argnames=("activation", "r", "d", "points"))
def _stage_times(
    alpha0,
    threshold,
    eps,
    horizon,
    weight_decay,
    p0,
    equilibria,
    c0,
    c2,
    *,
    activation,
    r,
    d,
    points,
):
    """`stage_times` past its checks: one program per (activation, r, d, points)."""
    K = equilibria.mass[0]
    target = alpha0 + (1.0 - threshold) * (K - alpha0)
    # log((K / alpha0 - 1) / (K / target - 1)) with K - target = threshold (K - alpha0): no
    # cancellation at small threshold (1e-200 gave K / target - 1 = 0 and t_0 = inf)
    t0 = (jnp.log(target / alpha0) - jnp.log(threshold)) / equilibria.rate[0]
    ts = jnp.linspace(0.0, horizon, points)
    beta0 = jnp.array([alpha0 / d, alpha0 / d])
    # the inputs were checked before the trace: no re-check (a host callback) in the program
    lv = _lotka_volterra(beta0, ts, c0, c2, r, d, weight_decay)
    t2 = _first_time(ts, mass_ratio(lv.ys, c0=c0, c2=c2, r=r, d=d) <= threshold)
    tp = _alignment_curves(p0, ts, activation)
    t4 = t2 + _first_time(ts, jnp.mean(tp.ys, axis=0) >= 1.0 - eps)
    tp_ok = jnp.all(tp.ok)
    tp_result = RESULTS.where(tp_ok, RESULTS.successful, RESULTS.max_steps_reached)
    result = RESULTS.where(lv.ok, tp_result, lv.result)
    stats = {k: lv.stats[k] + jnp.sum(tp.stats[k]) for k in lv.stats}
    return StageTimesSolution(t_0=t0, t_2=t2, t_4=t4, result=result, stats=stats)


def measured_stage_times(
    ts, alpha, q, alignment, *, equilibrium, threshold: float = 0.1, eps: float = 0.1
) -> np.ndarray:
    """The stage times of a simulation, measured the way `stage_times` predicts them: the
    first save time at which alpha~ is past (1 - threshold) of the way from alpha~(0) to
    `equilibrium`, at which q(t) < threshold, and at which the best neurons' mean alignment is
    above 1 - eps; `inf` where it never happens. NumPy in, NumPy out (a measurement).

    **Arguments:**

    - `ts` (T,): the save times, finite, >= 0 and nondecreasing.
    - `alpha` (T,): the mass alpha~ at `ts`, finite.
    - `q` (T,): the mass ratio q = beta_2 / beta_1 at `ts`, finite.
    - `alignment` (T,): the best neurons' mean alignment at `ts`, finite.
    - `equilibrium`: stage 0's mass equilibrium alpha~*, one finite number.
    - `threshold`: a number in (0, 1) (default 0.1).
    - `eps`: a number in (0, 1) (default 0.1).

    **Returns:** a NumPy float array of shape (3,): the measured times of stages 0, 2 and
    >= 4.

    **Raises:** `ValueError` where `ts` is not a 1-D, non-empty, finite, nondecreasing grid
    from t >= 0, `alpha`, `q` or `alignment` does not have `ts`' shape or holds a non-finite
    entry, `equilibrium` is not finite, or `threshold` or `eps` is outside (0, 1).

    >>> ts = np.array([0.0, 1.0, 2.0, 3.0])
    >>> measured_stage_times(ts, np.array([1.0, 2.0, 3.0, 3.0]), np.array([1.0, 0.5, 0.05, 0.01]),
    ...                      np.array([0.1, 0.2, 0.5, 0.95]), equilibrium=3.0).tolist()
    [2.0, 2.0, 3.0]
    """
    ts = np.asarray(check_time_grid("ts", ts))
    for name, x in (("alpha", alpha), ("q", q), ("alignment", alignment)):
        check_shape(name, x, ts.shape)
    alpha, q, alignment = (
        np.asarray(check_finite(name, inexact(x, float, name)))
        for name, x in (("alpha", alpha), ("q", q), ("alignment", alignment))
    )
    equilibrium = float(check_finite("equilibrium", inexact(equilibrium, float, "equilibrium")))
    for name, v in (("threshold", threshold), ("eps", eps)):
        if not 0 < float(v) < 1:
            raise ValueError(f"`{name}` must lie in (0, 1), got {v}")

    def first(ok):
        hit = np.flatnonzero(ok)
        return float(ts[hit[0]]) if hit.size else float("inf")

    level = alpha[0] + (1.0 - threshold) * (equilibrium - alpha[0])
    return np.array([first(alpha > level), first(q < threshold), first(alignment > 1.0 - eps)])


class StageComparison(Readable):
    """Predicted against measured, per stage (0, 2 and >= 4; each field (3,)): `compare_stages`.

    - `predicted_time`, `measured_time`: `stage_times` and `measured_stage_times` (`inf` where
      a stage is not reached).
    - `predicted_plateau`: the loss after the stage (`stage_equilibria(activation=...).loss`);
      `loss_at_predicted_time`, `loss_at_measured_time`: the simulated loss there
      (interpolated linearly; NaN at an infinite time).
    - `predicted_mass`: the stage's mass equilibrium alpha~*.
    - `prediction`: the `StageTimesSolution` behind `predicted_time` (its `result`).
    """

    predicted_time: np.ndarray
    measured_time: np.ndarray
    predicted_plateau: np.ndarray
    loss_at_predicted_time: np.ndarray
    loss_at_measured_time: np.ndarray
    predicted_mass: np.ndarray
    prediction: StageTimesSolution


def compare_stages(
    ts,
    loss,
    alpha,
    q,
    alignment,
    *,
    activation: str,
    r: int,
    d: int,
    m: int,
    weight_decay,
    initial_alignment=None,
    threshold: float = 0.1,
    eps: float = 0.1,
) -> StageComparison:
    """A simulated staircase against its prediction: the stage times predicted by
    `stage_times` (started from `initial_alignment`, see there) and measured on the run by
    `measured_stage_times` (alpha~, q = beta_2 / beta_1 and the best neurons' mean alignment
    at the save times `ts`), with the predicted plateaus and masses and the run's `loss` at
    both times. NumPy out (a measurement).

    **Arguments:**

    - `ts` (T,): the run's save times, finite, >= 0 and nondecreasing.
    - `loss` (T,): the run's loss at `ts`, finite.
    - `alpha`, `q`, `alignment` (T,): the run's alpha~, q and best neurons' mean alignment at
      `ts` (as for `measured_stage_times`).
    - `activation`, `r`, `d`, `m`, `weight_decay`: the run's setting, as for `stage_times`
      (which is called with its default `alpha0` = 1, `horizon` and `points`).
    - `initial_alignment`: None (default) or the starts of the alignment stage, as for
      `stage_times`.
    - `threshold`, `eps`: numbers in (0, 1), for both `stage_times` and
      `measured_stage_times` (default 0.1 each).

    **Returns:** a `StageComparison` of NumPy arrays of shape (3,) (stages 0, 2 and >= 4):
    `predicted_time`, `measured_time`, `predicted_plateau`, `loss_at_predicted_time`,
    `loss_at_measured_time`, `predicted_mass`, and the `prediction` itself.

    **Raises:** `ValueError` on a bad `ts` or a `loss` not of its shape or not finite, and
    wherever `stage_equilibria`, `stage_times` or `measured_stage_times` refuse their
    arguments (including a `weight_decay` that puts stage 0's mass equilibrium at or below
    `stage_times`' default `alpha0` = 1).

    >>> ts = np.linspace(0.0, 40.0, 5)
    >>> cmp = compare_stages(ts, np.full(5, 0.1), np.linspace(1.0, 3.0, 5), np.full(5, 0.5),
    ...                      np.full(5, 0.3), activation="abs", r=2, d=10, m=8, weight_decay=0.1)
    >>> cmp.measured_time.tolist()[1:], bool(cmp.prediction.ok)
    ([inf, inf], True)
    """
    ts = np.asarray(check_time_grid("ts", ts), dtype=float)
    check_shape("loss", loss, ts.shape)
    loss = np.asarray(check_finite("loss", inexact(loss, float, "loss")))
    eq = stage_equilibria(activation=activation, r=r, d=d, weight_decay=weight_decay)
    prediction = stage_times(
        activation=activation, r=r, d=d, m=m, weight_decay=weight_decay,
        initial_alignment=initial_alignment, threshold=threshold, eps=eps,
    )  # fmt: skip
    predicted = np.array([float(prediction.t_0), float(prediction.t_2), float(prediction.t_4)])
    measured = measured_stage_times(
        ts, alpha, q, alignment, equilibrium=float(eq.mass[0]), threshold=threshold, eps=eps
    )

    def loss_at(t):
        return np.array([np.interp(v, ts, loss) if np.isfinite(v) else np.nan for v in t])

    return StageComparison(
        predicted_time=predicted,
        measured_time=measured,
        predicted_plateau=np.asarray(eq.loss, dtype=float),
        loss_at_predicted_time=loss_at(predicted),
        loss_at_measured_time=loss_at(measured),
        predicted_mass=np.asarray(eq.mass, dtype=float),
        prediction=prediction,
    )
