"""The GD seed sweep that the throughput benchmarks time: orthogonal-data GD with n = 64,
m = 47, eta = 0.5, 2,000 epochs, float64, alpha = 1e-30 / sqrt(m)."""

import jax
import numpy as np

from benchmarks._common import best_seconds
from dynamics import balanced_init, orthogonal_data
from integrators import gradient_descent, sweep

N, M, EPOCHS, ETA = 64, 47, 2000, 0.5
ALPHA = 1e-30 / np.sqrt(M)
FLOPS_PER_EPOCH = 8 * M * N  # data-basis GD: ~8 m n flops per step
# the least memory traffic of one step: the m x n data-basis weights read and written once
BYTES_PER_EPOCH = 2 * 8 * M * N


def make(key, alpha):
    kx, kw = jax.random.split(key)
    X, y = orthogonal_data(N, key=kx)
    return X, y, balanced_init(M, N, alpha, key=kw)


def run(instance, alpha):
    X, y, model = instance
    sol = gradient_descent(
        X, y, model, learning_rate=ETA, tol=0.0, max_steps=EPOCHS, num_checkpoints=20
    )
    return {"final_loss": sol.final_loss, "steps": sol.stats["num_steps"]}


def final_losses(seeds: int, base_seed: int) -> np.ndarray:
    """The sweep's final losses for the first `seeds` seeds."""
    return sweep(
        run, make=make, seeds=seeds, grid=[{"alpha": ALPHA}], base_seed=base_seed, progress=False
    ).outputs[0]["final_loss"]


def measure(seeds: int, base_seed: int, repeats: int = 3) -> dict:
    """Best-of-`repeats` warm sweep time (compilation excluded) for `seeds` seeds."""
    results = []

    def once():
        grid = [{"alpha": ALPHA}]
        results.append(
            sweep(run, make=make, seeds=seeds, grid=grid, base_seed=base_seed, progress=False)
        )
        return results[-1].outputs

    best = best_seconds(once, repeats)
    res = results[-1]
    assert np.all(res.outputs[0]["steps"] == EPOCHS)
    return {
        "seeds": seeds,
        "devices": res.devices,
        "batch_size": res.batch_size,
        "chunk_size": res.chunk_size,
        "seconds": best,
        "seed_epochs_per_s": seeds * EPOCHS / best,
    }


def single_seed_rate(base_seed: int, repeats: int = 3) -> float:
    """One seed, one compiled call: epochs per second."""
    inst = make(jax.random.PRNGKey(base_seed), ALPHA)
    f = jax.jit(lambda i: run(i, ALPHA))
    return EPOCHS / best_seconds(lambda: f(inst), repeats)
