"""Around the jump process: its exponents at given times (`predicted_exponents`), the
optimal cost (`min_norm_cost`), the width that covers every sample (`coverage_width`), the
jump times measured on a simulated loss curve (`crossing_times`) and a time grid dense near
the predicted jumps (`jump_time_grid`).

Paper: *Mildly Overparameterized ReLU Networks on Orthogonal Data: Incremental Learning and
Implicit Bias* (NeurIPS 2026, arXiv:2605.27097).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._diagonal import DiagonalJumpsSolution
from ._saddle import _crossings
from ._saddle_solution import SaddleJumpsSolution
from .checks import (
    _real_numbers,
    check_finite,
    check_model,
    check_positive,
    check_positive_int,
    check_shape,
    check_time_grid,
    check_time_scale,
    check_value,
    inexact,
    is_concrete,
)


def predicted_exponents(
    prediction: SaddleJumpsSolution, ts: Float[Array, " T"]
) -> Float[Array, "T m"]:
    """Algorithm 1's exponents ell_j(t) at the times `ts` (||w_j|| = alpha^(-ell_j)).

    ell_j(0) = -1 and ell_j grows at `rates[k, j]` on (t_{k-1}, t_k); a neuron that fires
    stays at ell = 0. After the last jump no neuron has unfitted support, so the exponents
    stop. `jax.vmap`-able over seeds.

    **Arguments:**

    - `prediction`: a `SaddleJumpsSolution` (from `saddle_jumps`), whose `times`, `neurons`
      and `rates` are used.
    - `ts` (T,): the times, in the rescaled clock, finite, >= 0 and nondecreasing.

    **Returns:** ell_j(t), an array of shape (T, m), capped at 0.

    **Raises:** `ValueError` where `ts` is not a non-empty, finite, nondecreasing grid from
    t >= 0.

    >>> from theory import saddle_jumps
    >>> pred = saddle_jumps(jnp.array([1.0]), jnp.array([1.0]), jnp.array([[0.3]]))
    >>> predicted_exponents(pred, jnp.array([0.0, 0.5, 2.0]))[:, 0].tolist()
    [-1.0, -0.5, 0.0]
    """
    return _predicted_exponents(prediction, check_time_grid("ts", ts))


@jax.jit
def _predicted_exponents(prediction: SaddleJumpsSolution, ts):
    real = prediction.neurons >= 0
    starts = jnp.concatenate([jnp.zeros((1,)), jnp.where(real, prediction.times, jnp.inf)[:-1]])
    ends = jnp.where(real, prediction.times, jnp.inf)
    spent = jnp.clip(ts[:, None] - starts[None, :], 0.0, (ends - starts)[None, :])  # (T, K)
    ell = -1.0 + jnp.where(real[None, :], spent, 0.0) @ prediction.rates
    return jnp.minimum(ell, 0.0)


def min_norm_cost(y: Float[Array, " n"]) -> Float[Array, ""]:
    """Smallest 1/2 ||theta||^2 over all interpolators of orthonormal data: ||y_+|| + ||y_-||.

    Lower bound: each neuron contributes c_j = a_j relu(X w_j) with ||c_j|| <= |a_j| ||w_j||
    <= (a_j^2 + ||w_j||^2)/2, entrywise >= 0 for a_j > 0 and <= 0 for a_j < 0. Interpolation
    sum_j c_j = y then forces sum_{a_j>0} c_j >= y_+ entrywise, so
    sum_{a_j>0} ||c_j|| >= ||sum_{a_j>0} c_j|| >= ||y_+||, and likewise for y_-.
    Attained by one neuron per sign: a = sqrt(||y_+||), w = sum_{y_i>0} (y_i / a) x_i, and the
    same for y_- with a < 0.

    **Arguments:**

    - `y` (n,): the labels, real and finite.

    **Returns:** ||y_+|| + ||y_-||, a scalar array.

    **Raises:** `ValueError` where `y` is not 1-D, or holds complex, boolean or non-finite
    entries.

    >>> float(min_norm_cost(jnp.array([3.0, 4.0, -1.0])))
    6.0
    """
    y = check_finite("y", inexact(y, name="y"))
    check_shape("y", y, (None,))
    pos = jnp.where(y > 0, y, 0.0)
    neg = jnp.where(y < 0, y, 0.0)
    return jnp.linalg.norm(pos) + jnp.linalg.norm(neg)


def coverage_width(n, delta=1e-4):
    """Width m = ceil(ln(n / delta) / ln(4/3)) for which every sample lies in some neuron's
    support with probability >= 1 - delta.

    A sample misses one random neuron's support (<u, x_i> > 0 and s y_i > 0, probability 1/4)
    with probability 3/4, so a union bound gives P(some sample uncovered) <= n (3/4)^m.
    With delta = 1e-4 this is the paper's m = ceil(ln(1e4 n) / ln(4/3)); n = 32 gives 45.

    **Arguments:**

    - `n`: the number of samples, an integer >= 1.
    - `delta`: the failure probability, in (0, 1) (default 1e-4).

    **Returns:** m: a Python int for concrete inputs (Python and NumPy numbers, arrays), a JAX
    integer array under `jit`.

    **Raises:** `ValueError` where `n` is not an integer >= 1 or `delta` is not a number in
    (0, 1) (for traced inputs through `eqx.error_if`).

    >>> coverage_width(32)
    45
    """
    if delta is None or isinstance(delta, str | bool):
        raise ValueError(f"`delta` must be a number in (0, 1), got {delta!r}")
    if is_concrete(n) and is_concrete(delta):
        n = check_positive_int("n", n)
        if not 0 < float(np.asarray(delta)) < 1:
            raise ValueError(f"`delta` must lie in (0, 1), got {delta}")
        return math.ceil((math.log(n) - math.log(delta)) / math.log(4 / 3) - 1e-12)
    n, delta = _real_numbers("n", n), _real_numbers("delta", delta)
    whole = jnp.issubdtype(n.dtype, jnp.integer) | (jnp.floor(n) == n)  # traced 2.5 is not a count
    ok = (n >= 1) & whole & (delta > 0) & (delta < 1)
    n = check_value(n, ok, "`n` must be an integer >= 1 and `delta` in (0, 1)")
    return jnp.ceil((jnp.log(n) - jnp.log(delta)) / jnp.log(4.0 / 3.0) - 1e-12).astype(int)


def crossing_times(
    ts: Float[Array, " T"],
    loss: Float[Array, " T"],
    prediction: SaddleJumpsSolution | DiagonalJumpsSolution,
) -> Float[Array, " K"]:
    """Measured jump times of a simulated loss curve, matched to a predicted jump process
    (`saddle_jumps`' or `diagonal_jumps`').

    Jump k is measured as the first time at which `loss` falls below the midpoint between the
    predicted plateaus k-1 and k (plateau 0 = mean(y^2)/2), interpolated linearly in log-loss
    between save times. `nan` where the loss never crosses within `ts`, or after the last
    predicted jump. `jax.vmap`-able over seeds.

    **Arguments:**

    - `ts` (T,): the save times, finite, >= 0 and nondecreasing.
    - `loss` (T,): the simulated loss at `ts`, >= 0 (`inf` after a failed solve), no NaN.
    - `prediction`: a `SaddleJumpsSolution` or a `DiagonalJumpsSolution`.

    **Returns:** the measured jump times, an array of shape (K,) (K: the prediction's padded
    number of jumps), `nan` as said above.

    **Raises:** `ValueError` where `ts` is not a non-empty, finite, nondecreasing grid from
    t >= 0, `loss` is not of shape (T,) or holds a negative value or NaN, or `prediction` is
    another Equinox module.

    >>> from theory import saddle_jumps
    >>> pred = saddle_jumps(jnp.array([1.0]), jnp.array([1.0]), jnp.array([[0.3]]))
    >>> ts = jnp.array([0.0, 1.0, 2.0]); loss = jnp.array([0.5, 0.5, 0.125])
    >>> float(crossing_times(ts, loss, pred)[0])  # log-loss crosses log 0.25 half-way
    1.5
    """
    ts = check_time_grid("ts", ts)
    check_shape("loss", loss, (ts.shape[0],))
    loss = inexact(loss, ts.dtype, "loss")
    # inf marks save times after a failed solve stopped (never crossed); NaN or a negative
    # value is no loss at all
    loss = check_value(
        loss, jnp.all(loss >= 0), "`loss` must be >= 0 (inf after a failed solve), without NaN"
    )
    return _crossing_times(ts, loss, prediction)


@jax.jit
def _crossing_times(ts, loss, prediction):
    if isinstance(prediction, DiagonalJumpsSolution):  # its rows past the last jump repeat
        real = jnp.arange(prediction.losses.shape[0]) < prediction.num_jumps
        plateaus = jnp.where(real, prediction.losses, jnp.nan)
        return _crossings(ts, loss, prediction.initial_loss, plateaus)
    check_model("prediction", prediction, SaddleJumpsSolution)
    return _crossings(ts, loss, prediction.initial_plateau, prediction.plateaus)


def jump_time_grid(
    prediction: SaddleJumpsSolution,
    t1,
    *,
    time_scale,
    num: int = 4000,
    window: float = 30.0,
    window_points: int = 256,
) -> Float[Array, " T"]:
    """Save times that resolve every jump: a uniform grid on [0, t1] merged with a dense
    window around each predicted jump time t_k.

    At finite alpha a jump lasts ~ n / (log(1/alpha) ||y_S||) in the rescaled clock and lands
    O(1/log(1/alpha)) away from t_k, so at alpha = 10^-10000 it is far narrower than any
    affordable uniform grid. With `time_scale` tau = log(1/alpha), window k is t_k (1 +- w)
    with w = min(0.5, `window` / tau), sampled at `window_points` points (clipped to [0, t1]).
    Pass the grid to the flow and its loss to `crossing_times`.

    **Arguments:**

    - `prediction`: a `SaddleJumpsSolution` (from `saddle_jumps`), whose `times` are used.
    - `t1`: the last time, finite and > 0.
    - `time_scale`: tau = log(1/alpha), one finite number > 0.
    - `num`: the points of the uniform grid on [0, t1], an integer >= 1 (default 4000).
    - `window`: one finite number > 0; each window's half-width is w = min(0.5,
      `window` / tau) relative to its jump time (default 30).
    - `window_points`: the points of each window, an integer >= 1 (default 256).

    **Returns:** the sorted grid of `num` + K `window_points` times (K = min(m, n), the
    length of `prediction.times`), the last one `t1`. A padded (not real) jump's window is
    centred on `t1`: its lower half lies in [(1 - w) t1, t1], its upper half is clipped to
    copies of `t1`.

    **Raises:** `ValueError` where `num` or `window_points` is not an integer >= 1, `t1` is
    not finite and > 0, or `window` or `time_scale` is not one finite number > 0.

    >>> from theory import saddle_jumps
    >>> pred = saddle_jumps(jnp.array([1.0]), jnp.array([1.0]), jnp.array([[0.3]]))
    >>> ts = jump_time_grid(pred, 2.0, time_scale=100.0, num=5, window_points=3)
    >>> ts.tolist()
    [0.0, 0.5, 0.7, 1.0, 1.0, 1.3, 1.5, 2.0]
    """
    num = check_positive_int("num", num)
    window_points = check_positive_int("window_points", window_points)
    t1 = check_positive("t1", inexact(t1, name="t1"))
    window = check_positive("window", window, scalar=True)
    w = jnp.minimum(0.5, window / check_time_scale(time_scale, t1.dtype))
    centers = jnp.where(jnp.isfinite(prediction.times), prediction.times, t1)
    offsets = jnp.linspace(-1.0, 1.0, window_points, dtype=t1.dtype)
    local = centers[:, None] * (1.0 + w * offsets[None, :])
    grid = jnp.concatenate([jnp.linspace(0.0, t1, num, dtype=t1.dtype), local.ravel()])
    return jnp.sort(jnp.clip(grid, 0.0, t1))
