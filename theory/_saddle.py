"""Algorithm 1 of the orthogonal-data paper: the saddle-to-saddle jump process.

Derivation (orthonormal x_i, so the data basis decouples the samples). Write v_ji = <w_j, x_i>
and r_i = h(x_i) - y_i. The rescaled flow d theta/dt = -log(1/alpha) grad L reads

    dv_ji/dt = -log(1/alpha) a_j r_i 1[v_ji > 0] / n,
    da_j/dt  = -log(1/alpha) sum_i r_i relu(v_ji) / n.

A component with v_ji <= 0 never moves again, so neuron j can only fit the samples of its
*support* {i : <u_j, x_i> > 0, s_j y_i > 0} (s_j = sign a_j is conserved). While the unfitted
samples have r_i = -y_i, (|a_j|, v_j) on its support grows like the linear system with
matrix log(1/alpha) [[0, g^T], [g, 0]], g_i = |y_i| / n: its norm grows as
alpha^(-ell_j) with the exponent ell_j(0) = -1 and

    d ell_j / dt = ||D_j^(k)||,   D_j^(k) = (1/n) (|y_i|)_{i in support_j, i unfitted at saddle k}.

The first neuron whose exponent reaches 0 jumps: it fits every unfitted sample of its support
S at once, reaching a_j v_ji = y_i and, by balancedness, a_j^2 = ||v_j||^2 = ||y_S||_2, i.e.
a_j = s_j sqrt(n ||D_j||). Fitted samples have r_i = 0 and drop out of every other D.

Paper: *Mildly Overparameterized ReLU Networks on Orthogonal Data: Incremental Learning and
Implicit Bias* (NeurIPS 2026, arXiv:2605.27097).
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from . import _fast_phase
from ._saddle_solution import SaddleJumpsSolution
from ._solution import RESULTS
from .checks import (
    check_finite,
    check_plus_minus_one,
    check_shape,
    check_time_scale,
    check_value,
    inexact,
    is_concrete,
)


def _check_inputs(y, signs, directions):
    check_shape("y", y, (None,))
    check_shape("signs", signs, (None,))
    check_shape("directions", directions, (jnp.shape(signs)[0], jnp.shape(y)[0]))
    if 0 in jnp.shape(directions):
        raise ValueError(
            "need at least one neuron and one sample, got `directions` of shape "
            f"{jnp.shape(directions)}"
        )
    dtype = jnp.result_type(jnp.asarray(y), jnp.asarray(directions), float)
    y = check_finite("y", inexact(y, dtype, name="y"))
    directions = check_finite("directions", inexact(directions, dtype, name="directions"))
    return y, inexact(check_plus_minus_one("signs", signs), dtype), directions


def saddle_jumps(
    y: Float[Array, " n"],
    signs: Float[Array, " m"],
    directions: Float[Array, "m n"],
    *,
    time_scale=None,
) -> SaddleJumpsSolution:
    """Predict the jump process of a balanced small initialization (Algorithm 1), with
    simultaneous jumps resolved, in the limit alpha -> 0 and optionally at finite alpha.

    At saddle k (time t_k, exponents ell_j(t_k), ell_j(0) = -1) every unfitted neuron j grows
    as ell_j(t) = ell_j(t_k) + (t - t_k) ||D_j^(k)|| with D_j^(k) = (1/n) |y_i| over the
    unfitted samples i of its support {<u_j, x_i> > 0, s_j y_i > 0}. The next jump is

        t_{k+1} = t_k + min_j -ell_j(t_k) / ||D_j^(k)||,

    and every neuron attaining the minimum (the group; one neuron with Gaussian labels,
    often several with +-1 labels) fires: the group fits the union S of its unfitted supports.
    A lone neuron takes a_{j} = s_{j} sqrt(n ||D_{j}^(k)||); a group whose supports overlap
    shares the common samples as its fast phase decides (see `theory._fast_phase`: the
    group's own ODE from the neurons' O(1) prefactors, which Algorithm 1 as written does not
    track; firing one tied neuron after the other overstates the cost, by 14% on some +-1-label
    instances). The process stops when no unfitted neuron has a nonempty unfitted support.
    Times are in the rescaled clock of d theta/dt = -log(1/alpha) grad L, with
    L = 1/(2n) sum (h - y)^2.

    **Arguments:**

    - `y` (n,): labels.
    - `signs` (m,): second-layer signs s_j in {-1, +1}.
    - `directions` (m, n): directions[j, i] = <u_j, x_i> (their signs fix the supports; their
      values the prefactors that resolve ties and the finite-alpha corrections). A row longer
      than 1, which no unit u_j gives, is scaled to length 1.
    - `time_scale`: tau = log(1/alpha) >= 20 (alpha <= 2e-9) for the finite-alpha prediction
      (`times_finite_alpha`, `cost_finite_alpha`, `curve_*`): the fast-time ODE of every
      neuron at its actual size, with closed-form plateaus, which carries Algorithm 1's
      O(1/tau) corrections. Its plateaus need the neurons to start below e^-18; for larger
      alpha simulate the flow itself (`integrators.orthogonal_flow`). `None` (default): the
      limit only. A real jump the predicted curve never crosses sets `result` to
      `RESULTS.uncrossed`.

    Labels of any size are exact: the prediction is computed for y / s (s a power of 4 near
    max |y|) and mapped back (times / s, amplitudes x sqrt(s), cost x s, losses x s^2; at
    finite alpha the labels y at alpha are y / s at alpha / sqrt(s), in a clock stretched by
    tau_s / tau), so that neither y^2 nor the fast phases overflow at |y| ~ 1e200.

    **Returns:** a `SaddleJumpsSolution`, padded to K = min(m, n) jumps. Jit-compiled; `jax.vmap`
    over a leading seed axis for batches (vmapped, each of the prediction's window solves, K + 1
    of the limit's fast phases and 2K + 3 at finite alpha, runs until the slowest seed's is
    done: on a CPU, `jax.lax.map` is about twice as fast). Bad shapes or signs raise
    `ValueError` (under an outer `jit`, bad signs raise through `eqx.error_if`). A failed
    fast-phase solve shows in `result` (`ok` is False).

    One neuron, one sample: D = 1, so t_1 = 1, a = 1 and the cost is 1.

    >>> pred = saddle_jumps(jnp.array([1.0]), jnp.array([1.0]), jnp.array([[0.3]]))
    >>> float(pred.times[0]), float(pred.cost), int(pred.num_jumps)
    (1.0, 1.0, 1)

    Two tied neurons sharing sample 1 (y = 1, 1, 1): Algorithm 1 fired one after the other
    for a cost of 1 + sqrt 2; the flow shares sample 1, here equally (sqrt 5 = 2.236):

    >>> pred = saddle_jumps(jnp.ones(3), jnp.ones(2),
    ...                     jnp.array([[0.5, 0.5, -0.7], [-0.7, 0.5, 0.5]]))
    >>> pred.groups[0].tolist(), round(float(pred.cost), 6)
    ([0, 1], 2.236068)
    """
    y, signs, directions = _check_inputs(y, signs, directions)
    # <u_j, x_.> of a unit u_j has norm <= 1: longer rows are scaled to it (signs unchanged)
    # (a row's largest entry above 1 divided out first, so that its norm cannot overflow)
    top = jnp.maximum(1.0, jnp.max(jnp.abs(directions), axis=1))[:, None]
    directions = directions / top
    directions = directions / jnp.maximum(1.0, jnp.linalg.norm(directions, axis=1))[:, None]
    # Algorithm 1 on labels scaled by a power of 4 to max |y| in [1, 4), its outputs scaled
    # back exactly: y^2 neither overflows (|y| ~ 1e200) nor underflows (|y| ~ 1e-200)
    scale = _label_scale(y)
    base = _algorithm1(y / scale, signs, directions)
    concrete = all(is_concrete(x) for x in (y, signs, directions))
    # the fast phases matter only where a group's supports overlap; skip them when none does
    resolve = not concrete or bool(np.any(np.asarray(base["overlap"])))
    if time_scale is None:
        return _unscale(_limit(y / scale, signs, directions, base, resolve), scale)
    tau = check_time_scale(time_scale, y.dtype)
    tau = check_value(
        tau,
        tau >= _MIN_TIME_SCALE,
        f"`time_scale` of the finite-alpha prediction must be >= {_MIN_TIME_SCALE:g} "
        f"(alpha <= 2e-9), got {time_scale}",
    )
    # labels s y at init scale alpha are labels y at alpha / sqrt(s), in a clock stretched by
    # tau_s / tau (tau_s = tau + log(s) / 2): the scaled problem, its times mapped back
    tau_s = tau + 0.5 * jnp.log(scale)
    tau_s = check_value(
        tau_s,
        tau_s >= _MIN_TIME_SCALE,
        "the labels are too small for this `time_scale`: labels y at alpha are labels y / s "
        "at alpha / sqrt(s), and log(1/alpha) + log(max |y|) / 2 must be >= "
        f"{_MIN_TIME_SCALE:g} for the finite-alpha prediction (at larger alpha simulate the "
        "flow itself, `integrators.orthogonal_flow`)",
    )
    pred = _limit_and_finite_alpha(y / scale, signs, directions, base, resolve, tau_s)
    return _unscale(pred, scale, tau_s / tau, tau)


@jax.jit
def _label_scale(y):
    """4^k <= max |y| < 4^(k + 1) (1 for y = 0): a scale that divides exactly."""
    top = jnp.max(jnp.abs(y))
    k = jnp.where(top > 0, jnp.floor(jnp.log2(jnp.where(top > 0, top, 1.0)) / 2), 0.0)
    return jnp.ldexp(jnp.ones((), y.dtype), (2 * k).astype(jnp.int32))


@jax.jit
def _unscale(pred: SaddleJumpsSolution, s, stretch=1.0, tau=None) -> SaddleJumpsSolution:
    """The prediction for labels s y from that for y (rescaled time t ~ 1/|y|, a ~ |y|^(1/2),
    cost ~ |y|, loss ~ y^2); exact for s a power of 4. The finite-alpha times are also
    stretched by tau_s / tau (`stretch`), and `time_scale` set to the caller's `tau`."""
    root = jnp.sqrt(s)
    out = eqx.tree_at(
        lambda p: (
            p.times, p.tie_gaps, p.times_finite_alpha, p.rates, p.amplitudes,
            p.final_amplitudes, p.cost, p.cost_finite_alpha, p.plateaus, p.initial_plateau,
        ),
        pred,
        (
            pred.times / s, pred.tie_gaps / s, pred.times_finite_alpha * stretch / s,
            pred.rates * s, pred.amplitudes * root, pred.final_amplitudes * root, pred.cost * s,
            pred.cost_finite_alpha * s, pred.plateaus * s * s, pred.initial_plateau * s * s,
        ),
    )  # fmt: skip
    if pred.curve_ts is None:
        return out
    return eqx.tree_at(
        lambda p: (p.curve_ts, p.curve_loss, p.time_scale),
        out,
        (pred.curve_ts * stretch / s, pred.curve_loss * s * s, tau),
    )


_MIN_TIME_SCALE = 20.0  # the windows open at e^-18: neurons must start below it


_TIE = 1e-9  # neurons whose waits agree to 1e-9 relative to t jump together (relative only:
# times scale like 1/|y|, and an absolute floor made every neuron tie at labels x 1e12)


@jax.jit
def _algorithm1(y, signs, directions) -> dict:
    m, n = directions.shape
    K = min(m, n)
    support = (directions > 0) & (signs[:, None] * y[None, :] > 0)
    y2 = y * y

    def step(carry, _):
        t, ell, neuron_done, sample_done = carry
        live = support & ~sample_done[None, :] & ~neuron_done[:, None]
        rate = jnp.sqrt(jnp.sum(jnp.where(live, y2[None, :], 0.0), axis=1)) / n  # ||D_j||
        can_jump = rate > 0
        wait = jnp.where(can_jump, -ell / jnp.where(can_jump, rate, 1.0), jnp.inf)
        dt = jnp.min(wait)
        jumps = jnp.isfinite(dt)
        dt = jnp.where(jumps, dt, 0.0)
        group = can_jump & (wait <= dt + _TIE * (t + dt)) & jumps
        gap = jnp.min(jnp.where(can_jump & ~group, wait, jnp.inf)) - dt
        ell = jnp.where(neuron_done, ell, jnp.where(group, 0.0, ell + dt * rate))
        covered = live & group[:, None]
        fits = jnp.any(covered, axis=0)
        overlap = jnp.any(jnp.sum(covered, axis=0) > 1)
        # every member of the group on the same unfitted support S: the group's cost is
        # exactly ||y_S|| (a closed form, kept exact below), however it splits S
        identical = jnp.all(jnp.where(group[:, None], covered == fits[None, :], True))
        sample_done = sample_done | fits
        neuron_done = neuron_done | group
        plateau = 0.5 * jnp.sum(jnp.where(sample_done, 0.0, y2)) / n
        out = dict(
            times=jnp.where(jumps, t + dt, jnp.inf),
            group=group,
            fitted=fits,
            lone=jnp.where(group, signs * jnp.sqrt(n * rate), 0.0),
            plateaus=jnp.where(jumps, plateau, jnp.nan),
            rates=jnp.where(jumps, rate, 0.0),
            tie_gaps=jnp.where(jumps, gap, jnp.inf),
            overlap=overlap & jumps,
            identical=identical & overlap & jumps,
        )
        return (t + dt, ell, neuron_done, sample_done), out

    dtype = jnp.result_type(y.dtype, directions.dtype, jnp.float32)
    init = (
        jnp.zeros((), dtype),
        -jnp.ones((m,), dtype),
        jnp.zeros((m,), bool),
        jnp.zeros((n,), bool),
    )
    _, out = jax.lax.scan(step, init, None, length=K)
    out["uncovered"] = ~jnp.any(support, axis=0)
    return out


@functools.partial(jax.jit, static_argnums=4)
def _limit(y, signs, directions, base, resolve) -> SaddleJumpsSolution:
    m, n = directions.shape
    fast = None
    if resolve:
        # traced inputs: the fast phases still run only where a group's supports overlap (a
        # `cond`; under `vmap` it becomes a select, and both branches run)
        real = jnp.isfinite(base["times"])
        fast = jax.lax.cond(
            jnp.any(base["overlap"]),
            lambda: _fast_phase.limit_amplitudes(
                y, signs, directions, base["group"], base["fitted"], real
            ),
            lambda: (jnp.zeros((m,), y.dtype), RESULTS.successful, jnp.zeros((), int)),
        )
    return _limit_solution(y, base, fast)


@functools.partial(jax.jit, static_argnums=4)
def _limit_and_finite_alpha(y, signs, directions, base, resolve, tau) -> SaddleJumpsSolution:
    """The prediction in the limit (`_limit`) and at log(1/alpha) = `tau`: the limit's fast
    phases and the finite-alpha windows in one scan (`_fast_phase.both_phases`), one compiled
    copy of their diffrax solve."""
    t_end = _limit_solution(y, base, None).horizon(2.0)  # the jump times: no fast phase
    real = jnp.isfinite(base["times"])
    run = jnp.any(base["overlap"]) if resolve else jnp.asarray(False)
    fast, curve = _fast_phase.both_phases(
        y, signs, directions, base["group"], base["fitted"], real, run, tau, t_end
    )
    return _with_curve(_limit_solution(y, base, fast if resolve else None), curve, tau)


def _limit_solution(y, base, fast) -> SaddleJumpsSolution:
    """The alpha -> 0 prediction from Algorithm 1's `base`, with the fast phases' (amplitudes,
    result, num_steps) where the groups' supports overlap (`fast`; None: not resolved)."""
    group, real = base["group"], jnp.isfinite(base["times"])
    m = group.shape[1]
    lone = jnp.sum(base["lone"], axis=0)  # each neuron fires at most once
    steps = jnp.zeros((), int)
    result = RESULTS.successful
    if fast is not None:
        shared, result, steps = fast
        in_overlap = jnp.any(group & base["overlap"][:, None], axis=0)
        final = jnp.where(in_overlap, shared, lone)
        # a group on one common support: its cost sum_j a_j^2 is ||y_S|| exactly; the fast
        # phase gives the split, the closed form the total (the ODE is good to ~1e-7 only)
        norm_s = jnp.sqrt(jnp.sum(jnp.where(base["fitted"], (y * y)[None, :], 0.0), axis=1))
        cost_k = jnp.sum(jnp.where(group, (final * final)[None, :], 0.0), axis=1)
        factor = jnp.where(
            base["identical"] & (cost_k > 0),
            jnp.sqrt(norm_s / jnp.where(cost_k > 0, cost_k, 1.0)),
            1.0,
        )
        final = final * jnp.prod(jnp.where(group, factor[:, None], 1.0), axis=0)
    else:
        final = lone
    index = jnp.arange(m)
    groups = jnp.sort(jnp.where(group, index, m), axis=1)
    groups = jnp.where(groups < m, groups, -1)
    neurons = groups[:, 0]
    cost = jnp.sum(final * final)
    return SaddleJumpsSolution(
        times=base["times"],
        neurons=neurons,
        groups=groups,
        fitted=base["fitted"],
        amplitudes=jnp.where(neurons >= 0, final[jnp.maximum(neurons, 0)], 0.0),
        final_amplitudes=final,
        plateaus=base["plateaus"],
        initial_plateau=0.5 * jnp.mean(y * y),
        cost=cost,
        uncovered=base["uncovered"],
        num_jumps=jnp.sum(real),
        rates=base["rates"],
        tie_gaps=base["tie_gaps"],
        time_scale=jnp.asarray(jnp.inf, y.dtype),
        times_finite_alpha=base["times"],
        cost_finite_alpha=cost,
        result=result,
        stats={"num_steps": steps},
    )


def _with_curve(pred: SaddleJumpsSolution, curve, tau) -> SaddleJumpsSolution:
    """`pred` with the finite-alpha prediction from its curve (ts, loss, cost, result,
    num_steps) at log(1/alpha) = `tau`."""
    ts, loss, cost, result, steps = curve
    real = jnp.isfinite(pred.times)
    times = jnp.where(real, _crossings(ts, loss, pred.initial_plateau, pred.plateaus), jnp.inf)
    result = RESULTS.where(pred.ok, result, pred.result)
    crossed = jnp.all(~jnp.isnan(times))
    result = RESULTS.where(crossed | (result != RESULTS.successful), result, RESULTS.uncrossed)
    return eqx.tree_at(
        lambda p: (
            p.time_scale,
            p.times_finite_alpha,
            p.cost_finite_alpha,
            p.curve_ts,
            p.curve_loss,
            p.result,
            p.stats,
        ),
        pred,
        (tau, times, cost, ts, loss, result, {"num_steps": pred.stats["num_steps"] + steps}),
        is_leaf=lambda x: x is None,
    )


def _crossings(ts, loss, initial_plateau, plateaus):
    before = jnp.concatenate([initial_plateau[None], plateaus[:-1]])
    levels = 0.5 * (before + plateaus)
    tiny = jnp.finfo(loss.dtype).tiny
    log_loss = jnp.log(jnp.maximum(loss, tiny))

    def one(level):
        below = loss < level
        i = jnp.argmax(below)
        i0 = jnp.maximum(i - 1, 0)
        log_level = jnp.log(jnp.maximum(level, tiny))
        span = log_loss[i0] - log_loss[i]
        frac = jnp.where(span > 0, (log_loss[i0] - log_level) / jnp.where(span > 0, span, 1), 0)
        t = ts[i0] + jnp.clip(frac, 0.0, 1.0) * (ts[i] - ts[i0])
        return jnp.where(jnp.any(below) & jnp.isfinite(level), t, jnp.nan)

    return jax.vmap(one)(levels)
