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

from benchmarks import _gd_sweep
from benchmarks._common import Timer, enable_float64, host_devices, log, parser
from benchmarks._driver import finish, header

make, run = _gd_sweep.make, _gd_sweep.run  # the per-seed instance and simulation


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
    host_devices()
    p = parser("sweep_throughput", __doc__.splitlines()[0], default_seeds=256)
    p.add_argument("--seeds-list", type=int, nargs="+", default=[1, 16, 64, 256])
    p.add_argument("--devices-list", type=int, nargs="+", default=[1, 2, 8])
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    enable_float64()
    if args.child is not None:
        print(json.dumps(_gd_sweep.measure(args.child, args.seed)))
        return None
    if args.quick:
        args.seeds_list, args.devices_list, args.seeds = [1, 16], [1, 2], 16
    timer = Timer()
    single = _gd_sweep.single_seed_rate(args.seed)
    log(f"one compiled seed: {single:.3g} epochs/s")
    rows = []
    for s in args.seeds_list:
        rows.append(_gd_sweep.measure(s, args.seed))
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
    config = {
        "n": _gd_sweep.N,
        "m": _gd_sweep.M,
        "epochs": _gd_sweep.EPOCHS,
        "learning_rate": _gd_sweep.ETA,
        "alpha": "1e-30 / sqrt(m)",
        "dtype": "float64",
    }
    results = {
        **header("sweep_throughput", config, args.seed),
        "single_seed_epochs_per_s": single,
        "rows": rows,
        "sharded": sharded,
        "wall_seconds": timer(),
    }
    finish(args.out, results, table(results), {})
    return results


def table(results: dict) -> str:
    lines = [f"{'seeds':>6} {'devices':>7} {'batch':>5} {'chunk':>5} {'seed-epochs/s':>14}"]
    for r in results["rows"] + results["sharded"]:
        lines.append(
            f"{r['seeds']:>6} {r['devices']:>7} {r['batch_size']:>5} {r['chunk_size']:>5}"
            f" {r['seed_epochs_per_s']:>14.3g}"
        )
    lines.append(f"one compiled seed: {results['single_seed_epochs_per_s']:.3g} epochs/s")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
