"""The multi-index part of `benchmarks.throughput`: the population flow against the finite-sample
flow, and the finite-sample flow against its FLOP floor."""

import diffrax
import jax
import jax.numpy as jnp

from benchmarks._common import (
    best_seconds,
    comparison_entry,
)
from dynamics import (
    MeanFieldNet,
    mean_field_init,
    sample_loss,
    sample_loss_gradient,
    standard_target,
)
from integrators import mean_field_flow
from theory.numerics import diffeqsolve

FLOW_BATCH = 2500  # rows per batch of the finite-sample field: its (b, m) arrays stay in cache


def _autodiff_mean_field_flow(grad, W0, t1):
    """The finite-sample flow as `mean_field_flow` ran it before, with the autodiff field
    (lambda = 2 throughout, Tsit5, PID at rtol = 1e-4, atol = 1e-6): final W and steps."""
    m = W0.shape[0]
    sol = diffeqsolve(
        diffrax.ODETerm(lambda t, W, args: -2.0 * W - m * grad(W)),
        diffrax.Tsit5(),
        t0=0.0,
        t1=t1,
        dt0=None,
        y0=W0,
        saveat=diffrax.SaveAt(t1=True),
        stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-6),
        max_steps=100_000,
    )
    return sol.ys[-1], sol.stats["num_steps"]


def compare_multi_index(samples: int, t_sim: float, t_floor: float, base_seed: int, peak: float):
    """Population against finite-sample flow in simulated time per second, and the
    finite-sample flow against its FLOP floor: evaluations x 4 n d m (the field's two
    matmuls, X W^T and S^T X) over the measured matmul peak. Tsit5 evaluates the field six
    times per step attempt, plus once for the first stage of the first step (diffrax picks the
    first step without evaluating it); each of the two saves runs the sample loss forward
    (2 n d m). The autodiff field that the flow used before (`jax.grad` of
    `dynamics.sample_loss`) is timed per evaluation beside the written-out one."""
    d, r, m = 100, 20, 250
    batch = min(FLOW_BATCH, samples)
    target = standard_target(r, d)
    W0 = mean_field_init(m, d, key=jax.random.PRNGKey(base_seed))
    X = jax.random.normal(jax.random.PRNGKey(base_seed + 1), (samples, d))
    yv = target.predict(X)
    ts = jnp.array([0.0, t_sim])
    pop = jax.jit(lambda net: mean_field_flow(target, net, ts, weight_decay=2.0))
    fin = jax.jit(
        lambda net: mean_field_flow(
            target, net, ts, weight_decay=2.0, samples=(X, yv), batch_size=batch
        )
    )
    pop_s = best_seconds(lambda: pop(W0), repeats=2)
    fin_s = best_seconds(lambda: fin(W0), repeats=1)
    p, f = pop(W0), fin(W0)
    # the floor comparison on a longer horizon (many steps), against the same solve with
    # the autodiff field the flow had before (same solver, controller and tolerances)
    ts_floor = jnp.array([0.0, t_floor])
    longer = jax.jit(
        lambda net: mean_field_flow(
            target, net, ts_floor, weight_decay=2.0, samples=(X, yv), batch_size=batch
        )
    )
    long_s = best_seconds(lambda: longer(W0), repeats=1)
    g = longer(W0)
    steps = int(g.stats["num_steps"])
    evals = 6 * steps + 1
    per_eval = 4 * samples * d * m  # the field's two matmuls; a save's forward pass is half
    flop = evals * per_eval + 2 * per_eval // 2
    floor = flop / peak
    autodiff = jax.jit(jax.grad(lambda W: sample_loss(MeanFieldNet(W), (X, yv), batch_size=batch)))
    reference = jax.jit(lambda W: _autodiff_mean_field_flow(autodiff, W, t_floor))
    ref_s = best_seconds(lambda: reference(W0.W), repeats=1)
    W_ref, ref_steps = reference(W0.W)
    ref_floor = (6 * int(ref_steps) + 1) * per_eval / peak  # no saves there
    written = jax.jit(lambda W: sample_loss_gradient(MeanFieldNet(W), (X, yv), batch_size=batch))
    before = best_seconds(lambda: autodiff(W0.W), repeats=3)
    after = best_seconds(lambda: written(W0.W), repeats=3)
    per_eval_floor = per_eval / peak
    detail = {
        "population": {
            "seconds": pop_s,
            "steps": int(p.stats["num_steps"]),
            "loss": float(p.loss[-1]),
        },
        "finite_sample": {
            "seconds": fin_s,
            "steps": int(f.stats["num_steps"]),
            "samples": samples,
            "batch_size": batch,
            "population_loss": float(f.loss[-1]),
        },
        "floor": {
            "simulated_time": t_floor,
            "seconds": long_s,
            "steps": steps,
            "field_evaluations": evals,
            "flop": flop,
            "floor_seconds": floor,
            "over_floor": long_s / floor,
            "autodiff_seconds": ref_s,
            "autodiff_steps": int(ref_steps),
            "autodiff_floor_seconds": ref_floor,
            "autodiff_over_floor": ref_s / ref_floor,
            "max_relative_difference": float(
                jnp.max(jnp.abs(g.model.W - W_ref)) / jnp.max(jnp.abs(W_ref))
            ),
        },
        "field_evaluation": {
            "autodiff_seconds": before,
            "written_out_seconds": after,
            "floor_seconds": per_eval_floor,
            "autodiff_over_floor": before / per_eval_floor,
            "written_out_over_floor": after / per_eval_floor,
            "max_abs_difference": float(jnp.max(jnp.abs(autodiff(W0.W) - written(W0.W)))),
        },
        "simulated_time": t_sim,
    }
    return [
        comparison_entry(
            f"multi-index: population vs finite-sample flow (n = {samples})",
            t_sim / pop_s,
            t_sim / fin_s,
            "simulated time / s",
            "higher",
        ),
        comparison_entry(
            "finite-sample flow vs FLOP floor",
            long_s,
            floor,
            "s",
            "lower",
            note=f"the whole solve to t = {t_floor} against evaluations x 4 n d m / matmul peak",
        ),
        comparison_entry(
            "finite-sample flow (autodiff field, before) vs FLOP floor",
            ref_s,
            ref_floor,
            "s",
            "lower",
        ),
        comparison_entry(
            "finite-sample field evaluation: written out vs autodiff",
            after,
            before,
            "s",
            "lower",
        ),
    ], detail
