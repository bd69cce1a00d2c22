"""The weak/strong-signal phase transition of benign overfitting in leaky-ReLU nets.

For each (n, d) and signal ||mu|| on a log grid, several seeds: the net is trained by normalized
GD (GD on log L of the exponential loss) from a tiny init to its max-margin direction, then its
train error (interpolation: 0), its closed-form test error (`theory.mixture_test_error`, exact
for Gaussian noise when the decision boundary is linear), and a Monte Carlo test error of the
trained net itself on fresh samples, with its standard error. The regime indicator is
n ||mu||^2 / R with R = E||z||^2 = d sigma^2 (`theory.signal_regime`): weak below 1, strong
above. The lower bound `theory.transition_lower_bound` (the test error no hyperplane net in
the span of the samples can beat; our derivation, see `theory/_regimes.py`) is drawn beside
it, with the per-instance `span_error_bound`.

Heavy tails (Theorem 6.3): `--noise student-t --dof 2.5 3 4 8` adds Student-t mixtures (unit
variance per entry), Gaussian kept as the reference; the Monte Carlo error on Student-t test
samples is set against the Gaussian closed form (the gap) and the Student-t Bayes error.
Label noise (the paper's open conjecture): `--label-noise 0 0.05 0.1 0.2` flips the training
labels; the training error on the noisy labels (interpolation), the test error on clean labels
and its excess over the Bayes error, whether the activation pattern froze over the last decade
of steps, and the KKT residual of margin maximization over GD's checkpoints
(`theory.kkt_residual`). Writes `results.json`, `transition.png` and, with those options,
`tails.png` and `label_noise.png` to `--out`.

    python -m benchmarks.phase_transition [--seeds 8] [--signals ...] [--shapes 20x400 50x400]
        [--noise gaussian student-t] [--dof 2.5 3 4 8] [--label-noise 0 0.05 0.1 0.2]
"""

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._common import (
    Timer,
    enable_float64,
    frozen_over_last_decade,
    host_devices,
    log,
    parser,
    two_per_decade,
)
from benchmarks._driver import finish, header, run_sweep
from benchmarks._phase_plots import noise_law, plot, plot_label_noise, plot_tails
from dynamics import gaussian_mixture, sampled_test_error, small_leaky_init
from integrators import checkpoint_steps, margin_gradient_descent
from theory import (
    bayes_error,
    kkt_residual,
    mixture_test_error,
    signal_regime,
    span_error_bound,
    transition_lower_bound,
)

M, GAMMA, INIT_SCALE = 10, 0.1, 1e-10
TEST_BATCH = 2000
SIGNALS = tuple(float(s) for s in np.round(np.geomspace(0.3, 8.0, 10), 3))


def make(key, signal, n, d, steps, test_batches, noise, dof, label_noise):
    kd, kw = jax.random.split(key)
    X, y, mu, clean = gaussian_mixture(
        n, d, signal=signal, key=kd, noise=noise, dof=dof, label_noise=label_noise
    )
    return X, y, mu, clean, small_leaky_init(M, d, GAMMA, scale=INIT_SCALE, key=kw), key


def run(instance, signal, n, d, steps, test_batches, noise, dof, label_noise):
    X, y, mu, clean, net, key = instance
    eta = 1.0 / jnp.max(jnp.sum(X * X, axis=1))
    sol = margin_gradient_descent(
        X,
        y,
        net,
        learning_rate=eta,
        max_steps=steps,
        num_checkpoints=two_per_decade(steps),
        normalized=True,
    )
    trained = sol.model
    mc = sampled_test_error(  # on clean test labels, with the training noise law
        trained,
        key=jax.random.fold_in(key, 1),
        signal=signal,
        num_batches=test_batches,
        batch_size=TEST_BATCH,
        noise=noise,
        dof=dof,
    )
    cf = mixture_test_error(trained.W, trained.a, mu)
    total = TEST_BATCH * test_batches
    kkt = jax.vmap(lambda W: kkt_residual(W, net.a, X, y, GAMMA).residual)(sol.trajectory.W)
    return {
        "train_error": jnp.mean(y * trained.predict(X) <= 0),
        "flipped": jnp.sum(y != clean),
        "closed_form_error": cf,
        "monte_carlo_error": mc,
        # the standard error of the estimate, from the model's own error rate
        "monte_carlo_stderr": jnp.sqrt(cf * (1 - cf) / total),
        "span_bound": span_error_bound(X, mu),
        "activated": sol.activated[-1],
        "pattern_frozen": frozen_over_last_decade(sol.patterns),
        "kkt_residual": kkt,
        "regime": signal_regime(n, signal, d),
        "log_loss": sol.log_loss[-1],
        "solve_ok": sol.ok,
    }


def _row(point, o, checkpoints) -> dict:
    se = o["monte_carlo_stderr"]
    diff = np.abs(o["closed_form_error"] - o["monte_carlo_error"])
    z = np.where(se > 0, diff / np.where(se > 0, se, 1.0), np.where(diff > 0, np.inf, 0.0))
    seeds = o["train_error"].shape[0]
    signal, n, d, dof = float(point["signal"]), point["n"], point["d"], point["dof"]
    student = point["noise"] == "student_t"
    bayes = bayes_error(signal, dof=dof) if student else bayes_error(signal)
    mc = float(np.mean(o["monte_carlo_error"]))
    kkt = np.asarray(o["kkt_residual"])
    return {
        "signal": signal,
        "n": n,
        "d": d,
        "noise": point["noise"],
        "dof": dof if student else None,
        "label_noise": float(point["label_noise"]),
        "regime_ratio": float(o["regime"][0]),
        "regime": "strong" if o["regime"][0] > 1 else "weak",
        "benign_indicator": n * signal**4 / d,  # n ||mu||^4 / R: >> 1 where the error -> 0
        "train_error": float(np.mean(o["train_error"])),
        "flipped_labels_mean": float(np.mean(o["flipped"])),
        "closed_form_error": float(np.mean(o["closed_form_error"])),
        "monte_carlo_error": mc,
        "monte_carlo_stderr": float(np.sqrt(np.sum(se**2)) / seeds),
        "gap": mc - float(np.mean(o["closed_form_error"])),
        "max_abs_z": float(np.max(z)),
        "activated_fraction": float(np.mean(o["activated"])),
        "pattern_frozen_fraction": float(np.mean(o["pattern_frozen"])),
        "kkt_residual_median": float(np.median(kkt[:, -1])),
        "kkt_residual_curve": [
            [int(s), float(v)] for s, v in zip(checkpoints, np.median(kkt, axis=0), strict=True)
        ],
        "bayes_error": bayes,  # of the noise law; Phi(-||mu||) for Gaussian noise
        "excess_risk": mc - bayes,
        # Gaussian-noise bounds: not bounds under Student-t test noise
        "lower_bound": None if student else float(transition_lower_bound(n, signal, d)),
        "span_bound_mean": None if student else float(np.mean(o["span_bound"])),
        "seeds": int(seeds),
    }


def _noise_laws(noises, dofs):
    """(noise, dof) pairs: Gaussian as given, Student-t at every dof."""
    laws = []
    for noise in noises:
        if noise == "gaussian":
            laws.append(("gaussian", None))
        else:
            laws += [("student_t", float(dof)) for dof in dofs]
    return laws


def run_benchmark(
    signals=SIGNALS,
    shapes=((20, 400), (50, 400), (20, 1600)),
    seeds=8,
    seed=0,
    steps=20_000,
    test_batches=10,
    noises=("gaussian",),
    dofs=(4.5,),
    label_noises=(0.0,),
    out=None,
):
    enable_float64()
    timer = Timer()
    laws = _noise_laws(noises, dofs)
    log(
        f"phase_transition: {len(signals)} signals x {list(shapes)} x noise {laws} x label noise"
        f" {list(label_noises)}, {seeds} seeds"
    )
    grid = [
        dict(
            signal=float(s),
            n=n,
            d=d,
            steps=steps,
            test_batches=test_batches,
            noise=noise,
            dof=4.5 if dof is None else dof,  # gaussian_mixture ignores it for Gaussian noise
            label_noise=float(eta),
        )
        for noise, dof in laws
        for eta in label_noises
        for n, d in shapes
        for s in signals
    ]
    result, record = run_sweep(
        run,
        make=make,
        seeds=seeds,
        grid=grid,
        static=("n", "d", "steps", "test_batches", "noise", "dof"),
        out=out,
        name="phase_transition",
        config={"m": M, "gamma": GAMMA, "init_scale": INIT_SCALE, "test_batch": TEST_BATCH},
        base_seed=seed,
        ok=("solve_ok",),
    )
    checkpoints = [int(c) for c in checkpoint_steps(steps, two_per_decade(steps))]
    rows = [_row(p, o, checkpoints) for p, o in zip(grid, result.outputs, strict=True)]
    config = {
        "signals": [float(s) for s in signals],
        "shapes": [list(s) for s in shapes],
        "m": M,
        "gamma": GAMMA,
        "seeds": seeds,
        "training": f"normalized GD, {steps} steps, eta = 1 / max ||x_i||^2",
        "test_samples": TEST_BATCH * test_batches,
        "test_labels": "clean",
        "noise": [{"noise": noise, "dof": dof} for noise, dof in laws],
        "label_noise": [float(e) for e in label_noises],
        "covariance": "Sigma = I_d (Student-t entries scaled to unit variance)",
        "regime": "n ||mu||^2 / R, R = E||z||^2 = d",
        "lower_bound": "theory.transition_lower_bound (Gaussian noise, hyperplane nets in the "
        "span of the samples)",
    }
    exact = [r for r in rows if r["noise"] == "gaussian" and r["label_noise"] == 0.0]
    return {
        **header("phase_transition", config, seed),
        "wall_seconds": timer(),
        **record,
        "rows": rows,
        # the closed form is exact only for Gaussian noise (and a hyperplane boundary)
        "max_abs_z": max((r["max_abs_z"] for r in exact), default=None),
    }


def _num(v) -> str:
    return "-" if v is None else f"{v:.2e}"


def table(results: dict) -> str:
    head = ("noise", "flip", "n", "d", "‖mu‖", "ratio", "train", "closed form", "Monte Carlo",
            "gap", "max abs z", "Bayes", "excess", "lower b.", "frozen", "KKT")  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results["rows"]:
        cells = (
            noise_law(r), f"{r['label_noise']:.2f}", f"{r['n']}", f"{r['d']}",
            f"{r['signal']:.3f}", f"{r['regime_ratio']:.3f}", f"{r['train_error']:.3f}",
            f"{r['closed_form_error']:.3e}",
            f"{r['monte_carlo_error']:.3e} ± {r['monte_carlo_stderr']:.1e}",
            f"{r['gap']:.2e}", f"{r['max_abs_z']:.1f}", f"{r['bayes_error']:.2e}",
            f"{r['excess_risk']:.2e}", _num(r["lower_bound"]),
            f"{r['pattern_frozen_fraction']:.2f}", f"{r['kkt_residual_median']:.1e}",
        )  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if results["max_abs_z"] is not None:
        lines.append(
            "Largest |closed form - Monte Carlo| over the Gaussian, clean-label rows:"
            f" {results['max_abs_z']:.2f} standard errors. "
        )
    lines.append(f"Total wall time {results['wall_seconds']:.1f} s (compilation included).")
    return "\n".join(lines)


def main(argv=None) -> dict:
    host_devices()
    p = parser("phase_transition", __doc__.splitlines()[0], default_seeds=8)
    p.add_argument("--signals", type=float, nargs="+", default=None, help="||mu|| values")
    p.add_argument("--shapes", nargs="+", default=["20x400", "50x400", "20x1600"], help="n x d")
    p.add_argument("--steps", type=int, default=20_000, help="normalized GD steps")
    p.add_argument(
        "--noise",
        nargs="+",
        default=["gaussian"],
        choices=["gaussian", "student-t", "student_t"],
        help="noise laws; with student-t the Gaussian reference is kept",
    )
    p.add_argument("--dof", type=float, nargs="+", default=[4.5], help="Student-t dof (> 2)")
    p.add_argument("--label-noise", type=float, nargs="+", default=[0.0], help="flip probabilities")
    args = p.parse_args(argv)
    if any(not dof > 2 for dof in args.dof):
        p.error(f"--dof must be > 2 (finite variance), got {args.dof}")
    if any(not 0 <= eta < 0.5 for eta in args.label_noise):
        p.error(f"--label-noise must lie in [0, 0.5), got {args.label_noise}")
    noises = ["student_t" if v.startswith("student") else v for v in args.noise]
    if "student_t" in noises and "gaussian" not in noises:
        noises = ["gaussian", *noises]  # the reference
    shapes = tuple(tuple(int(v) for v in s.split("x")) for s in args.shapes)
    signals = (
        tuple(args.signals) if args.signals else tuple(np.round(np.geomspace(0.3, 8.0, 10), 3))
    )
    steps, batches = args.steps, 10
    if args.quick:
        signals, shapes, args.seeds, steps, batches = (0.5, 6.0), ((20, 400),), 2, 2000, 2
    results = run_benchmark(
        signals,
        shapes,
        args.seeds,
        args.seed,
        steps,
        batches,
        noises=tuple(dict.fromkeys(noises)),
        dofs=tuple(args.dof),
        label_noises=tuple(args.label_noise),
        out=args.out,
    )
    figures = {"transition.png": plot}
    if len({noise_law(r) for r in results["rows"]}) > 1:
        figures["tails.png"] = plot_tails
    if len({r["label_noise"] for r in results["rows"]}) > 1:
        figures["label_noise.png"] = plot_label_noise
    finish(args.out, results, table(results), figures)
    return results


if __name__ == "__main__":
    main()
