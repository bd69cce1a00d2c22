"""The weak/strong-signal phase transition of benign overfitting in leaky-ReLU nets.

For each (n, d) and signal ||mu|| on a log grid, several seeds: the net is trained by normalized
GD (GD on log L of the exponential loss) from a tiny init to its max-margin direction, then its
train error (interpolation: 0), its closed-form test error (`theory.mixture_test_error`, exact
for Gaussian noise when the decision boundary is linear), and a Monte Carlo test error of the
trained net itself on fresh samples, with its standard error. The regime indicator is
n ||mu||^2 / R with R = E||z||^2 = d sigma^2 (`theory.signal_regime`): weak below 1, strong
above. Writes `results.json` and `transition.png` to `--out`.

    python -m benchmarks.phase_transition [--seeds 8] [--signals ...] [--shapes 20x400 50x400]
"""

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._common import Timer, enable_float64, host_devices, log, parser, pyplot, save_figure
from benchmarks._driver import finish, header, run_sweep
from dynamics import gaussian_mixture, sampled_test_error, small_leaky_init
from integrators import margin_gradient_descent
from theory import bayes_error, mixture_test_error, signal_regime

M, GAMMA, INIT_SCALE = 10, 0.1, 1e-10
TEST_BATCH = 2000
SIGNALS = tuple(float(s) for s in np.round(np.geomspace(0.3, 8.0, 10), 3))


def make(key, signal, n, d, steps, test_batches):
    kd, kw = jax.random.split(key)
    X, y, mu, _ = gaussian_mixture(n, d, signal=signal, key=kd)
    return X, y, mu, small_leaky_init(M, d, GAMMA, scale=INIT_SCALE, key=kw), key


def run(instance, signal, n, d, steps, test_batches):
    X, y, mu, net, key = instance
    eta = 1.0 / jnp.max(jnp.sum(X * X, axis=1))
    sol = margin_gradient_descent(
        X, y, net, learning_rate=eta, max_steps=steps, num_checkpoints=2, normalized=True
    )
    trained = sol.model
    mc = sampled_test_error(
        trained,
        key=jax.random.fold_in(key, 1),
        signal=signal,
        num_batches=test_batches,
        batch_size=TEST_BATCH,
    )
    cf = mixture_test_error(trained.W, trained.a, mu)
    total = TEST_BATCH * test_batches
    return {
        "train_error": jnp.mean(y * trained.predict(X) <= 0),
        "closed_form_error": cf,
        "monte_carlo_error": mc,
        # the standard error of the estimate, from the model's own error rate
        "monte_carlo_stderr": jnp.sqrt(cf * (1 - cf) / total),
        "activated": sol.activated[-1],
        "regime": signal_regime(n, signal, d),
        "log_loss": sol.log_loss[-1],
        "solve_ok": sol.ok,
    }


def _row(point, o) -> dict:
    se = o["monte_carlo_stderr"]
    diff = np.abs(o["closed_form_error"] - o["monte_carlo_error"])
    z = np.where(se > 0, diff / np.where(se > 0, se, 1.0), np.where(diff > 0, np.inf, 0.0))
    seeds = o["train_error"].shape[0]
    return {
        "signal": float(point["signal"]),
        "n": point["n"],
        "d": point["d"],
        "regime_ratio": float(o["regime"][0]),
        "regime": "strong" if o["regime"][0] > 1 else "weak",
        "train_error": float(np.mean(o["train_error"])),
        "closed_form_error": float(np.mean(o["closed_form_error"])),
        "monte_carlo_error": float(np.mean(o["monte_carlo_error"])),
        "monte_carlo_stderr": float(np.sqrt(np.sum(se**2)) / seeds),
        "max_abs_z": float(np.max(z)),
        "activated_fraction": float(np.mean(o["activated"])),
        "bayes_error": bayes_error(float(point["signal"])),  # Phi(-||mu||)
        "seeds": int(seeds),
    }


def run_benchmark(
    signals=SIGNALS,
    shapes=((20, 400), (50, 400), (20, 1600)),
    seeds=8,
    seed=0,
    steps=20_000,
    test_batches=10,
    out=None,
):
    enable_float64()
    timer = Timer()
    log(f"phase_transition: {len(signals)} signals x {list(shapes)}, {seeds} seeds")
    grid = [
        dict(signal=float(s), n=n, d=d, steps=steps, test_batches=test_batches)
        for n, d in shapes
        for s in signals
    ]
    result, record = run_sweep(
        run,
        make=make,
        seeds=seeds,
        grid=grid,
        static=("n", "d", "steps", "test_batches"),
        out=out,
        name="phase_transition",
        config={"m": M, "gamma": GAMMA, "init_scale": INIT_SCALE, "test_batch": TEST_BATCH},
        base_seed=seed,
        ok=("solve_ok",),
    )
    rows = [_row(p, o) for p, o in zip(grid, result.outputs, strict=True)]
    config = {
        "signals": [float(s) for s in signals],
        "shapes": [list(s) for s in shapes],
        "m": M,
        "gamma": GAMMA,
        "seeds": seeds,
        "training": f"normalized GD, {steps} steps, eta = 1 / max ||x_i||^2",
        "test_samples": TEST_BATCH * test_batches,
        "noise": "gaussian, Sigma = I_d",
        "regime": "n ||mu||^2 / R, R = E||z||^2 = d",
    }
    return {
        **header("phase_transition", config, seed),
        "wall_seconds": timer(),
        **record,
        "rows": rows,
        "max_abs_z": max(r["max_abs_z"] for r in rows),
    }


def table(results: dict) -> str:
    head = (
        f"{'n':>4} {'d':>5} {'||mu||':>7} {'ratio':>7} {'regime':>6} {'train':>6}"
        f" {'closed form':>11} {'Monte Carlo':>18} {'max |z|':>7} {'act':>4}"
    )
    lines = [head, "-" * len(head)]
    for r in results["rows"]:
        lines.append(
            f"{r['n']:>4} {r['d']:>5} {r['signal']:>7.3f} {r['regime_ratio']:>7.3f}"
            f" {r['regime']:>6} {r['train_error']:>6.3f} {r['closed_form_error']:>11.3e}"
            f" {r['monte_carlo_error']:>9.3e} +- {r['monte_carlo_stderr']:<6.1e}"
            f" {r['max_abs_z']:>7.2f} {r['activated_fraction']:>4.2f}"
        )
    lines.append(
        f"largest |closed form - Monte Carlo| over the sweep: {results['max_abs_z']:.2f} standard"
        " errors"
    )
    lines.append(f"total wall time {results['wall_seconds']:.1f} s (compilation included)")
    return "\n".join(lines)


def plot(results: dict, path) -> None:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6.6, 4.4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    shapes = sorted({(r["n"], r["d"]) for r in results["rows"]})
    for c, (n, d) in zip(colors, shapes, strict=False):
        rows = sorted(
            (r for r in results["rows"] if (r["n"], r["d"]) == (n, d)),
            key=lambda r: r["regime_ratio"],
        )
        x = [r["regime_ratio"] for r in rows]
        ax.plot(
            x,
            [r["closed_form_error"] for r in rows],
            "-",
            color=c,
            label=f"n = {n}, d = {d}: closed form",
        )
        ax.errorbar(
            x,
            [r["monte_carlo_error"] for r in rows],
            yerr=[2 * r["monte_carlo_stderr"] for r in rows],
            fmt="o",
            ms=3,
            color=c,
            capsize=2,
            label="Monte Carlo (2 s.e.)",
        )
        ax.plot(x, [r["bayes_error"] for r in rows], ":", color=c, lw=0.8)
    ax.axvline(1.0, color="k", lw=0.8, ls="--")
    ax.text(1.05, 0.6, "strong signal", transform=ax.get_xaxis_transform(), fontsize=8)
    ax.text(0.95, 0.6, "weak signal", transform=ax.get_xaxis_transform(), fontsize=8, ha="right")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(1e-6, 0.6)
    ax.set_xlabel("n ||mu||^2 / R   (R = E||z||^2 = d)")
    ax.set_ylabel("test error (dotted: Bayes error Phi(-||mu||))")
    ax.set_title("Benign overfitting: test error of the interpolating net")
    ax.legend(fontsize=7)
    save_figure(fig, path)


def main(argv=None) -> dict:
    host_devices()
    p = parser("phase_transition", __doc__.splitlines()[0], default_seeds=8)
    p.add_argument("--signals", type=float, nargs="+", default=None, help="||mu|| values")
    p.add_argument("--shapes", nargs="+", default=["20x400", "50x400", "20x1600"], help="n x d")
    p.add_argument("--steps", type=int, default=20_000, help="normalized GD steps")
    args = p.parse_args(argv)
    shapes = tuple(tuple(int(v) for v in s.split("x")) for s in args.shapes)
    signals = (
        tuple(args.signals) if args.signals else tuple(np.round(np.geomspace(0.3, 8.0, 10), 3))
    )
    steps, batches = args.steps, 10
    if args.quick:
        signals, shapes, args.seeds, steps, batches = (0.5, 6.0), ((20, 400),), 2, 2000, 2
    results = run_benchmark(signals, shapes, args.seeds, args.seed, steps, batches, out=args.out)
    finish(args.out, results, table(results), {"transition.png": plot})
    return results


if __name__ == "__main__":
    main()
