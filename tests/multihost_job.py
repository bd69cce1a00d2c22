"""One process of a two-process sweep on one machine, run by tests/test_multihost.py.

python tests/multihost_job.py PORT PROCESS_ID OUT RESULT.npz [--steps N]

The multi-host recipe of docs/sweeps.md on localhost: JAX's own multi-process model with a local
coordinator and CPU collectives over gloo; every process runs this same script.
"""

import argparse
import json

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.config.update("jax_enable_x64", True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("process_id", type=int)
    p.add_argument("out")
    p.add_argument("result")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--processes", type=int, default=2)
    args = p.parse_args()
    if args.processes > 1:
        jax.distributed.initialize(
            coordinator_address=f"localhost:{args.port}",
            num_processes=args.processes,
            process_id=args.process_id,
        )
    import numpy as np
    from sweep_job import make, run  # the same small GD sweep as the one-process tests

    from integrators import sweep

    res = sweep(
        run,
        make=make,
        seeds=16,
        grid=[{"alpha": 1e-10, "steps": args.steps}, {"alpha": 1e-30, "steps": args.steps}],
        static=("steps",),
        out=None if args.out == "-" else args.out,
        name="multihost_job",
        chunk_size=4,
        batch_size=2,
        progress=False,
    )
    if jax.process_index() == 0:
        arrays = {f"{i}/{k}": v for i, o in enumerate(res.outputs) for k, v in o.items()}
        np.savez(args.result, **arrays)
    print(
        json.dumps(
            {
                "process": jax.process_index(),
                "devices": res.devices,
                "computed": res.computed_chunks,
                "loaded": res.loaded_chunks,
            }
        )
    )


if __name__ == "__main__":
    main()
