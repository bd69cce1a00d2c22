"""A small GD sweep, run as a subprocess by tests/test_sweep.py.

python tests/sweep_job.py OUT RESULT.npz [--steps N] [--chunk C] [--seeds S] [--eta E]
"""

import argparse
import json

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from dynamics import balanced_init, orthogonal_data  # noqa: E402
from integrators import gradient_descent, sweep  # noqa: E402

N, M = 8, 10


def make(key, alpha, steps):
    kx, kw = jax.random.split(key)
    X, y = orthogonal_data(N, key=kx)
    return X, y, balanced_init(M, N, alpha, key=kw)


def run(instance, alpha, steps):
    X, y, model = instance
    sol = gradient_descent(X, y, model, learning_rate=0.5, tol=0.0, max_steps=steps)
    return {"loss": sol.loss, "a": sol.model.a, "final_loss": sol.final_loss}


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("result")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--chunk", type=int, default=4)
    p.add_argument("--seeds", type=int, default=24)
    p.add_argument("--eta", type=float, default=0.5)
    args = p.parse_args(argv)
    res = sweep(
        run,
        make=make,
        seeds=args.seeds,
        grid=[{"alpha": 1e-10, "steps": args.steps}, {"alpha": 1e-30, "steps": args.steps}],
        static=("steps",),
        out=None if args.out == "-" else args.out,
        name="sweep_job",
        config={"eta": args.eta},
        chunk_size=args.chunk,
        batch_size=2,
    )
    arrays = {f"{i}/{k}": v for i, o in enumerate(res.outputs) for k, v in o.items()}
    np.savez(args.result, **arrays)
    print(
        json.dumps(
            {
                "computed": res.computed_chunks,
                "loaded": res.loaded_chunks,
                "devices": res.devices,
                "failed": res.failed,
            }
        )
    )


if __name__ == "__main__":
    main()
