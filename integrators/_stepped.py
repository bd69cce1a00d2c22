"""`gradient_flow(method="steps")`: the flow by time-stepping over the kinks, extrapolated.

Explicit Euler at step h in the flow's time (gradient descent at learning rate h tau) steps
over the kinks of a ReLU network without locating them; the flow is its limit h -> 0. Level
j runs Euler on [ts[0], ts[-1]] with step h_k / 2^j in save interval k (h_k the interval over
n_k = ceil(interval / h0), so every level lands on every save time), and consecutive levels
Y are combined by Richardson, to second order and to first,

    E_j = (8 Y_j - 6 Y_(j-1) + Y_(j-2)) / 3,        R_j = 2 Y_j - Y_(j-1).

**Why each estimate is the gap to the previous one of its kind.** Euler's error through a
kink is (f_before - f_after) (1 - delta) h, with delta where the crossing falls inside its
step: its mean over delta is first order in h and cancels under Richardson, its fluctuation
does not. Through thousands of crossings E_j converges at about first order, not second: on
an 8-16-16-16-1 ReLU MLP (32 samples, init 0.3, t <= 150, steps 5e-3 / 2^j) its error
against the extrapolant of levels 4-6 was 5.5e-5, 3.9e-5, 2.6e-5, 9.4e-6 for j = 2..5, where
the textbook estimate, the gap to the first-order combination, claimed 1.2e-5 for the 3.9e-5
(2-3x under). So the error of E_j is estimated by its gap to E_(j-1): about the error itself
at first order, three times it at second (measured 1.6-3.7x over on this net and on an
8-12-12-1 one), and likewise R_j's by its gap to R_(j-1). Both are formed at every level and
the one with the smaller estimate is returned (`stats['extrapolation_order']`, 2 for E, 1
for R): where the crossings' fluctuation dominates, E_j, which weighs the levels by 8, 6 and
1 / 3, amplifies it and R_j is the better one. On `two_layer_flow`'s Gaussian inputs (n =
256, d = 32, m = 40, alpha = 1e-10, t <= 30) R_j's loss error was 4.1e-4, 3.1e-4, 1.2e-4,
9.2e-6 for j = 9..12 where E_j's was 8.1e-4, 3.5e-4, 1.6e-4, 1.2e-4 and plain Euler's
2.0e-3 .. 2.3e-4 (halving with the step). Levels are added until an estimate, at each save,
in the parameters (||gap|| / (atol sqrt(P) + rtol ||theta||), P parameters) and in the loss
(|gap| / (atol + rtol L)), is at most 1: at least four levels. The parameters' test is on
the whole vector, so a weight passing through zero is held to the network's scale, not its
own; a neuron far smaller than the rest is held only through the loss, which it moves once
it grows. It is the stricter test: there the parameters' gaps settled two to four levels
after the loss's (rtol 1e-3: the loss's gap was under 1 from j = 9, the parameters' from j
= 13, at the last save).

**Cost.** Level j costs N0 2^j gradient evaluations (N0 = sum_k n_k), all levels together
about twice the finest; each step is a plain gradient, with no kink bookkeeping, so the
compiled program is one Euler step in two loops. The first step h0 is 0.5 / (tau lambda),
lambda the Hessian's largest |eigenvalue| at the start (20 power iterations): a level whose
Euler steps are unstable later (the loss's sharpness grows as it learns) gives a non-finite
or far-off trajectory, whose gap is not small, and the levels go on from it. `max_steps`
caps one level's Euler steps in a save interval: where the first four levels would pass it,
none is run, and the solve ends `max_steps_reached`.

**What it is not.** Its accuracy is first order in the finest step through the kinks: it
reaches 1e-5 relative in seconds where the held event-driven solve locates thousands of
crossings, and 1e-8 only at a thousand times the steps (there `method="events"` is the
method). It holds seven trajectories at the save times (T x P numbers each). It needs
float64: in float32 a slow component's update falls below half an ulp at fine steps, every
level stalls alike, and their agreement would be false.
"""

import equinox as eqx
import jax
import jax.numpy as jnp

from theory import RESULTS
from theory.checks import is_concrete

METHODS = ("auto", "events", "steps")
# `method="auto"` steps where the loss has at least STEPS_ENTRIES kink entries (sites x
# samples) and rtol is at least STEPS_RTOL. Measured (benchmarks.relu_networks): on an
# 8-64-1 ReLU net, 256 samples (16,384 entries, 13,000 crossings to t = 60), the steps
# reached 1.5e-6 in 3.5 s where the held events took 88 s for 9.7e-6; on an 8-16-16-16-1
# net, 32 samples (1,536 entries, 1,200 crossings), the events reached 2.1e-6 in 5.7 s
# where the steps took 7.7 s for 4.2e-5. Time-stepping's error through the kinks is first
# order in its step, so below STEPS_RTOL its levels multiply: on a 3-32-32-1 net, 64
# samples, to t = 0.5, rtol 1e-6 took the steps past 11 levels where the events took 412
# steps.
STEPS_RTOL = 1e-5
STEPS_ENTRIES = 4096
POWER_ITERATIONS = 20
MIN_LEVELS = 4  # three for one extrapolant, a fourth for its gap to the one before


def choose_method(method, given: dict, rtol, entries, state) -> str:
    """`"events"` or `"steps"` for a flow's `method` (`"auto"`, `"events"` or `"steps"`):
    `given` the options only the event-driven solve takes ({name: value or None}, refused
    with `"steps"`), `entries()` the number of kink entries (asked only where it decides),
    `state` an array of the flow's state. The steps need float64 (in float32 a slow
    component's Euler update falls below half an ulp at fine steps, every level stalls
    alike, and their agreement would be false); `"auto"` steps only on concrete inputs,
    where a solve that falls short can be seen and solved again by events.

    >>> x = jnp.zeros(3, jnp.float64)
    >>> choose_method("auto", {"solver": None}, 1e-4, lambda: 16_384, x)
    'steps'
    >>> choose_method("auto", {"solver": None}, 1e-8, lambda: 16_384, x)
    'events'
    """
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}, got {method!r}")
    taken = [name for name, value in given.items() if value is not None]
    double = jnp.asarray(state).dtype == jnp.float64
    if method == "steps":
        if taken:
            raise ValueError(
                f"`{taken[0]}` is an option of method='events' only; method='steps' takes "
                f"none of {tuple(given)}, got `{taken[0]}`"
            )
        if not double:
            raise ValueError(
                "method='steps' needs a float64 state (in float32 fine Euler steps stall "
                f"below rounding), got {jnp.asarray(state).dtype}"
            )
        return method
    if method == "events" or taken or not double or not is_concrete(state):
        return "events"
    if not is_concrete(rtol) or float(rtol) < STEPS_RTOL:
        return "events"
    return "steps" if entries() >= STEPS_ENTRIES else "events"


def fell_short(solution) -> bool:
    """Whether a concrete stepped solution is not ok (`"auto"` then solves by events)."""
    return is_concrete(solution.result._value) and not bool(solution.ok)


def tried_steps(solution, short):
    """`solution` (by events), with `stats['steps_tried']`, the levels the steps ran, where
    `short` is a stepped solution that fell short (else `solution` as it is)."""
    if short is None:
        return solution
    stats = {**solution.stats, "steps_tried": short.stats["num_levels"]}
    return eqx.tree_at(lambda s: s.stats, solution, stats)


class StepOptions(eqx.Module):
    """What selects the compiled stepped program besides the shapes (static)."""

    max_levels: int
    max_steps: int


def _tree(f, *trees):
    return jax.tree_util.tree_map(f, *trees)


def tree_norm(tree):
    """The Euclidean norm of a pytree's arrays taken as one vector."""
    return jnp.sqrt(sum(jnp.sum(x * x) for x in jax.tree_util.tree_leaves(tree)))


def _sharpness(grad, params, tau):
    """tau times the Hessian's largest |eigenvalue| at `params`, by power iteration on
    Hessian-vector products (forward over reverse)."""
    leaves = jax.tree_util.tree_leaves(params)
    v = _tree(lambda x: jnp.ones_like(x) / jnp.sqrt(sum(a.size for a in leaves)), params)

    def hvp(v):
        return jax.jvp(grad, (params,), (v,))[1]

    def body(_, carry):
        v, _ = carry
        w = hvp(v)
        size = tree_norm(w)
        return _tree(lambda x: x / jnp.where(size > 0, size, 1.0), w), size

    _, lam = jax.lax.fori_loop(0, POWER_ITERATIONS, body, (v, jnp.zeros((), leaves[0].dtype)))
    return tau * lam


def _level(grad, y0, ts, counts, tau, multiple):
    """Euler from `y0` through every save time, `counts * multiple` steps per interval; the
    trajectory at the save times (leading axis T)."""

    def interval(y, k):
        n = counts[k] * multiple
        h = (ts[k + 1] - ts[k]) / n * tau

        def step(_, y):
            return _tree(lambda x, g: x - h * g, y, grad(y))

        y = jax.lax.fori_loop(0, n, step, y)
        return y, y

    _, ys = jax.lax.scan(interval, y0, jnp.arange(ts.shape[0] - 1))
    return _tree(lambda a, b: jnp.concatenate([a[None], b]), y0, ys)


def _richardson(fine, middle, coarse):
    return _tree(lambda a, b, c: (8 * a - 6 * b + c) / 3, fine, middle, coarse)


def _first_order(fine, middle):
    return _tree(lambda a, b: 2 * a - b, fine, middle)


def _gap(new, old, loss_new, loss_old, rtol, atol):
    """The scaled gap between two extrapolated trajectories: the largest over save times of
    ||gap|| / (atol sqrt(P) + rtol ||theta||) in the parameters (P of them; the vector's
    norm, so that a weight passing through zero is held to the network's scale, not its
    own) and of |gap| / (atol + rtol L) in the loss; inf where either is non-finite."""

    def norms(tree):
        leaves = jax.tree_util.tree_leaves(tree)
        return jnp.sqrt(sum(jnp.sum((x * x).reshape(x.shape[0], -1), axis=1) for x in leaves))

    size = sum(x[0].size for x in jax.tree_util.tree_leaves(new))
    difference = norms(_tree(jnp.subtract, new, old))
    state = jnp.max(difference / (atol * jnp.sqrt(size) + rtol * norms(new)))
    loss = jnp.max(jnp.abs(loss_new - loss_old) / (atol + rtol * jnp.abs(loss_new)))
    gap = jnp.maximum(state, loss)
    return jnp.where(jnp.isfinite(gap), gap, jnp.inf)


class ModelLoss(eqx.Module):
    """`loss(model, args)` as a function of the model's inexact arrays and the args' arrays:
    one object per (loss, static parts), so that the compiled solve is found again."""

    loss: object
    static: object
    args_static: object

    def __call__(self, params, dynamic):
        return self.loss(eqx.combine(params, self.static), eqx.combine(dynamic, self.args_static))

    def field(self, params, dynamic):
        return jax.grad(self)(params, dynamic)


@eqx.filter_jit
def stepped_solve(params, value, field, data, ts, tau, rtol, atol, options):
    """Levels of Euler on d theta/dt = -tau field(theta, data) until the extrapolants' gap
    is at most 1 (module docstring), `value(theta, data)` the loss: the extrapolated
    trajectory (leading axis T), the result and the stats."""
    dtype = ts.dtype

    def grad(p):
        return field(p, data)

    def losses(trajectory):
        return jax.vmap(lambda p: value(p, data))(trajectory)

    if ts.shape[0] == 1:  # nothing to step
        zero = jnp.zeros((), dtype)
        none = jnp.zeros((), jnp.int32)
        stats = {"num_steps": zero, "num_levels": none, "finest_step": zero,
                 "error_estimate": zero, "first_step": zero,
                 "extrapolation_order": none}  # fmt: skip
        return _tree(lambda x: x[None], params), RESULTS.successful, stats
    lam = _sharpness(grad, params, tau)
    h0 = jnp.where(lam > 0, 0.5 / jnp.where(lam > 0, lam, 1.0), jnp.inf)
    spans = jnp.diff(ts)
    # the budget caps one level's Euler steps in a save interval (and 2^30: int32 counts)
    cap = jnp.minimum(jnp.asarray(options.max_steps, dtype), 2.0**30)
    ratio = jnp.ceil(spans / h0)
    counts = jnp.clip(jnp.where(jnp.isnan(ratio), cap + 1, ratio), 1, cap + 1)
    most = jnp.max(counts)  # in the busiest save interval
    feasible = most * 2.0 ** (MIN_LEVELS - 1) <= cap  # else no level is run
    first = jnp.sum(counts) * feasible  # Euler steps of level 0 (a float: 2^j overflows)
    counts = jnp.where(feasible, counts, 0).astype(jnp.int32)

    def level(j):
        return _level(grad, params, ts, counts, tau, 2**j)

    def body(carry):
        j, coarse, middle, olds, loss_olds, _, steps = carry
        fine = level(j)
        news = (_richardson(fine, middle, coarse), _first_order(fine, middle))
        loss_news = tuple(losses(x) for x in news)
        gaps = jnp.stack(
            [
                _gap(a, b, la, lb, rtol, atol)
                for a, b, la, lb in zip(news, olds, loss_news, loss_olds, strict=True)
            ]
        )
        gaps = jnp.where(j >= MIN_LEVELS - 1, gaps, jnp.inf)
        return j + 1, middle, fine, news, loss_news, gaps, steps + first * 2.0**j

    def more(carry):
        j, *_, gaps, _ = carry
        return (jnp.min(gaps) > 1) & feasible & (j < options.max_levels) & (most * 2.0**j <= cap)

    y0, y1 = level(0), level(1)
    zero = losses(y0)
    # (the candidates before the third level are placeholders: their gaps are not taken)
    carry = (2, y0, y1, (y1, y1), (zero, zero), jnp.full((2,), jnp.inf, dtype), first * 3)
    j, _, fine, news, _, gaps, steps = jax.lax.while_loop(more, body, carry)
    # the candidate with the smaller estimate (the second-order one where they tie)
    pick = jnp.argmin(gaps)
    new = _tree(lambda a, b: jnp.where(pick == 0, a, b), *news)
    gap = gaps[pick]
    result = RESULTS.where(gap <= 1, RESULTS.successful, RESULTS.max_steps_reached)
    coarsest = jnp.where(feasible, jnp.max(spans / jnp.maximum(counts, 1)), jnp.nan)
    stats = {
        "num_steps": steps,
        "num_levels": jnp.where(feasible, j, 0),
        "finest_step": coarsest / 2.0 ** (j - 1).astype(dtype),
        "error_estimate": gap,
        "first_step": coarsest,
        "extrapolation_order": 2 - pick.astype(jnp.int32),
    }
    return new, result, stats
