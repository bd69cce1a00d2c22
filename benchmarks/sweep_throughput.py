"""Seed-sweep throughput: orthogonal-data GD (n = 64, m = 47, 2,000 epochs, float64).

Runs the GD sweep at several seed counts with the batch size the cache rule picks, against one
compiled seed, and the same sweep with 1, 2 and 8 XLA host devices (each in a subprocess,
since the device count is fixed when JAX starts). Writes `results.json` to `--out`.

    python -m benchmarks.sweep_throughput [--seeds-list 1 16 64 256] [--devices-list 1 2 8]
"""

import argparse
import json
import os
import subprocess
import sys

import jax
import numpy as np

from benchmarks._common import (
    Timer,
    best_seconds,
    enable_float64,
    environment,
    log,
    parser,
    write_results,
)
from dynamics import balanced_init, orthogonal_data
from integrators import gradient_descent, sweep

N, M, EPOCHS, ETA = 64, 47, 2000, 0.5


def make(key, alpha):
    kx, kw = jax.random.split(key)
    X, y = orthogonal_data(N, key=kx)
    return X, y, balanced_init(M, N, alpha, key=kw)


def run(instance, alpha):
    X, y, model = instance
    sol = gradient_descent(
        model, X, y, learning_rate=ETA, tol=0.0, max_steps=EPOCHS, num_checkpoints=20
    )
    return {"final_loss": sol.final_loss, "steps": sol.num_steps}


def measure(seeds: int, base_seed: int, repeats: int = 3) -> dict:
    """Best-of-`repeats` warm sweep time (compilation excluded) for `seeds` seeds."""
    grid = [{"alpha": 1e-30 / np.sqrt(M)}]
    results = []

    def once():
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
    inst = make(jax.random.PRNGKey(base_seed), 1e-30 / np.sqrt(M))
    f = jax.jit(lambda i: run(i, 1e-30 / np.sqrt(M)))
    return EPOCHS / best_seconds(lambda: f(inst), repeats)


def _in_subprocess(devices: int, seeds: int, base_seed: int) -> dict:
    env = dict(os.environ)
    flags = " ".join(
        f for f in env.get("XLA_FLAGS", "").split() if "host_platform_device_count" not in f
    )
    env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}".strip()
    cmd = [sys.executable, "-m", "benchmarks.sweep_throughput", "--child", str(seeds)]
    cmd += ["--seed", str(base_seed)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    if proc.returncode:
        raise RuntimeError(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = parser("sweep_throughput", __doc__.splitlines()[0], default_seeds=256)
    p.add_argument("--seeds-list", type=int, nargs="+", default=[1, 16, 64, 256])
    p.add_argument("--devices-list", type=int, nargs="+", default=[1, 2, 8])
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    enable_float64()
    if args.child is not None:
        print(json.dumps(measure(args.child, args.seed)))
        return None
    if args.quick:
        args.seeds_list, args.devices_list, args.seeds = [1, 16], [1, 2], 16
    timer = Timer()
    single = single_seed_rate(args.seed)
    log(f"one compiled seed: {single:.3g} epochs/s")
    rows = []
    for s in args.seeds_list:
        rows.append(measure(s, args.seed))
        r = rows[-1]
        log(
            f"{s:>5} seeds on {r['devices']} device(s): {r['seed_epochs_per_s']:.3g} seed-epochs/s"
            f" (batch {r['batch_size']}, chunk {r['chunk_size']})"
        )
    sharded = []
    for k in args.devices_list:
        sharded.append(_in_subprocess(k, args.seeds, args.seed))
        r = sharded[-1]
        log(f"{args.seeds} seeds on {k} host device(s): {r['seconds']:.3f} s")
    results = {
        "benchmark": "sweep_throughput",
        "config": {
            "n": N,
            "m": M,
            "epochs": EPOCHS,
            "learning_rate": ETA,
            "alpha": "1e-30 / sqrt(m)",
            "dtype": "float64",
            "base_seed": args.seed,
        },
        "environment": environment(),
        "single_seed_epochs_per_s": single,
        "rows": rows,
        "sharded": sharded,
        "wall_seconds": timer(),
    }
    print(f"{'seeds':>6} {'devices':>7} {'batch':>5} {'chunk':>5} {'seed-epochs/s':>14}")
    for r in rows + sharded:
        print(
            f"{r['seeds']:>6} {r['devices']:>7} {r['batch_size']:>5} {r['chunk_size']:>5}"
            f" {r['seed_epochs_per_s']:>14.3g}"
        )
    print(f"one compiled seed: {single:.3g} epochs/s")
    write_results(args.out, results)
    return results


if __name__ == "__main__":
    main()
