"""The jumps' fast phases: simultaneous jumps in the alpha -> 0 limit, and finite alpha.

**Fast time.** In the exponent / direction coordinates of `integrators.vanishing_flow`
(|a_j| = ||w_j|| = e^(L_j), L_j = tau ell_j, v_j = |a_j| psi_j, orthonormal data), the
rescaled flow written in the fast time s = tau t has no tau left in it:

    dL_j/ds   = -(s_j / n) sum_i r_i relu(psi_ji),
    dpsi_ji/ds = -(s_j r_i / n + psi_ji dL_j/ds)   where psi_ji > 0 (else 0),

with r = h - y and h = sum_j s_j e^(2 L_j) relu(psi_j). A jump takes O(1) fast time; a plateau
takes O(tau). Algorithm 1 is the outer (slow) solution; the fast phases are the inner ones.

**Plateaus are solved in closed form.** While every neuron that has not fired is small
(e^(2 L) negligible) and the residual r is constant (-y_i on unfitted samples, 0 on fitted
ones), a small neuron's (|a|, v) is linear: with g_i = -s_j r_i / n on its live components,
G = ||g||, g^ = g / G and b = <psi, g^>,

    |a|(s) = |a|(0) ((1 + b)/2 e^(G s) + (1 - b)/2 e^(-G s)),

and the components of v orthogonal to g^ stay put. So every neuron carries, besides its
exponent, an O(1) *prefactor*: after a long plateau L_j = tau ell_j + kappa_j, with
kappa_j += log((1 + b_j)/2) at every change of residual (at t = 0, b_j = <psi_j(0), g^_j> is the
initial alignment). Jump times in the limit do not see kappa; which of several *tied* neurons
takes how much of a shared sample does, and so does everything at finite alpha.

**Limit (`limit_amplitudes`).** At jump k Algorithm 1 gives the group of neurons whose ell
reaches 0 at t_k (several at once with +-1 labels, whose rates ||D_j|| only count samples). The
group's fast phase is integrated from L_j = kappa_j - S0 (relative sizes e^(kappa_j)) with the
neurons that have not fired beside it at zero size (they only carry kappa and psi through the
change of residual), and fired neurons frozen (their samples stay fitted). The group's final
sizes are its amplitudes; every other neuron's kappa is updated by the closed form above.

**Finite alpha (`_finite_phase`; `both_phases` runs it beside the limit's windows).** The same
inner ODE with every neuron at its actual size e^(L_j), L_j(0) = -log(1/alpha): windows of fast
time around each entry of a neuron into the nonlinear range (L > -S0), closed-form plateaus
between them. For log(1/alpha) > S0 (the neurons start below e^-S0; `saddle_jumps` asks for >=
20) it is exact up to e^(-2 S0) terms and the ODE tolerance, it carries every O(1/log(1/alpha))
correction to Algorithm 1: the alignment phase (kappa / tau), the midpoint crossing of a
logistic jump (n ln||y_S|| / (2 tau ||y_S||) for one neuron), and the sample sharing of
near-tied neurons (their components on a shared sample decay only like e^(-tau G gap)). It
returns the predicted loss curve.

Paper: *Mildly Overparameterized ReLU Networks on Orthogonal Data: Incremental Learning and
Implicit Bias* (NeurIPS 2026, arXiv:2605.27097).
"""

import diffrax
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np

from . import rescaled
from ._diffeqsolve import diffeqsolve
from ._hold import HoldArgs
from ._solution import RESULTS

S0 = 18.0  # a window starts when the leading neuron has e^L = e^-18 (products e^-36)
S1 = 18.0  # and ends 18 / G after its crossing of L = 0 (the fit has relaxed by e^-36)
RTOL = 1e-8
MAX_STEPS = 100_000
# The fast phases' cap on 2 L in trial stages, far below the other flows' 600: their state is
# L itself (not ell = L / tau) and a window starts with the group at e^-18, so diffrax's first
# steps are long. With 2 L capped at 300 or 600, such a step overshoots the jump, its capped
# stages give a state of size ~e^150 whose error is small *relative* to it, the step is
# accepted, and every later step overflows and is rejected (measured on a seed of the quick
# main job: 4 steps accepted, 99,996 rejected, `max_steps`). A fitted neuron has
# e^(2 L) = O(max |y|), so e^40 above that leaves 17 orders of headroom and no such state.
MAX_LOG_SIZE2 = 40.0
# the fast-time span an empty member of a mixed batch is solved on (`window`); both callers
# start their windows at |s0| <= S0 / G, where s0 + 1e-12 > s0 in float64
_EMPTY = 1e-12
POINTS = 1024  # loss points saved per finite-alpha window (crossings to ~1e-6 in t)


def _residual(E0, D, psi, signs, y, active, fitted):
    """r = h - y with h = sum_j s_j e^(2 (E0_j + D_j)) relu(psi_j) over the active neurons (0 on
    the samples marked fitted)."""
    log_size = jnp.where(active, E0 + D, -jnp.inf)
    r = rescaled.residual(log_size, signs, jax.nn.relu(psi), y, cap=_cap(y))
    return jnp.where(fitted, 0.0, r)


def _cap(y):
    """The fast phases' cap on 2 L: e^40 above the largest label (`MAX_LOG_SIZE2` note)."""
    return MAX_LOG_SIZE2 + jnp.log(jnp.maximum(jnp.max(jnp.abs(y)), jnp.finfo(y.dtype).tiny))


def _field(s, state, args):
    """The shared rescaled field (`theory._rescaled`, gauge "balanced", G = I, tau = 1: fast
    time), on the active neurons only, with the fitted samples' residual held at 0."""
    D, psi = state
    E0, signs, y, active, fitted = args[:5]
    r = _residual(E0, D, psi, signs, y, active, fitted)
    live = ((psi > 0) if len(args) == 5 else args[5]) & active[:, None]
    dD, dpsi = rescaled.balanced_field(E0 + D, signs, psi, y, live, r=r)
    return jnp.where(active, dD, 0.0), dpsi


def _held_live(s, state, args):
    """The live set at a step's start, held for the step (`HoldArgs`)."""
    return args[:5] + (HoldArgs.live_set(state[1]),)


def _overshoot(state0, state1, args):
    """The live components that ended a step past the kink: their value there (`HoldArgs`)."""
    return jnp.zeros_like(state1[0]), HoldArgs.past_kink(args[5], state1[1])


def window(E0, psi, signs, y, active, fitted, s0, s1, save_ts=None):
    """Integrate the fast-time ODE on [s0, s1] from D = 0 (log size E0 + D, -inf allowed).

    Returns (D(s1), psi(s1), result, num_steps, loss at `save_ts` or None).

    **Empty windows (s1 = s0) under `jax.vmap`.** diffrax's loop runs while any member of the
    batch is unfinished, and its save loop re-runs, at every step of the others, for a member
    whose solve never started (t0 = t1 leaves its save index at 0): once per save point. With
    1,024 points per window and 67 windows, 16 seeds of the main job took 29 s vmapped
    against 1.2 s one at a time. So a window that is empty for the whole batch is not solved
    at all (`eqxi.unvmap_all`: a real branch even under vmap), and an empty member of a mixed
    batch is solved on [s0, s0 + `_EMPTY`] (one tiny step saves all its points at once), its
    end state replaced by its start. Every output is that of the t0 = t1 solve."""
    args = (E0, signs, y, active, fitted)
    state0 = (jnp.zeros_like(E0), psi)

    def loss(s, state, args):
        r = _residual(E0, state[0], state[1], signs, y, active, fitted)
        return 0.5 * jnp.mean(r * r)

    empty = s1 <= s0
    start_loss = lambda: loss(s0, state0, args)  # noqa: E731  (what an empty window saves)

    def skip():
        saved = None if save_ts is None else jnp.full(save_ts.shape, start_loss())
        return state0, RESULTS.successful, jnp.zeros((), jnp.int32), saved

    def solve():
        subs = [diffrax.SubSaveAt(t1=True)]
        if save_ts is not None:
            subs.append(diffrax.SubSaveAt(ts=save_ts, fn=loss))
        sol = diffeqsolve(
            diffrax.ODETerm(_field),
            HoldArgs(diffrax.Tsit5(), _held_live, _overshoot),
            s0,
            jnp.where(empty, s0 + _EMPTY, s1),
            None,
            state0,
            args=args,
            stepsize_controller=diffrax.PIDController(rtol=RTOL, atol=RTOL),
            max_steps=MAX_STEPS,
            saveat=diffrax.SaveAt(subs=subs),
            throw=False,
            grid_checked=True,
        )
        (D, psi_end), *saved = sol.ys
        end = jax.tree_util.tree_map(
            lambda a, b: jnp.where(empty, a, b), state0, (D[-1], psi_end[-1])
        )
        result = RESULTS.where(empty, RESULTS.successful, RESULTS.promote(sol.result))
        steps = jnp.where(empty, 0, sol.stats["num_steps"]).astype(jnp.int32)
        if save_ts is not None:  # the start's loss, even if the tiny step were rejected
            saved = jnp.where(empty, start_loss(), saved[0])
        return end, result, steps, (saved if save_ts is not None else None)

    (D, psi), result, steps, saved = jax.lax.cond(eqxi.unvmap_all(empty), skip, solve)
    return D, psi, result, steps, saved


def growth(psi, signs, y, r):
    """Each neuron's linear growth under a constant residual r: G = ||g||, g^ and b = <psi, g^>
    with g_i = -s_j r_i / n on its live components."""
    n = y.shape[0]
    g = jnp.where(psi > 0, -signs[:, None] * r[None, :] / n, 0.0)
    G = jnp.linalg.norm(g, axis=1)
    ghat = g / jnp.where(G > 0, G, 1.0)[:, None]
    return G, ghat, jnp.sum(psi * ghat, axis=1)


def _log_mode(b):
    """log((1 + b)/2): the + mode's share of a neuron whose direction has cosine b with g^."""
    return jnp.log(jnp.maximum(0.5 * (1.0 + b), jnp.finfo(b.dtype).tiny))


def forward(L, psi, G, ghat, b, ds):
    """The closed-form plateau: every neuron propagated by fast time ds under a constant
    residual (the linear solution of the module docstring, in log form)."""
    x = G * ds
    q = jnp.exp(-2.0 * x)
    den = 0.5 * (1.0 + b) + 0.5 * (1.0 - b) * q
    L = L + x + jnp.log(jnp.maximum(den, jnp.finfo(den.dtype).tiny))
    along = ((1.0 + b) - (1.0 - b) * q) / jnp.maximum(2.0 * den, jnp.finfo(den.dtype).tiny)
    perp = psi - b[:, None] * ghat
    return L, along[:, None] * ghat + perp * (jnp.exp(-x) / den)[:, None]


def _initial_rates(y, signs, psi0):
    G0, _, _ = growth(psi0, signs, y, -y)
    return jnp.min(jnp.where(G0 > 0, G0, jnp.inf)), jnp.max(G0)


def _limit_phase(y, signs, psi0, groups, fitted, real, resolve=True):
    """The windows of `limit_amplitudes` as a phase of `_windows`: (init, prepare, update,
    length); where not `resolve` (a traced bool) every window is empty. Step 0 is the
    initial alignment (every neuron at zero size, from psi(0), until the sign-mismatched
    components have reached the kink); step k the fast phase of jump k."""
    m, n = psi0.shape
    dtype = psi0.dtype
    gmin, _ = _initial_rates(y, signs, psi0)
    s_align = 60.0 / jnp.where(jnp.isfinite(gmin), gmin, 1.0)

    def prepare(carry, k):
        kappa, psi, fired, done, amps, result, steps = carry
        align = k == 0
        j = jnp.maximum(k - 1, 0)
        jumps = real[j] & ~align
        group = groups[j] & jumps
        G, _, _ = growth(psi, signs, y, jnp.where(done, 0.0, -y))
        lead = jnp.max(jnp.where(group, G, 0.0))
        slow = jnp.min(jnp.where(group, G, jnp.inf))
        s0 = jnp.where(jumps, -S0 / jnp.where(lead > 0, lead, 1.0), 0.0)
        s1 = S1 / jnp.where(jnp.isfinite(slow) & (slow > 0), slow, 1.0)
        s1 = jnp.where(align, s_align, jnp.where(jumps, s1, s0))  # empty after the jumps
        # not resolved: every window empty at 0 (an empty member of a mixed vmapped batch is
        # solved on [s0, s0 + _EMPTY], which rounds back to s0 where |s0| > 1e4: `window`)
        s0, s1 = jnp.where(resolve, s0, 0.0), jnp.where(resolve, s1, 0.0)
        E0 = jnp.where(group, kappa + G * s0, -jnp.inf)
        return (E0, psi, ~fired, done, s0, s1), (align, j, jumps, group, G)

    def update(carry, aux, inputs, out):
        kappa, psi, fired, done, amps, result, steps = carry
        align, j, jumps, group, G = aux
        E0, _, _, _, s0, s1 = inputs
        Dw, psiw, res, nst, _ = out
        now_done = done | (fitted[j] & jumps)
        Gn, ghatn, bn = growth(psiw, signs, y, jnp.where(now_done, 0.0, -y))
        others = ~fired & ~group & (jumps | align)
        kappa = jnp.where(others, kappa + G * s0 + Dw + _log_mode(bn) - Gn * s1, kappa)
        psi = jnp.where(others[:, None], ghatn, psi)
        amps = jnp.where(group, signs * jnp.exp(E0 + Dw), amps)
        result = RESULTS.where(result == RESULTS.successful, res, result)
        return (kappa, psi, fired | group, now_done, amps, result, steps + nst), None

    init = (
        jnp.zeros((m,), dtype),
        psi0,
        jnp.zeros((m,), bool),
        jnp.zeros((n,), bool),
        jnp.zeros((m,), dtype),
        RESULTS.successful,
        jnp.zeros((), int),
    )
    return init, prepare, update, groups.shape[0] + 1


def _finite_phase(y, signs, psi0, tau, t_end):
    """The finite-alpha windows (the predicted curve up to `t_end`) as a phase of `_windows`:
    (init, prepare, update, length); each step saves the window's loss at `POINTS` times.
    Step 0 is the initial alignment (no plateau before it)."""
    m, n = psi0.shape
    dtype = psi0.dtype
    K = min(m, n)
    gmin, gmax = _initial_rates(y, signs, psi0)
    s_align = jnp.minimum(
        60.0 / jnp.where(jnp.isfinite(gmin), gmin, 1.0),
        jnp.maximum(tau - S0, 0.0) / jnp.where(gmax > 0, gmax, 1.0),
    )
    eps = 1e-9 * jnp.max(jnp.abs(y)) / n
    everyone, nothing = jnp.ones((m,), bool), jnp.zeros((n,), bool)

    def prepare(carry, i):
        t, L, psi, stopped, result, steps = carry
        first = i == 0
        r = _residual(L, 0.0, psi, signs, y, everyone, nothing)
        G, ghat, b = growth(psi, signs, y, r)
        small = L < -0.5 * S0
        growing = (G > eps) & small
        # a neuron already in the nonlinear range that still grows is mid-jump: keep going
        entering = (G > 1e3 * eps) & ~small & (b > 0.5)
        Gs = jnp.where(G > eps, G, 1.0)
        lb = _log_mode(b)
        to_enter = jnp.where(growing, (-0.5 * S0 - L - lb) / Gs, jnp.inf)
        lead = jnp.argmin(to_enter)
        busy = jnp.any(entering) | first
        next_ok = growing[lead] & (t + to_enter[lead] / tau < t_end)
        go = ~stopped & (t < t_end) & (busy | next_ok)
        ds = jnp.where(go & ~busy, jnp.maximum((-S0 - L[lead] - lb[lead]) / Gs[lead], 0.0), 0.0)
        Lf, psif = forward(L, psi, jnp.where(growing, G, 0.0), ghat, b, ds)
        moved = go & small
        L = jnp.where(moved, Lf, L)
        psi = jnp.where(moved[:, None], psif, psi)
        t = t + ds / tau
        finish = jnp.max(jnp.where(entering, (S1 + jnp.maximum(-L, 0.0)) / Gs, 0.0))
        width = jnp.where(jnp.any(entering), finish, (S1 - L[lead]) / Gs[lead])
        width = jnp.where(first, s_align, width)
        width = jnp.where(go, jnp.clip(width, 0.0, (t_end - t) * tau), 0.0)
        zero = jnp.zeros((), dtype)
        return (L, psi, everyone, nothing, zero, width), (t, go)

    def update(carry, aux, inputs, out):
        _, _, _, stopped, result, steps = carry
        t, go = aux
        L, psi, _, _, _, width = inputs
        Dw, psiw, res, nst, lw = out
        L = jnp.where(go, L + Dw, L)
        psi = jnp.where(go, psiw, psi)
        tw = t + _grid(dtype) * width / tau
        result = RESULTS.where(result == RESULTS.successful, res, result)
        return (t + width / tau, L, psi, stopped | ~go, result, steps + nst), (tw, lw)

    init = (
        jnp.zeros((), dtype),
        jnp.full((m,), -tau, dtype),
        psi0,
        jnp.asarray(False),
        RESULTS.successful,
        jnp.zeros((), int),
    )
    return init, prepare, update, 2 * K + 3


def _grid(dtype):
    """A window's `POINTS` saved times, in units of its span."""
    return jnp.linspace(0.0, 1.0, POINTS, dtype=dtype)


def _select(pred, a, b):
    """The pytree `a` where `pred`, else `b`, leaf by leaf."""
    return jax.tree_util.tree_map(lambda x, z: jnp.where(pred, x, z), a, b)


def _windows(phases, y, signs, save=True):
    """Run `phases` ((init, prepare, update, length) each: `prepare(carry, i)` gives the
    window's inputs (E0, psi, active, fitted, s0, s1) and what `update(carry, aux, inputs,
    window's outputs)` needs besides) one after the other in one `lax.scan`, through one call
    of `window`: its diffrax solve, most of what the prediction compiles, compiled once however
    many phases there are (the limit's and the finite-alpha windows were two copies of it, 3.3
    and 4.75 s of XLA compile). Every step evaluates every phase's `prepare` and `update` (a
    few elementwise passes) and keeps its own phase's. Returns each phase's final carry and the
    outputs of its updates (leading axis its length). Without `save` the windows save no loss
    (their saved-loss output is None)."""
    bounds = np.cumsum([0] + [phase[3] for phase in phases])

    def step(carries, i):
        prepared = [
            prepare(carry, jnp.clip(i - lo, 0, length - 1))
            for carry, (_, prepare, _, length), lo in zip(carries, phases, bounds, strict=False)
        ]
        index = jnp.searchsorted(jnp.asarray(bounds[1:]), i, side="right")
        inputs = prepared[-1][0]
        for k in range(len(phases) - 2, -1, -1):  # phase k's inputs at its steps (dtypes kept)
            inputs = _select(index == k, prepared[k][0], inputs)
        E0, psi, active, fitted, s0, s1 = inputs
        # (s0 + (s1 - s0) can round past s1; the finite-alpha windows start at s0 = 0)
        save_ts = jnp.minimum(s0 + _grid(s0.dtype) * (s1 - s0), s1) if save else None
        out = window(E0, psi, signs, y, active, fitted, s0, s1, save_ts=save_ts)
        new, ys = [], []
        for k, (carry, (_, _, update, _), (own, aux)) in enumerate(
            zip(carries, phases, prepared, strict=True)
        ):
            updated, y_k = update(carry, aux, own, out)
            new.append(_select(index == k, updated, carry))
            ys.append(y_k)
        return tuple(new), tuple(ys)

    carries, ys = jax.lax.scan(step, tuple(p[0] for p in phases), jnp.arange(bounds[-1]))
    outputs = [
        None if y_k is None else jax.tree_util.tree_map(lambda x, lo=lo, hi=hi: x[lo:hi], y_k)
        for y_k, lo, hi in zip(ys, bounds[:-1], bounds[1:], strict=True)
    ]
    return carries, outputs


def limit_amplitudes(y, signs, psi0, groups, fitted, real):
    """Final amplitudes a_j (m,) of the alpha -> 0 flow, given Algorithm 1's groups (K, m),
    fitted samples (K, n) and real jumps (K,); with (result, num_steps) of the windows
    (`_limit_phase`)."""
    phase = _limit_phase(y, signs, psi0, groups, fitted, real)
    (carry,), _ = _windows([phase], y, signs, save=False)
    *_, amps, result, steps = carry
    return amps, result, steps


def both_phases(y, signs, psi0, groups, fitted, real, resolve, tau, t_end):
    """`limit_amplitudes` (every window empty where not `resolve`) and the finite-alpha
    prediction at log(1/alpha) = `tau` up to time `t_end` (`_finite_phase`), their windows in
    one scan through one compiled solve (`_windows`): ((amplitudes, result, num_steps), (ts,
    loss, the final cost sum_j e^(2 L_j), result, num_steps))."""
    limit = _limit_phase(y, signs, psi0, groups, fitted, real, resolve)
    finite = _finite_phase(y, signs, psi0, tau, t_end)
    (lim, fin), (_, (tws, lws)) = _windows([limit, finite], y, signs)
    *_, amps, result, steps = lim
    _, L, _, _, fin_result, fin_steps = fin
    curve = (tws.ravel(), lws.ravel(), jnp.sum(jnp.exp(2.0 * L)), fin_result, fin_steps)
    return (amps, result, steps), curve
