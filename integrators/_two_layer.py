"""The small-initialization two-layer flow on any inputs (`two_layer_flow`), kinks included.

The net h(x) = sum_j a_j relu(w_j . x) on inputs X (n, d), L = 1/(2n) sum_i (h(x_i) - y_i)^2,
under the rescaled flow d theta/dt = -tau grad L. Unlike `orthogonal_flow` the rows of X may
be correlated, of any norm, and n may exceed d.

**Data basis with the Gram coupling.** With pre-activations z_ji = <w_j, x_i>, G = X X^T and
r = h - y, the flow is exactly

    da_j/dt = -tau/n sum_i r_i relu(z_ji),      dz_j/dt = -tau/n a_j G (r * s_j),

where s_ji = 1[z_ji > 0]. The part of w_j outside the row space of X never moves, and
w_j(t) = w_j(0) + (z_j(t) - z_j(0)) X^+^T. Through G an inactive pre-activation (z_ji < 0)
moves too, so it can wake up: this is what makes correlated inputs differ from orthonormal
ones.

**Per-neuron log scale.** Each neuron is theta_j = (a_j, z_j) = exp(kappa_j) psi_j with the
gauge d kappa_j/dt = -tau <psi_j, g_j> / ||psi_j||^2 (g_j the neuron's gradient divided by
exp(kappa_j)), which keeps ||psi_j|| = 1: every component is O(1) whatever the neuron's size,
so the absolute + relative tolerance is relative to each neuron's size at alpha = 1e-30 as
at alpha = 1. This is the one rescaled two-layer field of `theory._rescaled` (gauge "norm",
with the Gram matrix), shared with the other two-layer flows.

**Kinks: event-located crossings and Filippov sliding.** The field is discontinuous where a
pre-activation crosses 0. Between kink events the activation pattern is held fixed (each
z_ji is active, inactive or *sliding*), which makes the field smooth, so the adaptive solver
never straddles a discontinuity: a diffrax event (a safeguarded Illinois regula falsi on the
dense output, `_TimeIllinois`, stopping at the bracket's end past the crossing) locates the
first z_ji to reach 0 (or the first sliding weight to reach 0 or 1; the weight is watched
without its pole, `_distance`; each entry in units of its distance at the segment's start,
`_event_condition`), the solve stops there, and the pattern is updated by the
one-sided fields. With d_+ and d_- the velocities of z_ji
with sample i counted active or inactive for neuron j:

- d_+ and d_- both > 0 (both < 0, or d_- <= 0 < d_+): the flow crosses (or stays out):
  sample i becomes active (inactive).
- d_- > 0 >= d_+: both sides push into the kink and the solution *slides* along it. This is
  the differential inclusion's Filippov solution, the limit of gradient descent as its step
  goes to 0 (GD chatters across the kink, a fraction sigma_ji of its steps on the active
  side). While sliding, z_ji = 0 exactly and the weights sigma_j on neuron j's sliding set
  S solve (G (r * s_j))_S = 0 with s_ji = sigma_ji on S; a sliding entry leaves the kink
  when its sigma_ji reaches 1 (it activates) or 0 (it falls inactive).

Entries of one neuron that reach the kink together interact through G: after the one-sided
classification the pattern is made consistent (a candidate the joint pattern moves against
its side goes onto the kink), and a sliding entry whose weight leaves [0, 1] is released one
per neuron at a time, the worst first (`_classify`). Where the sliding system is singular
(duplicated inputs), a least-squares weight is used. Entries within 1e-4 rtol of their kink
(in units of the neuron's size) that move towards it are classified at the same event: each
crosses early by its distance over its speed, and the flow's clock runs ahead by as much (at a
fixed 1e-9, the n = 256, c = 1e-6 flow ran 5e-6 of rescaled time ahead of gradient descent
extrapolated to step 0, whatever rtol). An entry that moves slower than `atol`
per unit time restarts `atol` off the kink rather than a hair (1e-13) off it: near a fitted
interpolator the residual is ~1e-9, and a hair's breadth was recrossed at once, a Zeno loop
of events at a fixed time. So was an event located on the near side of its crossing: the
weight that stopped the solve, still inside [0, 1] by ~1e-15, was classified as no change and
fired again; events therefore stop at the bracket's end past the crossing.

The sliding sets change only at events, and with them the blocks G_SS: their inverses are
formed only at an event that changes a sliding set (`_SlidingFactor`, each set gathered into a
block of 4, 16, 32, 64, 128 or 5n/8, or n up to n = 256; beyond, a set larger than the largest
compact block is solved at every evaluation), by blocks (`theory.numerics.spd_inverse`, mostly
matrix products; a probe sends a singular block, duplicated inputs, to least squares), or
updated by rank-one steps, neuron by neuron, where an event changes a few entries of a block of
64 or more (`_neuron_updates`), in place (`_in_place`: a lax.cond copies what it passes
through), and every evaluation applies them. The classification
evaluates the weights the same way, and its inverses are the next segment's: a weight that it
keeps inside [0, 1] by rounding and the next segment finds outside would be past its event,
which would then never fire (a silent wrong flow: the loss 8% off on Gaussian inputs at n = 64
when only the segments used the inverses).
The two still differ by rounding (the restart nudge after a classification moves the residual
by ~1e-13), so the guard is what holds: a segment that starts with an entry past its kink ends
where it starts, with an event there; if that repeats, the solve ends `kink_limited`.

The accuracy is the solver's tolerance away from the kinks and the root finder's (1e-13 in
time) at them: nothing is smoothed and no step is forced. Measured against gradient descent
(correlated inputs c = 0.1, n = 6, alpha = 1e-10, `tests/test_two_layer.py`, slow): GD at
two steps (4e-4 and 1e-4, off by 2.7e-2 and 6.6e-3) extrapolated to step 0 meets the flow to
9.8e-5 relative on the loss, through 48 kink events and 26 sliding entries. Each event
restarts the solver, from the mean step of the segment before it (events come at about that
spacing; a first step far longer brackets many crossings, and the root finder pays for each
one it bisects past); the number of events is `num_kink_events` in `stats` (and
`num_sliding_entries`). A solve that meets more than `max_kink_events` events before `ts[-1]`
stops at the first one beyond, with `result` = `RESULTS.kink_limited`.

**Which dynamics.** This is the flow of the float64 Gram matrix it is given. At small alpha,
rounding-level coupling (1e-16) is far above alpha and wakes frozen pre-activations (see
`orthogonal_flow`): where X X^T is within `gram_tol` of the identity it is therefore taken to
be the identity, so orthonormal inputs give exactly the orthonormal flow. With the coupling
kept (`gram_tol=0`), an entry that reached the kink and stopped there (d_- = 0 on exactly
orthonormal inputs) is woken by any coupling that pushes it up, once its own sample would
pull it on (d_+ > 0): the flow of that G, unlike gradient descent at a finite step, which
lands below the kink by its step times the velocity. On the orthonormal inputs of
`benchmarks.jump_times` at alpha = 1e-10 (n = 16), a rounding coupling of 7e-16 kept that
way changes the loss curve by 0.028.

Paper: *Mildly Overparameterized ReLU Networks on Orthogonal Data: Incremental Learning and
Implicit Bias* (NeurIPS 2026, arXiv:2605.27097).
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from dynamics import TwoLayerReLU
from theory import RESULTS, AbstractSolution
from theory.checks import (
    check_finite,
    check_flag,
    check_matrix,
    check_model,
    check_positive,
    check_positive_int,
    check_shape,
    check_solver_choice,
    check_solver_options,
    check_time_grid,
    check_time_scale,
    check_value,
    inexact,
)

from ._flow import check_initial_loss
from ._stepped import choose_method, fell_short, tried_steps
from ._two_layer_solve import _solve, stepped_fields


class TwoLayerFlowSolution(AbstractSolution):
    """Result of `two_layer_flow`.

    - `ts` (T,): save times; `loss` (T,): L there; `log_scale` (T, m): kappa_j, the log size
      ||(a_j, z_j)|| of every neuron (finite where exp(kappa) underflows).
    - `model`: the net at `ts[-1]`; `trajectory`: the net at every save time (leading axis T)
      when `save_trajectory=True`, else `None`.
    - `pattern` (m, n): the final activation pattern of z_ji: 0 inactive, 1 active,
      2 sliding (on the kink).
    - `time_scale`: tau; `gram` (n, n): the Gram matrix the flow used (after `gram_tol`).
    - `stats`: `num_steps`, `num_accepted_steps`, `num_rejected_steps` summed over the
      solves between kinks, `num_kink_events` and `num_sliding_entries`; with
      `method="steps"` the Euler steps of all levels, `num_levels`, `finest_step`,
      `error_estimate` and `extrapolation_order` (`integrators._stepped`; in the weights
      (a, W) where d < n, so its parameters' test is on (a, W), else on (a, Z = W X^T)).
    - `method`: which solve ran, `"events"` or `"steps"`; with `"steps"` the `pattern` is
      the sign of each z_ji (1 where > 0, else 0: time-stepping does not tell a sliding
      entry, which it chatters across, from an inactive one).
    - `result`: a `theory.RESULTS` item (`kink_limited` when `max_kink_events` ran out).

    >>> X = jnp.array([[1.0, 0.0], [0.6, 0.8]])  # correlated: <x_1, x_2> = 0.6
    >>> model = TwoLayerReLU(jnp.array([1e-3]), 1e-3 * jnp.array([[0.8, 0.6]]))
    >>> sol = two_layer_flow(X, jnp.array([1.0, 1.0]), model, jnp.linspace(0.0, 6.0, 4),
    ...                      time_scale=jnp.log(1e3))
    >>> bool(sol.ok), bool(sol.loss[-1] < 1e-8), sol.pattern.tolist()
    (True, True, [[1, 1]])
    """

    result: RESULTS
    stats: dict
    ts: Float[Array, " T"]
    loss: Float[Array, " T"]
    log_scale: Float[Array, "T m"]
    model: TwoLayerReLU
    trajectory: TwoLayerReLU | None
    pattern: Int[Array, "m n"]
    time_scale: Float[Array, ""]
    gram: Float[Array, "n n"]
    method: str = eqx.field(static=True, default="events")


def two_layer_flow(
    X: Float[Array, "n d"],
    y: Float[Array, " n"],
    model: TwoLayerReLU,
    ts: Float[Array, " T"],
    *,
    time_scale=1.0,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int = 100_000,
    max_kink_events: int | None = None,
    gram_tol: float | None = None,
    save_trajectory: bool = False,
    solver: diffrax.AbstractAdaptiveSolver | None = None,
    method: str = "auto",
    throw: bool = False,
) -> TwoLayerFlowSolution:
    """The rescaled flow d theta/dt = -tau grad L of the two-layer ReLU net on any inputs.

    h(x) = sum_j a_j relu(w_j . x) (relu'(0) = 0), L = 1/(2n) sum_i (h(x_i) - y_i)^2, from
    `model` at t = 0; integrated in the data basis with the Gram coupling, a per-neuron log
    scale and event-located kinks with Filippov sliding (module docstring). On orthonormal X
    it is the flow of `orthogonal_flow`; on correlated X it reaches alpha = 1e-30 (and any
    alpha whose alpha**2 float64 holds) with tolerances relative to each neuron's size.

    **Arguments:**

    - `model`: a `TwoLayerReLU` (m neurons, input dimension d); `X` (n, d): inputs, any rows
      with a finite Gram matrix; `y` (n,): labels.
    - `ts` (T,): increasing save times; the flow starts from `model` at `ts[0]`, as every
      flow does; `time_scale`: tau > 0 (log(1/alpha)).
    - `rtol`, `atol`, `max_steps`: PI step control (as the other flows) and the step budget
      of each solve between kinks; `solver`: any adaptive diffrax solver (default Dopri5).
    - `max_kink_events`: how many kink events (crossings, sliding entries and exits) the solve
      may process (default max(4096, 4 m n): they grow with the m n entries z_ji); it stops
      at the next one with `RESULTS.kink_limited`.
    - `gram_tol`: where max |X X^T - I| <= gram_tol the Gram matrix is taken to be I
      exactly (default 64 n eps of the dtype: rounding, not data); 0 keeps X X^T as
      computed.
    - `save_trajectory`: also return the net at every save time. `throw=True` raises on failure.
    - `method`: `"events"`, the event-driven solve above; `"steps"`, explicit Euler at
      halved steps, extrapolated to step 0 until two extrapolants agree to rtol and atol
      (`integrators._stepped`; in the weights (a, W) on X where d < n, a step then costing
      O(m n d), else in the data basis; first order through the kinks, so cheap at rtol
      1e-3 and dear at 1e-8; no `solver` or `max_kink_events`; `max_steps` caps one level's
      Euler steps in a save interval); `"auto"` (the default): `"steps"` where m n >= 4096
      and rtol >= 1e-5 and neither of those options is given, else `"events"`
      (`gradient_flow`'s rule, with its fallback to the events where the steps fall
      short): at the default rtol = 1e-8 the events. On Gaussian inputs (d = 32, m = 40,
      alpha = 1e-10, t <= 30, 601 save times; `benchmarks.two_layer_vs_gd --large`) the
      events took 31 s at n = 128 (6,830 kink events) and 164 s at n = 256 (13,312),
      3.3e-5 and 8.8e-6 off gradient descent extrapolated; the steps at rtol 3e-2 took
      2.5 s and 2.7 s for 2.5e-4 and 4.3e-4 (at 1e-2, 4.9 s and 5.4 s), where gradient
      descent takes 2.8 s and 2.4 s for 1e-3 and two to four times the steps' time for
      their accuracy. On small problems the
      events win: at n = 12, m = 8 they took 0.1 s where the steps took 18 s at rtol 1e-3
      (its escape is steep).

    **Returns:** a `TwoLayerFlowSolution`. `jax.jit` and `jax.vmap` over models and data
    work (a batch runs as many kink events as its slowest member).

    Two correlated samples with labels of opposite sign: one neuron fits one sample while the
    other sample's pre-activation slides on its kink (GD chatters there):

    >>> X = jnp.array([[1.0, 0.0], [0.6, 0.8]])
    >>> model = TwoLayerReLU(jnp.array([1e-4]), 1e-4 * jnp.array([[0.6, -0.8]]))
    >>> sol = two_layer_flow(X, jnp.array([1.0, -1.0]), model, jnp.linspace(0.0, 6.0, 4),
    ...                      time_scale=jnp.log(1e4))
    >>> bool(sol.ok), sol.pattern.tolist(), round(float(sol.loss[-1]), 4)
    (True, [[1, 2]], 0.25)
    """
    X, y, n, dtype = _checked_data(X, y, model)
    ts = check_time_grid("ts", ts, dtype)
    tau = check_time_scale(time_scale, dtype)
    rtol, atol, max_steps = check_solver_options(rtol, atol, max_steps)
    check_solver_choice(solver)
    explicit_events = max_kink_events  # given, not defaulted: an option of the events only
    if max_kink_events is None:
        # the events grow with the entries z_ji, about 0.7 per entry at n = 64 and 256 (a
        # fixed 4,096 ran out at t = 0.47 of 77 at n = 256, and before the drop at n = 128)
        max_kink_events = max(4096, 4 * model.width * n)
    max_kink_events = check_positive_int("max_kink_events", max_kink_events)
    save_trajectory = check_flag("save_trajectory", save_trajectory)
    if gram_tol is None:
        gram_tol = 64 * n * float(jnp.finfo(dtype).eps)
    gram_tol = float(check_positive("gram_tol", gram_tol, allow_zero=True, scalar=True))
    model = TwoLayerReLU(check_finite("model.a", model.a), check_finite("model.W", model.W))
    X = check_initial_loss(model, X, y)
    given = {"solver": solver, "max_kink_events": explicit_events}
    short = None  # the steps' solution where "auto" tried them and they fell short
    if choose_method(method, given, rtol, lambda: model.width * n, model.a) == "steps":
        fields = stepped_fields(model, X, y, ts, tau, gram_tol, (rtol, atol, max_steps),
                                save_trajectory)  # fmt: skip
        short = TwoLayerFlowSolution(**fields, method="steps")
        if method == "steps" or not fell_short(short):
            return short.raise_if_failed(throw)
    solver = diffrax.Dopri5() if solver is None else solver
    options = (rtol, atol, max_steps, save_trajectory)
    limits = (jnp.asarray(max_kink_events), jnp.asarray(gram_tol, dtype))
    fields = _solve(model, X, y, ts, tau, limits, solver, options)
    return tried_steps(TwoLayerFlowSolution(**fields), short).raise_if_failed(throw)


def _checked_data(X, y, model):
    """`two_layer_flow`'s model, inputs and labels checked (shapes, float64, finite, a Gram
    matrix and a loss that neither overflow nor underflow): X and y as float64, n, dtype."""
    check_model("model", model, TwoLayerReLU)
    if not isinstance(model, TwoLayerReLU):
        raise ValueError(f"`model` must be a TwoLayerReLU, got {type(model).__name__}")
    check_shape("X", X, (None, None))
    X = check_matrix("X", X)
    n, d = jnp.shape(X)
    if n == 0:
        raise ValueError("`X` must hold at least one sample, got none")
    check_shape("y", y, (n,))
    check_shape("model.W", model.W, (None, d))
    if model.width == 0:
        raise ValueError("`model` must have at least one neuron, got m = 0")
    dtype = jnp.result_type(model.a.dtype, jnp.asarray(X).dtype, float)
    if jnp.issubdtype(jnp.asarray(X).dtype, jnp.complexfloating) or dtype != jnp.float64:
        fix = (
            "convert them, e.g. `jnp.asarray(X, jnp.float64)`"
            if jax.config.jax_enable_x64
            else "enable `jax.config.update('jax_enable_x64', True)`"
        )
        raise ValueError(
            f"`X` and `model` must be real float64 (kinks are located to 1e-13 in time: {fix}), "
            f"got {jnp.dtype(dtype).name}"
        )
    X, y = (
        check_finite("X", inexact(X, dtype, name="X")),
        check_finite("y", inexact(y, dtype, name="y")),
    )
    gram = X @ X.T
    X = check_value(
        X,
        jnp.all(jnp.isfinite(gram)),
        "`X` X^T overflows (inputs near 1e154 or larger): scale the inputs",
    )
    # products below the smallest normal number are flushed to 0 inside XLA (X x 1e-160 was
    # ok and 23% off the unscaled flow): the Gram's scale must stay clear of them
    floor = float(jnp.finfo(dtype).tiny / jnp.finfo(dtype).eps)
    X = check_value(
        X,
        jnp.max(jnp.abs(gram)) >= floor,
        f"`X` X^T underflows (its largest entry is below {floor:.0e}: inputs near 1e-146 or "
        "smaller, whose products XLA flushes to 0): scale the inputs",
    )
    y = check_value(
        y,
        jnp.isfinite(jnp.sum(y * y)),
        "`y` overflows the loss (labels near 1e154 or larger: sum y^2 is inf): scale the labels",
    )
    return X, y, n, dtype
