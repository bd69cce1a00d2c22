"""Plateaus and jumps read off a loss curve alone, for data where no theory predicts them."""

import numpy as np

from .checks import check_finite, check_shape, check_time_grid, inexact


def loss_plateaus(
    ts, loss, *, rate_threshold: float = 1e-2, min_drop: float = 0.05, floor: float = 1e-10
) -> dict:
    """Find the plateaus of a saved loss curve and the jumps between them.

    Works on the log-loss l(t) = log L(t) and its decay rate rho = -dl/dt (finite differences
    on the save grid, which may be nonuniform). A *jump* is a maximal run of save intervals
    with rho > `rate_threshold` x max rho whose total drop is at least a fraction `min_drop` of
    the loss (L_after <= (1 - min_drop) L_before); the stretches between jumps are plateaus.
    Each jump's time is the first crossing of the midpoint (L_before + L_after) / 2,
    interpolated linearly in log-loss between save times, as `crossing_times` measures jumps
    against Algorithm 1's plateaus. Losses below `floor` x max L count as zero (clipped
    there; zero itself, or a rounding below it, too): the exponential convergence to an
    interpolator, a straight line in log-loss, is no jump. NumPy in, NumPy out (a measurement).

    **Arguments:**

    - `ts` (T,): increasing save times (at least 3); `loss` (T,): the loss there, >= 0 up
      to rounding and positive somewhere.
    - `rate_threshold`: a jump's decay rate, as a fraction of the largest, in (0, 1).
    - `min_drop`: a jump's least drop, as a fraction of the loss before it, in (0, 1).
    - `floor`: losses below `floor` x max L count as zero, in (0, 1).

    **Raises:** `ValueError` on shapes that differ, non-finite or complex values, a loss
    below zero beyond rounding (or zero everywhere), options outside (0, 1), fewer than 3
    save times, or a loss that changes between equal save times.

    **Returns:** a dict of NumPy arrays: `times` (J,) the jump times, `levels` (J + 1,) the loss
    on each plateau (where it is flattest: the least rho between two jumps), `starts` /
    `ends` (J,) where each jump's run begins and ends (save times).

    >>> ts = np.linspace(0.0, 10.0, 2001)
    >>> loss = 1.0 - 0.5 / (1 + np.exp(-8 * (ts - 3))) - 0.4 / (1 + np.exp(-8 * (ts - 7)))
    >>> found = loss_plateaus(ts, loss)
    >>> np.round(found["levels"], 3).tolist(), np.round(found["times"], 2).tolist()
    ([1.0, 0.5, 0.1], [3.0, 7.0])
    """
    ts = np.asarray(check_time_grid("ts", ts), dtype=float)
    check_shape("loss", loss, ts.shape)
    loss = np.asarray(check_finite("loss", inexact(loss, float, "loss")), dtype=float)
    for name, v in (("rate_threshold", rate_threshold), ("min_drop", min_drop), ("floor", floor)):
        if not 0 < float(v) < 1:
            raise ValueError(f"`{name}` must lie in (0, 1), got {v}")
    if ts.size < 3:
        raise ValueError(f"need at least 3 save times, got {ts.size}")
    repeated = np.flatnonzero((np.diff(ts) == 0) & (np.diff(loss) != 0))
    if repeated.size:
        i = int(repeated[0])
        raise ValueError(
            f"`loss` changes between equal save times (ts[{i}] = ts[{i + 1}] = {ts[i]}, loss "
            f"{loss[i]} -> {loss[i + 1]}): a drop of zero duration has no rate"
        )
    # zero, or below it by rounding (a closed-form population loss at its teacher gave
    # -2e-16), counts as zero: clipped to the floor like any loss below it
    if not loss.max() > 0 or np.any(loss < -floor * loss.max()):
        raise ValueError(
            "`loss` must be >= 0 everywhere (up to rounding: -floor x max L) and positive "
            f"somewhere (its logarithm is read), got values from {loss.min()} to {loss.max()}"
        )
    loss = np.maximum(loss, floor * loss.max())
    log = np.log(loss)
    dt = np.diff(ts)
    rho = np.where(dt > 0, -np.diff(log) / np.where(dt > 0, dt, 1.0), 0.0)  # per interval
    fast = rho > rate_threshold * max(float(rho.max()), np.finfo(float).tiny)
    edges = np.flatnonzero(np.diff(np.r_[0, fast.astype(int), 0]))
    runs = []
    for lo, hi in zip(edges[::2], edges[1::2], strict=True):  # intervals lo .. hi-1
        if loss[hi] <= (1.0 - min_drop) * loss[lo]:
            runs.append((lo, hi))
    # each plateau's level: the loss where it is flattest (least rho) between two jumps
    bounds = [0] + [x for run in runs for x in run] + [ts.size - 1]
    levels = []
    for a, b in zip(bounds[::2], bounds[1::2], strict=True):
        if b > a:
            levels.append(loss[a + int(np.argmin(rho[a:b]))])
        else:
            levels.append(loss[a])
    times = []
    for (lo, hi), before, after in zip(runs, levels[:-1], levels[1:], strict=True):
        mid = np.log(0.5 * (before + after))
        seg = log[lo : hi + 1]
        k = max(int(np.argmax(seg < mid)), 1)  # first point below the midpoint
        frac = np.clip((seg[k - 1] - mid) / (seg[k - 1] - seg[k]), 0.0, 1.0)
        times.append(ts[lo + k - 1] + frac * (ts[lo + k] - ts[lo + k - 1]))
    starts = [ts[lo] for lo, _ in runs]
    ends = [ts[hi] for _, hi in runs]
    return {
        "times": np.array(times),
        "levels": np.array(levels),
        "starts": np.array(starts),
        "ends": np.array(ends),
    }
