"""The first paper's instance and measurements, shared by the saddle-to-saddle benchmarks.

One seed is orthonormal data (n = d) with Gaussian labels and a balanced init of width m at
alpha = 10^-p / sqrt(m); the same key gives the same data, signs and directions for every p,
so the alphas differ only in scale. `run` is the main job's per-seed simulation (the rescaled
flow against Algorithm 1), `summarize` its per-alpha summary.
"""

import jax
import jax.numpy as jnp
import numpy as np

from dynamics import balanced_init, half_squared_norm, orthogonal_data, signs_and_directions
from integrators import orthogonal_flow
from theory import crossing_times, min_norm_cost, saddle_jumps

HORIZON = 1.15  # the main job integrates to 1.15 x the last predicted jump time
GRID = 4000  # save times per run


def time_scale(p, width):
    """The time scale tau = log(1/alpha) for alpha = 10^-p / sqrt(width), exact where alpha
    itself would underflow."""
    return p * jnp.log(10.0) + 0.5 * jnp.log(width)


def instance(key, log10_inv_alpha, n, width, labels="gaussian"):
    """Orthonormal data (Gaussian or +-1 labels) and a balanced init at alpha = 10^-p / sqrt(m)."""
    kx, kw = jax.random.split(key)
    X, y = orthogonal_data(n, key=kx, dtype=jnp.float64, labels=labels)
    alpha = jnp.exp(-time_scale(log10_inv_alpha, width))
    return X, y, balanced_init(width, n, alpha, key=kw, dtype=jnp.float64)


def limit_instance(key, n, width, labels="gaussian"):
    """Labels, signs and directions of the seed of `instance` with the same key: all that the
    vanishing-init flow needs (alpha itself is never formed)."""
    kx, kw = jax.random.split(key)
    X, y = orthogonal_data(n, key=kx, dtype=jnp.float64, labels=labels)
    signs, directions = signs_and_directions(balanced_init(width, n, 0.5, key=kw), X)
    return y, signs, directions


def jump_measurements(pred, ts, loss) -> dict:
    """Algorithm 1's jumps (and their finite-alpha prediction, where `pred` has one) beside the
    ones measured on a loss curve saved at `ts`."""
    return {
        "predicted_times": pred.times,
        "predicted_times_finite_alpha": pred.times_finite_alpha,
        "measured_times": crossing_times(ts, loss, pred),
        "predicted_neurons": pred.neurons,
        "group_sizes": jnp.sum(pred.groups >= 0, axis=-1),
        "num_jumps": pred.num_jumps,
        "predicted_cost": pred.cost,
        "predicted_cost_finite_alpha": pred.cost_finite_alpha,
        "prediction_ok": pred.ok,
    }


def make(key, log10_inv_alpha, n, width, rtol, labels="gaussian"):
    """The main job's seed (`instance`)."""
    return instance(key, log10_inv_alpha, n, width, labels)


def run(instance, log10_inv_alpha, n, width, rtol, labels="gaussian"):
    """The main job's simulation: predict with Algorithm 1 (limit and finite alpha),
    integrate the rescaled flow, measure the jumps."""
    X, y, model = instance
    signs, directions = signs_and_directions(model, X)
    tau = time_scale(log10_inv_alpha, width)
    pred = saddle_jumps(y, signs, directions, time_scale=tau)
    t1 = pred.horizon(HORIZON)
    ts = jnp.linspace(0.0, t1, GRID)
    sol = orthogonal_flow(X, y, model, ts, time_scale=tau, rtol=rtol, atol=rtol)
    return {
        **jump_measurements(pred, ts, sol.loss),
        "measured_cost": half_squared_norm(sol.model),
        "min_norm_cost": min_norm_cost(y),
        "final_loss": sol.loss[-1],
        "solver_steps": sol.stats["num_steps"],
        "rejected_steps": sol.stats["num_rejected_steps"],
        "solve_ok": sol.ok,
        "t1": t1,
        "loss": sol.loss,
        "y": y,
        "signs": signs,
        "directions": directions,
    }


def summarize(p, o, wall) -> dict:
    """Per-alpha summary of one sweep point's outputs (jump-time and cost errors, steps)."""
    real = np.isfinite(o["predicted_times"])
    errs = np.abs(o["measured_times"] / o["predicted_times"] - 1.0)[real]
    fin = np.abs(o["measured_times"] / o["predicted_times_finite_alpha"] - 1.0)[real]
    return {
        "log10_inv_alpha": p,
        "log_inv_alpha": float(time_scale(p, o["signs"].shape[1])),
        "median_rel_error": float(np.nanmedian(errs)),
        "max_rel_error": float(np.nanmax(errs)),
        "jumps": int(errs.size),
        "jumps_not_crossed": int(np.sum(np.isnan(errs))),
        "median_solver_steps": float(np.median(o["solver_steps"])),
        "max_solver_steps": int(np.max(o["solver_steps"])),
        "median_rejected_steps": float(np.median(o["rejected_steps"])),
        "failed_solves": int(np.sum(~o["solve_ok"])),
        "median_cost_rel_error": float(
            np.median(np.abs(o["measured_cost"] / o["predicted_cost"] - 1.0))
        ),
        "median_rel_error_finite_alpha": float(np.nanmedian(fin)),
        "max_rel_error_finite_alpha": float(np.nanmax(fin)),
        "median_cost_rel_error_finite_alpha": float(
            np.median(np.abs(o["measured_cost"] / o["predicted_cost_finite_alpha"] - 1.0))
        ),
        "simultaneous_jumps": int(np.sum((o["group_sizes"] > 1) & real)),
        "failed_predictions": int(np.sum(~o["prediction_ok"])),
        "wall_seconds": wall,
    }
