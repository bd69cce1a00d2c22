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
first z_ji to reach 0 (or the first sliding weight to reach 0 or 1), the solve stops there,
and the pattern is updated by the one-sided fields. With d_+ and d_- the velocities of z_ji
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
(duplicated inputs), a least-squares weight is used. An entry that moves slower than `atol`
per unit time restarts `atol` off the kink rather than a hair (1e-13) off it: near a fitted
interpolator the residual is ~1e-9, and a hair's breadth was recrossed at once, a Zeno loop
of events at a fixed time. So was an event located on the near side of its crossing: the
weight that stopped the solve, still inside [0, 1] by ~1e-15, was classified as no change and
fired again; events therefore stop at the bracket's end past the crossing.

The accuracy is the solver's tolerance away from the kinks and the root finder's (1e-13 in
time) at them: nothing is smoothed and no step is forced. Measured against gradient descent
(correlated inputs c = 0.1, n = 6, alpha = 1e-10, `tests/test_two_layer.py`, slow): GD at
two steps (4e-4 and 1e-4, off by 2.7e-2 and 6.6e-3) extrapolated to step 0 meets the flow to
9.8e-5 relative on the loss, through 48 kink events and 26 sliding entries. Each event
restarts the solver; the number of events is `num_kink_events` in `stats` (and
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

import functools

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Array, Float, Int

from dynamics import TwoLayerReLU
from theory import RESULTS, AbstractSolution, name_nonfinite, rescaled
from theory.checks import (
    check_finite,
    check_flag,
    check_matrix,
    check_model,
    check_positive,
    check_positive_int,
    check_shape,
    check_solver_options,
    check_time_grid,
    check_time_scale,
    check_value,
    inexact,
)
from theory.numerics import default_controller, diffeqsolve

INACTIVE, ACTIVE, SLIDING = 0, 1, 2
_KINK_TOL = 1e-9  # pre-activations (in units of the neuron's size) treated as on the kink
_NUDGE = 1e-13  # where a classified entry restarts, on its side of the kink
_RELEASE_ROUNDS = 6  # consistency and release rounds after a kink event
_COMPACT = (4, 16)  # sizes of the small systems the sliding sets are gathered into


class _IllinoisState(eqx.Module):
    lower: Array
    upper: Array
    f_lower: Array
    f_upper: Array
    kept: Array  # which end the last step kept: -1 lower, +1 upper, 0 neither
    reference: Array  # the bracket's width when it last halved
    stalled: Array  # steps since then
    converged: Array


class _TimeIllinois(optx.AbstractRootFinder):
    """The time of a kink event: regula falsi with the Illinois modification, safeguarded by
    bisection, on a bracket [lower, upper] with f(lower) > 0 >= f(upper) (the event
    condition, the distance of the nearest entry from its kink, falls through 0 in the step
    that triggered the event). Where the distance is smooth in time this takes a few
    evaluations where bisection to 1e-13 took about 40; a bracket that has not halved in two
    steps is bisected (a kinked condition, flat then falling, stalls regula falsi even with
    the Illinois rule), so it takes at most about three times bisection's. It stops on the
    bracket's width (`rtol`, `atol`) or an exact zero: the condition can be noisy near a
    fitted interpolator (the sliding weights are ratios of residuals of size 1e-13), where a
    test on |f| never holds."""

    rtol: float
    atol: float
    norm = staticmethod(jnp.abs)

    def init(self, fn, y, args, options, f_struct, aux_struct, tags):
        lower = jnp.asarray(options["lower"], f_struct.dtype)
        upper = jnp.asarray(options["upper"], f_struct.dtype)
        f_lower, _ = fn(lower, args)
        nan = jnp.asarray(jnp.nan, f_struct.dtype)
        zero = jnp.asarray(0)
        return _IllinoisState(
            lower, upper, f_lower, nan, zero, upper - lower, zero, jnp.asarray(False)
        )

    def _first(self, state):
        return jnp.isnan(state.f_upper)

    def step(self, fn, y, args, options, state, tags):
        del options, tags
        f, aux = fn(y, args)
        # the first call is at `upper` (diffrax's y0): it only fills in f(upper)
        first = self._first(state)
        past = f <= 0.0  # y is at or past the root: it becomes the upper end
        lower = jnp.where(first | past, state.lower, y)
        upper = jnp.where(first | past, y, state.upper)
        f_lower = jnp.where(first | past, state.f_lower, f)
        f_upper = jnp.where(first | past, f, state.f_upper)
        kept = jnp.where(first, 0, jnp.where(past, -1, 1))
        # Illinois: an end kept twice in a row has its value halved
        f_lower = jnp.where(~first & (kept == -1) & (state.kept == -1), 0.5 * f_lower, f_lower)
        f_upper = jnp.where(~first & (kept == 1) & (state.kept == 1), 0.5 * f_upper, f_upper)
        width = upper - lower
        denom = f_lower - f_upper
        secant = lower + width * f_lower / jnp.where(denom > 0, denom, 1.0)
        # at least half the stopping width inside the bracket: a root that sits within it of
        # an end is then bracketed by the next evaluation
        gap = jnp.minimum(0.5 * (self.atol + self.rtol * jnp.abs(upper)), 0.25 * width)
        secant = jnp.clip(secant, lower + gap, upper - gap)
        # a bracket that has not halved in two steps is bisected (a kinked condition, flat
        # then falling, stalls regula falsi even with the Illinois rule)
        halved = width <= 0.5 * state.reference
        reference = jnp.where(halved, width, state.reference)
        stalled = jnp.where(halved, 0, state.stalled + 1)
        use_secant = (denom > 0) & jnp.isfinite(secant) & (stalled < 2)
        new_y = jnp.where(use_secant, secant, lower + 0.5 * width)
        exact = ~first & (f == 0.0)
        new_y = jnp.where(exact, y, new_y)
        narrow = width < self.atol + self.rtol * jnp.abs(upper)
        state = _IllinoisState(
            lower, upper, f_lower, f_upper, kept, reference, stalled, exact | narrow
        )
        return new_y, state, aux

    def terminate(self, fn, y, args, options, state, tags):
        del fn, y, args, options, tags
        return state.converged, optx.RESULTS.successful

    def postprocess(self, fn, y, aux, args, options, state, tags, result):
        # the end at or past the root: the entry that stopped the solve has reached its kink
        # (a weight on the boundary of [0, 1] or past it), so the event is processed as one
        del fn, y, args, options, tags, result
        return state.upper, aux, {}


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
      solves between kinks, `num_kink_events` and `num_sliding_entries`.
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


class _Frame(eqx.Module):
    G: Float[Array, "n n"]
    y: Float[Array, " n"]
    tau: Float[Array, ""]
    mode: Int[Array, "m n"]
    slow: Float[Array, ""]  # below this speed an entry restarts further off the kink


def _residual(kappa, psi, frame):
    act = jnp.where(frame.mode == ACTIVE, psi[:, 1:], 0.0)
    return act, rescaled.residual(kappa, psi[:, 0], act, frame.y)


def _weights_solve(M, b):
    """sigma from M sigma = b per neuron (batched), by least squares of a slightly regularized
    system where M is singular (duplicated inputs sliding together: the weights are not
    unique)."""
    sigma = jnp.linalg.solve(M, b[..., None])[..., 0]

    def least_squares():
        eye = jnp.eye(M.shape[-1], dtype=M.dtype)
        MtM = jnp.einsum("jki,jkl->jil", M, M)
        ridge = 1e-14 * jnp.max(jnp.abs(MtM), axis=(1, 2), keepdims=True) * eye[None]
        rhs = jnp.einsum("jki,jk->ji", M, b)
        return jnp.linalg.solve(MtM + ridge, rhs[..., None])[..., 0]

    good = jnp.all(jnp.isfinite(sigma), axis=1, keepdims=True)
    return jax.lax.cond(
        jnp.all(good), lambda: sigma, lambda: jnp.where(good, sigma, least_squares())
    )


def _sliding_weights(r, frame):
    """sigma (m, n) on the sliding entries: (G (r * s_j))_S = 0 for each neuron's set S.

    Each neuron's system is as large as its sliding set, rarely more than a few entries: the
    sets are gathered into the smallest of 1 x 1 (solved by a division), 4 x 4 and 16 x 16
    systems that holds the largest (the full n x n ones beyond), since this solve runs at
    every field evaluation: with n = 48 samples in d = 24 dimensions neurons slide on 3 to
    9 samples at once, and the full systems made the flow 5x slower."""
    S = frame.mode == SLIDING
    n = r.shape[0]

    def full(b_full):
        eye = jnp.eye(n, dtype=r.dtype)
        both = S[:, :, None] & S[:, None, :]
        M = jnp.where(both, frame.G[None] * r[None, None, :], eye[None])
        return _weights_solve(M, jnp.where(S, b_full, 0.0))

    def single(b_full):
        # one sliding entry per neuron: (G (r * s_j))_i = 0 gives sigma directly
        den = jnp.diag(frame.G)[None, :] * r[None, :]
        return jnp.where(S, b_full / jnp.where(S, den, 1.0), 0.0)

    def compact(b_full, k):
        _, idx = jax.lax.top_k(jnp.where(S, n - jnp.arange(n), 0), k)  # sliding ones first
        valid = jnp.take_along_axis(S, idx, axis=1)
        both = valid[:, :, None] & valid[:, None, :]
        eye = jnp.eye(k, dtype=r.dtype)
        M = jnp.where(both, frame.G[idx[:, :, None], idx[:, None, :]] * r[idx][:, None, :], eye)
        b = jnp.where(valid, jnp.take_along_axis(b_full, idx, axis=1), 0.0)
        small = jnp.where(valid, _weights_solve(M, b), 0.0)
        rows = jnp.arange(S.shape[0])[:, None]
        return jnp.zeros(S.shape, r.dtype).at[rows, idx].add(small)

    def solve():
        # b_i = -(G (r * s_j))_i over the active entries, for i in S
        b_full = -(jnp.where(frame.mode == ACTIVE, r[None, :], 0.0) @ frame.G)
        most = jnp.max(jnp.sum(S, axis=1))
        sizes = [k for k in _COMPACT if k < n]
        branches = [single] + [functools.partial(compact, k=k) for k in sizes] + [full]
        branch = jnp.searchsorted(jnp.asarray([1] + sizes), most)
        sigma = jax.lax.switch(branch, branches, b_full)
        # still not finite (a sliding sample fitted exactly, r_i = 0): release the entry
        return jnp.where(S, jnp.where(jnp.isfinite(sigma), sigma, -1.0), 0.0)

    return jax.lax.cond(jnp.any(S), solve, lambda: jnp.zeros_like(r, shape=S.shape))


def _slopes(r, frame):
    """The activation slopes s_ji (1 active, 0 inactive, the Filippov weight sigma_ji on the
    kink) and sigma itself."""
    sigma = _sliding_weights(r, frame)
    s = jnp.where(frame.mode == ACTIVE, 1.0, jnp.where(frame.mode == SLIDING, sigma, 0.0))
    return s, sigma


def _field_parts(kappa, psi, frame):
    act, r = _residual(kappa, psi, frame)
    s, sigma = _slopes(r, frame)
    g_a, g_z = rescaled.gradients(psi[:, 0], act, s, r, frame.G)
    return psi[:, 0], psi[:, 1:], r, sigma, g_a, g_z


def _velocity(kappa, psi, frame):
    """dz/dt of every entry in units of its neuron's size (psi), on the kink (z = 0)."""
    return -frame.tau * _field_parts(kappa, psi, frame)[5]


def _vector_field(t, state, frame):
    """The shared rescaled field (`theory._rescaled`, gauge "norm") with the Gram coupling:
    every entry moves but the sliding ones, held on the kink."""
    kappa, psi = state
    act, r = _residual(kappa, psi, frame)
    s, _ = _slopes(r, frame)
    dkappa, dpa, dpz = rescaled.field(
        kappa,
        psi[:, 0],
        psi[:, 1:],
        frame.y,
        frame.tau,
        act=act,
        slope=s,
        moving=frame.mode != SLIDING,
        gram=frame.G,
        r=r,
    )
    return dkappa, jnp.concatenate([dpa[:, None], dpz], axis=1)


def _distance(state, frame):
    """How far each entry is from changing its pattern (> 0 inside): z for active entries,
    -z for inactive ones, min(sigma, 1 - sigma) for sliding ones."""
    kappa, psi = state
    sigma = _sliding_weights(_residual(kappa, psi, frame)[1], frame)
    return _distance_of(frame.mode, psi[:, 1:], sigma)


def _distance_of(mode, pz, sigma):
    return jnp.where(
        mode == ACTIVE, pz, jnp.where(mode == INACTIVE, -pz, jnp.minimum(sigma, 1.0 - sigma))
    )


def _event_condition(t, y, args, **kwargs):
    return jnp.min(_distance(y, args))


def _classify(state, frame, candidates):
    """New pattern and state after a kink event.

    `candidates` (m, n) are put on the kink (z = 0) and classified by their one-sided
    velocities d_- and d_+ (the others held as they are). Candidates of one neuron interact
    through G, so the pattern is then made consistent: a candidate set active that the joint
    pattern moves down, or inactive that it moves up, goes onto the kink (sliding); and a
    sliding entry whose weight left [0, 1] is released, one per neuron per round (the worst
    first: the others' weights change once it is gone), strictly outside only (a weight
    just inside stays until it crosses; releasing it early lets it fall straight back, a Zeno
    loop of events). Classified entries restart a hair off the kink on their side, further
    off (by `slow`) where they move slower than `slow` (near a fitted interpolator, where
    the residual is ~1e-9 and a hair's breadth would be recrossed at once: a Zeno loop)."""
    kappa, psi = state
    n = frame.y.shape[0]
    psi = psi.at[:, 1:].set(jnp.where(candidates, 0.0, psi[:, 1:]))
    mode = jnp.where(candidates & (frame.mode == SLIDING), INACTIVE, frame.mode)

    def with_mode(mode):
        return eqx.tree_at(lambda f: f.mode, frame, mode)

    pa, _, r, sigma, _, _ = _field_parts(kappa, psi, with_mode(mode))
    s = jnp.where(mode == ACTIVE, 1.0, jnp.where(mode == SLIDING, sigma, 0.0))
    s_minus = jnp.where(candidates, 0.0, s)  # each candidate counted inactive ...
    d_minus = -pa[:, None] * ((s_minus * r[None, :]) @ frame.G) / n
    d_plus = d_minus - pa[:, None] * (jnp.diag(frame.G) * r)[None, :] / n  # ... and active
    new = jnp.where(
        (d_minus > 0) & (d_plus > 0),
        ACTIVE,
        jnp.where((d_minus > 0) & (d_plus <= 0), SLIDING, INACTIVE),
    )
    was_sliding = frame.mode == SLIDING
    mode = jnp.where(candidates, new, mode)

    def round_(carry):
        mode, released, _, k = carry
        vel = _velocity(kappa, psi, with_mode(mode))
        wrong = candidates & (((mode == ACTIVE) & (vel < 0)) | ((mode == INACTIVE) & (vel > 0)))
        new = jnp.where(wrong, SLIDING, mode)
        here = with_mode(new)
        sigma = _sliding_weights(_residual(kappa, psi, here)[1], here)
        violation = jnp.where(new == SLIDING, jnp.maximum(sigma - 1.0, -sigma), -jnp.inf)
        worst = jnp.arange(n)[None, :] == jnp.argmax(violation, axis=1)[:, None]
        out = worst & (violation > 0)
        up = out & (sigma > 1.0)
        down = out & (sigma < 0.0)
        new = jnp.where(up, ACTIVE, jnp.where(down, INACTIVE, new))
        return new, released | up | down, jnp.any(new != mode), k + 1

    # until the pattern stops changing (one round for a lone entry), at most _RELEASE_ROUNDS
    mode, released, _, _ = jax.lax.while_loop(
        lambda c: c[2] & (c[3] < _RELEASE_ROUNDS),
        round_,
        (mode, jnp.zeros_like(candidates), jnp.asarray(True), 0),
    )
    entered = candidates & (mode == SLIDING) & ~was_sliding
    moved = candidates | released
    speed = frame.tau * jnp.maximum(jnp.abs(d_minus), jnp.abs(d_plus))
    gap = jnp.where(speed < frame.slow, frame.slow, _NUDGE)
    side = jnp.where(mode == ACTIVE, gap, jnp.where(mode == INACTIVE, -gap, 0.0))
    psi = psi.at[:, 1:].set(jnp.where(moved, side, psi[:, 1:]))
    return (kappa, psi), mode, jnp.sum(entered)


def _initial(model: TwoLayerReLU, X):
    Z = model.W @ X.T
    theta = jnp.concatenate([model.a[:, None], Z], axis=1)
    kappa, psi = rescaled.log_polar(theta, theta)
    mode = jnp.where(Z > 0, ACTIVE, INACTIVE)
    return (kappa, psi), mode, Z


def _to_model(kappa, psi, model0: TwoLayerReLU, Z0, X_pinv):
    size = jnp.exp(kappa)[:, None]
    Z = size * psi[:, 1:]
    return TwoLayerReLU(size[:, 0] * psi[:, 0], model0.W + (Z - Z0) @ X_pinv.T)


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
    max_kink_events: int = 4096,
    gram_tol: float | None = None,
    save_trajectory: bool = False,
    solver: diffrax.AbstractAdaptiveSolver | None = None,
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
      may process; it stops at the next one with `RESULTS.kink_limited`.
    - `gram_tol`: where max |X X^T - I| <= gram_tol the Gram matrix is taken to be I
      exactly (default 64 n eps of the dtype: rounding, not data); 0 keeps X X^T as
      computed.
    - `save_trajectory`: also return the net at every save time. `throw=True` raises on failure.

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
    X = check_value(
        X,
        jnp.all(jnp.isfinite(X @ X.T)),
        "`X` X^T overflows (inputs near 1e154 or larger): scale the inputs",
    )
    ts = check_time_grid("ts", ts, dtype)
    tau = check_time_scale(time_scale, dtype)
    max_steps = check_solver_options(rtol, atol, max_steps)
    max_kink_events = check_positive_int("max_kink_events", max_kink_events)
    save_trajectory = check_flag("save_trajectory", save_trajectory)
    if gram_tol is None:
        gram_tol = 64 * n * float(jnp.finfo(dtype).eps)
    gram_tol = float(check_positive("gram_tol", gram_tol, allow_zero=True, scalar=True))
    model = TwoLayerReLU(check_finite("model.a", model.a), check_finite("model.W", model.W))
    solver = diffrax.Dopri5() if solver is None else solver
    options = (rtol, atol, max_steps, save_trajectory)
    limits = (jnp.asarray(max_kink_events), jnp.asarray(gram_tol, dtype))
    return _solve(model, X, y, ts, tau, limits, solver, options).raise_if_failed(throw)


@eqx.filter_jit
def _solve(model, X, y, ts, tau, limits, solver, options) -> TwoLayerFlowSolution:
    """The flow itself, compiled once per shape and option set (the checks are done)."""
    rtol, atol, max_steps, save_trajectory = options
    max_kink_events, gram_tol = limits
    n = X.shape[0]
    dtype = X.dtype
    m = model.width
    G = X @ X.T
    eye = jnp.eye(n, dtype=dtype)
    # orthonormal to rounding: exactly the orthonormal flow (relative to the Gram's scale)
    G = jnp.where(jnp.max(jnp.abs(G - eye)) <= gram_tol, eye, G)
    X_pinv = jnp.linalg.pinv(X)
    state0, mode0, Z0 = _initial(model, X)
    t_end = ts[-1]
    T = ts.shape[0]

    def save(t, state, frame):
        kappa, psi = state
        r = _residual(kappa, psi, frame)[1]
        return 0.5 * jnp.mean(r * r), kappa, psi

    slow = jnp.asarray(max(atol, 1e-10), dtype)

    def segment(t0, state, mode):
        frame = _Frame(G, y, tau, mode, slow)
        sol = diffeqsolve(
            diffrax.ODETerm(_vector_field),
            solver,
            t0=t0,
            t1=t_end,
            dt0=None,
            y0=state,
            args=frame,
            saveat=diffrax.SaveAt(
                subs=[
                    diffrax.SubSaveAt(ts=jnp.clip(ts, t0, t_end), fn=save),
                    diffrax.SubSaveAt(t1=True),
                ]
            ),
            stepsize_controller=default_controller(rtol, atol),
            event=diffrax.Event(
                _event_condition, root_finder=_TimeIllinois(rtol=1e-13, atol=1e-13)
            ),
            max_steps=max_steps,
            throw=False,
            grid_checked=True,
        )
        saved, final = sol.ys
        final = jax.tree_util.tree_map(lambda leaf: leaf[-1], final)
        stopped = jnp.asarray(sol.event_mask)
        result = RESULTS.where(
            sol.result == diffrax.RESULTS.event_occurred,
            RESULTS.successful,
            RESULTS.promote(sol.result),
        )
        result = name_nonfinite(result, final, _vector_field(sol.ts[1][-1], final, frame))
        return sol.ts[1][-1], final, stopped, saved, result, sol.stats

    def new_pattern(state, mode):
        frame = _Frame(G, y, tau, mode, slow)
        _, pz, _, sigma, _, g_z = _field_parts(*state, frame)  # one solve for sigma
        dist = _distance_of(mode, pz, sigma)
        first = jnp.arange(dist.size).reshape(dist.shape) == jnp.argmin(dist)
        # besides the entry that stopped the solve: entries on the wrong side, and entries
        # within a hair of the kink that move towards it (not those moving away from it)
        vel = -tau * g_z  # `_velocity`
        towards = ((mode == ACTIVE) & (vel < 0)) | ((mode == INACTIVE) & (vel > 0))
        near = (dist <= _KINK_TOL) & (towards | (mode == SLIDING))
        return _classify(state, frame, first | near | (dist < 0))

    # at t = 0 entries exactly on the kink are classified like any other kink event
    state, mode, entries0 = _classify(state0, _Frame(G, y, tau, mode0, slow), state0[1][:, 1:] == 0)
    blank = (
        jnp.full((T,), jnp.inf, dtype),
        jnp.full((T, m), jnp.inf, dtype),
        jnp.full((T, m, n + 1), jnp.inf, dtype),
    )
    zero = jnp.zeros((), jnp.int32)
    carry0 = dict(
        t=ts[0], state=state, mode=mode, saved=blank, filled=jnp.zeros((T,), bool),
        result=RESULTS.successful, events=zero, entries=entries0.astype(jnp.int32),
        steps=zero, accepted=zero, rejected=zero, done=jnp.asarray(False),
    )  # fmt: skip

    def cond(c):
        return ~c["done"]

    def body(c):
        t1, final, stopped, saved, result, stats = segment(c["t"], c["state"], c["mode"])
        take = (ts >= c["t"]) & (ts <= t1) & ~c["filled"]
        merged = jax.tree_util.tree_map(
            lambda new, old: jnp.where(take.reshape((T,) + (1,) * (new.ndim - 1)), new, old),
            saved,
            c["saved"],
        )
        state, mode, entered = new_pattern(final, c["mode"])
        ok = result == RESULTS.successful
        # an event beyond the budget is not processed: the solve stops at it
        limited = stopped & ok & (c["events"] >= max_kink_events)
        keep = stopped & ok & ~limited
        events = c["events"] + keep.astype(jnp.int32)
        result = RESULTS.where(limited, RESULTS.kink_limited, result)
        return dict(
            t=t1,
            state=jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), state, final),
            mode=jnp.where(keep, mode, c["mode"]),
            saved=merged,
            filled=c["filled"] | take,
            result=result,
            events=events,
            entries=c["entries"] + jnp.where(keep, entered, 0).astype(jnp.int32),
            steps=c["steps"] + stats["num_steps"],
            accepted=c["accepted"] + stats["num_accepted_steps"],
            rejected=c["rejected"] + stats["num_rejected_steps"],
            done=~keep | limited | (t1 >= t_end),
        )

    c = jax.lax.while_loop(cond, body, carry0)
    loss, log_scale, psis = c["saved"]
    kappa, psi = c["state"]
    trajectory = None
    if save_trajectory:
        trajectory = jax.vmap(lambda k, p: _to_model(k, p, model, Z0, X_pinv))(log_scale, psis)
    return TwoLayerFlowSolution(
        ts=ts,
        loss=loss,
        log_scale=log_scale,
        model=_to_model(kappa, psi, model, Z0, X_pinv),
        trajectory=trajectory,
        pattern=c["mode"],
        time_scale=tau,
        gram=G,
        result=c["result"],
        stats={
            "num_steps": c["steps"],
            "num_accepted_steps": c["accepted"],
            "num_rejected_steps": c["rejected"],
            "num_kink_events": c["events"],
            "num_sliding_entries": c["entries"],
        },
    )
