"""The multi-index staircase: mean-field flow from standard init against the Hermite stages.

d = 100, r = 20, m = 250, sigma = |z| and weight decay lambda = r lambda_0 = 2 (lambda_0 = 0.1,
our choice: the paper gives lambda = r lambda_0 without lambda_0) until t_off = 50, then 0, to
t = 80, in the population loss (`--samples N` for the finite-sample loss on N points). Beside
it, with lambda = 0, the same seed, for the paper's weight-decay ablation. Prints the stage
table (order, predicted plateau, measured loss, predicted and measured stage time) and writes
`results.json`, `staircase.png` and `mass.png` to `--out`.

    python -m benchmarks.multi_index [--seeds 1] [--activation abs] [--weight-decay 2]
                                     [--samples N] [--d 100 --r 20 --m 250]
"""

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._common import Timer, enable_float64, host_devices, log, parser, pyplot, save_figure
from benchmarks._driver import finish, header, run_sweep
from benchmarks._staircase_measure import GROUP_REPEATS, GROUP_SAMPLES, analyse, decay_fit
from dynamics import loss_decomposition, mean_field_init, standard_target
from integrators import check_memory, mean_field_flow
from theory import (
    EVEN_ACTIVATIONS,
    hermite_coefficients,
    initial_alignment,
    lotka_volterra,
    mass_ode,
    mass_ratio,
)

POINTS = 400
BATCH = 5000


def _batch(samples: int) -> int:
    """Samples per batch of the finite-sample loss: the largest divisor of `samples` up to
    `BATCH` (the flow needs one that divides n)."""
    return max(b for b in range(1, min(BATCH, samples) + 1) if samples % b == 0)


def _times(t_end):
    return jnp.concatenate([jnp.zeros(1), jnp.geomspace(1e-3, t_end, POINTS)])


def make(key, weight_decay, d, r, m, activation, samples, t_end, decay_off):
    kw, kx = jax.random.split(key)
    net = mean_field_init(m, d, key=kw, activation=activation)
    if not samples:
        return net, jnp.zeros((0, d)), jnp.zeros((0,))
    X = jax.random.normal(kx, (samples, d))
    return net, X, standard_target(r, d, activation).predict(X)


def run(instance, weight_decay, d, r, m, activation, samples, t_end, decay_off):
    net, X, y = instance
    target = standard_target(r, d, activation)
    ts = _times(t_end)
    sol = mean_field_flow(
        target,
        net,
        ts,
        weight_decay=weight_decay,
        decay_off=decay_off,
        samples=(X, y) if samples else None,
        batch_size=_batch(samples) if samples else None,
        # finite-sample solves take minutes: print how far along (in simulated time) they are
        progress=bool(samples),
    )
    c = hermite_coefficients(activation, 2)
    beta0 = jnp.stack([sol.beta1[0], sol.beta2[0]])
    lv = {}
    for name, corrected in (("corrected", True), ("paper", False)):
        lv[name] = lotka_volterra(
            beta0, ts, c0=c[0], c2=c[2], r=r, d=d, weight_decay=weight_decay, corrected=corrected
        )
    decomposition = []
    for model in (net, sol.model):
        for rep in range(GROUP_REPEATS):
            key = jax.random.fold_in(jax.random.PRNGKey(7), rep)
            dec = loss_decomposition(model, target, key=key, num=GROUP_SAMPLES)
            decomposition.append(jnp.stack([dec.loss, dec.symmetric, dec.asymmetric]))
    return {
        "decomposition": jnp.stack(decomposition).reshape(2, GROUP_REPEATS, 3),
        "ts": ts,
        "loss": sol.loss,
        "train_loss": sol.train_loss,
        "alpha": sol.alpha,
        "beta1": sol.beta1,
        "beta2": sol.beta2,
        "alignment_mean": jnp.mean(sol.alignment, axis=1),
        "alignment_min": jnp.min(sol.alignment, axis=1),
        "alpha_mass_ode": mass_ode(sol.alpha[0], ts, c0=c[0], r=r, weight_decay=weight_decay),
        **{f"beta_{k}": v.ys for k, v in lv.items()},
        "q": mass_ratio(jnp.stack([sol.beta1, sol.beta2], axis=-1), c0=c[0], c2=c[2], r=r, d=d),
        "initial_alignment": initial_alignment(net.W, target.directions),
        "steps": sol.stats["num_steps"],
        "ok": sol.ok & lv["corrected"].ok & lv["paper"].ok,
    }


def _check_options(d, r, m, weight_decay, samples):
    """The benchmark's own options refused in its words, and a finite-sample run's memory
    checked (and logged) before it starts."""
    if r > d:
        raise ValueError(f"`r` must be <= d, got r = {r} > d = {d}")
    if weight_decay < 0:
        raise ValueError(f"`weight_decay` must be >= 0, got {weight_decay}")
    if samples:
        batch = _batch(samples)
        if batch < min(100, samples):
            raise ValueError(
                f"`samples` must have a divisor between 100 and {BATCH} (the finite-sample loss"
                f" is summed in batches that divide it), got {samples}: choose e.g. a multiple"
                " of 1000"
            )
        need = check_memory(samples, d, m, batch)
        log(f"multi_index: finite-sample flow on n = {samples}, ~{need / 2**20:.0f} MiB per seed")


def _ablation(runs, ts, window, activation, r, decay_off) -> dict:
    """beta_2's decay on the degree-2 stage and after it, measured and from the ODE, for each
    (label, outputs, lambda) of `runs`."""
    lo, hi = window
    c = hermite_coefficients(activation, 2)
    c0sq, c2sq = float(c[0]) ** 2, float(c[2]) ** 2
    return {
        label: {
            "degree2_stage": decay_fit(ts, o["beta2"][0], lo, hi),
            "after_degree2": decay_fit(ts, o["beta2"][0], hi, decay_off),
            "ode_after_degree2": decay_fit(ts, o["beta_corrected"][0][:, 1], hi, decay_off),
            # at the Lotka-Volterra fixed point beta_2 decays at the rate
            # 2 lambda c_2^2 / (c_0^2 r + c_2^2), or like 1 / (4 c_2^2 t) when lambda = 0
            "ode_asymptotic_rate": 2 * lam * c2sq / (c0sq * r + c2sq),
            "beta2_at_decay_off": float(np.interp(decay_off, ts, o["beta2"][0])),
        }
        for label, o, lam in runs
    }


def _mass(main, ts, r, d) -> dict:
    """The first seed's mass on the relevant (beta_1) and other (beta_2) directions, measured
    and from the corrected and the paper's ODEs."""
    corrected, paper = main["beta_corrected"][0], main["beta_paper"][0]
    return {
        "t": ts,
        "alpha_measured": main["alpha"][0],
        "alpha_predicted": r * corrected[:, 0] + (d - r) * corrected[:, 1],
        "beta1_measured": main["beta1"][0],
        "beta1_predicted": corrected[:, 0],
        "beta2_measured": main["beta2"][0],
        "beta2_predicted": corrected[:, 1],
        "beta1_paper": paper[:, 0],
        "beta2_paper": paper[:, 1],
    }


def run_benchmark(
    d=100,
    r=20,
    m=250,
    activation="abs",
    weight_decay=2.0,
    decay_off=50.0,
    t_end=80.0,
    samples=0,
    seeds=1,
    seed=0,
    out=None,
    ablation=True,
):
    enable_float64()
    timer = Timer()
    _check_options(d, r, m, weight_decay, samples)
    log(
        f"multi_index: d = {d}, r = {r}, m = {m}, {activation}, lambda = {weight_decay},"
        f" {seeds} seeds"
    )
    decays = [weight_decay] + ([0.0] if ablation and weight_decay > 0 else [])
    static = dict(d=d, r=r, m=m, activation=activation, samples=samples)
    grid = [dict(weight_decay=w, t_end=t_end, decay_off=decay_off, **static) for w in decays]
    result, record = run_sweep(
        run,
        make=make,
        seeds=seeds,
        grid=grid,
        static=tuple(static),
        out=out,
        name="multi_index",
        base_seed=seed,
        ok=("ok",),
    )
    main, *ablation = result.outputs
    analysis = [
        analyse(main, s, weight_decay, activation, r, d, m, decay_off) for s in range(seeds)
    ]
    ts = main["ts"][0]
    report = {}
    if ablation:
        runs = ((f"lambda={weight_decay}", main, weight_decay), ("lambda=0", ablation[0], 0.0))
        report = _ablation(runs, ts, analysis[0]["degree2_window"], activation, r, decay_off)
    config = {
        **static,
        "mode": "finite-sample" if samples else "population",
        "weight_decay": weight_decay,
        "decay_off": decay_off,
        "t_end": t_end,
        "seeds": seeds,
        "init": "w_i ~ N(0, I/d)",
        "flow": "dw/dt = -lambda_t w - m grad_w L, L = 1/2 E (f_W - f*)^2",
    }
    return {
        **header("multi_index", config, seed),
        "wall_seconds": timer(),
        **record,
        "solver_steps": [int(x) for x in main["steps"]],
        "stages": analysis[0]["stages"],
        "prediction_errors": analysis[0]["prediction_errors"],
        "decomposition": analysis[0]["decomposition"],
        "mass_equilibrium_predicted": analysis[0]["mass_equilibrium_predicted"],
        "mass_late_measured": analysis[0]["mass_late_measured"],
        "switch_off": {
            k: analysis[0][k]
            for k in (
                "stage_at_decay_off",
                "mass_late_rel_error",
                "loss_late_predicted",
                "loss_late_measured",
                "after_decay_off",
            )
            if k in analysis[0]
        },
        "per_seed": analysis,
        "loss_curve": [[float(t), float(v)] for t, v in zip(ts, main["loss"][0], strict=True)],
        "mass": _mass(main, ts, r, d),
        "final_loss": float(main["loss"][0][-1]),
        "final_loss_per_seed": [float(v) for v in main["loss"][:, -1]],
        "weight_decay_ablation": report,
        "_outputs": result.outputs,
    }


def table(results: dict) -> str:
    head = (
        f"{'order':>5} {'pred. plateau':>13} {'paper plateau':>13} {'loss at pred. t':>15}"
        f" {'loss at meas. t':>15} {'pred. time':>10} {'meas. time':>10}"
    )
    lines = [head, "-" * len(head)]
    for e in results["stages"]:
        lines.append(
            f"{e['order']:>5} {e['predicted_plateau']:>13.4f} {e['paper_plateau']:>13.4f}"
            f" {e['measured_loss_at_predicted_time']:>15.4f}"
            f" {e['measured_loss_at_measured_time']:>15.4f} {e['predicted_time']:>10.3f}"
            f" {e['measured_time']:>10.3f}"
        )
    pe = results["prediction_errors"]
    for name in ("corrected", "paper"):
        p = pe[name]
        lines.append(
            f"degree-2 stage, {name} ODEs: max rel. error alpha~ {p['alpha_max_rel_error']:.2e},"
            f" beta_1 {p['beta1_max_rel_error']:.2e}, beta_2 {p['beta2_max_rel_error']:.2e}"
        )
    lines.append(
        f"mass over stage 0: max rel. error {pe['mass_ode_stage0_max_rel_error']:.2e} (degree-0"
        f" mass ODE), {pe['stage0_logistic_max_rel_error']:.2e} (every order, stage_equilibria)"
    )
    so = results["switch_off"]
    lines.append(
        f"before lambda -> 0 (stage {so['stage_at_decay_off']}): mass"
        f" {results['mass_late_measured']:.4f} vs equilibrium"
        f" {results['mass_equilibrium_predicted']:.4f}"
        f" (rel. error {so['mass_late_rel_error']:.1e}),"
        f" loss {so['loss_late_measured']:.4f} vs {so['loss_late_predicted']:.4f}"
    )
    if "after_decay_off" in so:
        a = so["after_decay_off"]
        lines.append(
            f"after lambda -> 0: mass {a['mass_final_measured']:.4f} vs relaxation"
            f" {a['mass_final_predicted']:.4f} (max rel. error {a['mass_max_rel_error']:.1e}),"
            f" final loss {a['loss_final_measured']:.2e} vs {a['loss_final_predicted']:.2e}"
        )
    for when, dec in results["decomposition"].items():
        lines.append(
            f"L = 1/2 E(f~ - f*)^2 + 1/2 E(f - f~)^2 at {when}: {dec['loss']:.4f} ="
            f" {dec['symmetric_part']:.4f} + {dec['asymmetric_part']:.4f}, residual"
            f" {dec['residual_mean']:+.2e} +- {dec['residual_stderr']:.1e}"
            f" (K = {dec['group_samples']} group elements)"
        )
    for key, f in results["weight_decay_ablation"].items():
        lines.append(
            f"{key}: beta_2 over the degree-2 stage fits {f['degree2_stage']['better_fit']}"
            f" (power {f['degree2_stage']['power_exponent']:.2f}); after it, simulation rate"
            f" {f['after_degree2']['exponential_rate']:.3f} vs Lotka-Volterra"
            f" {f['ode_after_degree2']['exponential_rate']:.3f} (fixed-point rate"
            f" {f['ode_asymptotic_rate']:.3f}); beta_2(t_off) = {f['beta2_at_decay_off']:.2e}"
        )
    lines.append(
        f"final loss {results['final_loss']:.3e}, solver steps {results['solver_steps']},"
        f" wall {results['wall_seconds']:.1f} s (compilation included)"
    )
    return "\n".join(lines)


def plot_staircase(results: dict, path) -> None:
    plt = pyplot()
    curve = np.array(results["loss_curve"])
    fig, ax = plt.subplots(figsize=(6.6, 4.2))
    ax.loglog(curve[1:, 0], curve[1:, 1], "k-", lw=1.5, label="population loss")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for c, e in zip(colors, results["stages"], strict=False):
        if e["predicted_plateau"] > 0:
            ax.axhline(
                e["predicted_plateau"],
                color=c,
                ls="--",
                lw=0.9,
                label=f"after order {e['order']}: predicted {e['predicted_plateau']:.3f}",
            )
        if e["paper_plateau"] > 0:
            ax.axhline(e["paper_plateau"], color=c, ls=":", lw=0.9)
        if np.isfinite(e["predicted_time"]):
            ax.axvline(e["predicted_time"], color=c, lw=0.6)
    ax.axvline(results["config"]["decay_off"], color="gray", lw=0.8, ls="-.", label="lambda -> 0")
    ax.set_xlabel("t")
    ax.set_ylabel("L = 1/2 E (f_W - f*)^2")
    cfg = results["config"]
    ax.set_title(
        f"d = {cfg['d']}, r = {cfg['r']}, m = {cfg['m']}, {cfg['activation']}"
        " (dotted: 1/2 E_>=k, lambda = 0)"
    )
    ax.legend(fontsize=7)
    save_figure(fig, path)


def plot_mass(results: dict, path) -> None:
    plt = pyplot()
    mass = results["mass"]
    t = np.asarray(mass["t"])[1:]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, key in zip(axes, ("alpha", "beta1", "beta2"), strict=True):
        ax.semilogx(t, np.asarray(mass[f"{key}_measured"])[1:], "k-", lw=1.5, label="simulation")
        ax.semilogx(
            t, np.asarray(mass[f"{key}_predicted"])[1:], "r--", lw=1.0, label="ODE (corrected)"
        )
        if f"{key}_paper" in mass:
            ax.semilogx(t, np.asarray(mass[f"{key}_paper"])[1:], "b:", lw=1.0, label="ODE (paper)")
        ax.set_xlabel("t")
        ax.set_title(
            {"alpha": "mass alpha~", "beta1": "beta_1 (relevant)", "beta2": "beta_2 (irrelevant)"}[
                key
            ]
        )
    axes[2].set_yscale("log")
    ablation = results.get("_outputs", [None, None])
    if len(ablation) > 1:
        axes[2].semilogx(
            t, np.asarray(ablation[1]["beta2"][0])[1:], "g-", lw=1.0, label="simulation, lambda = 0"
        )
    axes[0].legend(fontsize=7)
    axes[2].legend(fontsize=7)
    save_figure(fig, path)


def main(argv=None) -> dict:
    host_devices()
    p = parser("multi_index", __doc__.splitlines()[0], default_seeds=1)
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--r", type=int, default=20)
    p.add_argument("--m", type=int, default=250)
    p.add_argument(
        "--activation",
        default="abs",
        choices=EVEN_ACTIVATIONS,
        help="an even activation: |z| or the even part of ReLU, GeLU, Swish (the staircase's)",
    )
    p.add_argument("--weight-decay", type=float, default=2.0, help="lambda (= r lambda_0)")
    p.add_argument("--decay-off", type=float, default=50.0, help="time at which lambda -> 0")
    p.add_argument("--t-end", type=float, default=80.0)
    p.add_argument("--samples", type=int, default=0, help="finite-sample mode on N points")
    p.add_argument(
        "--no-ablation", action="store_true", help="skip the lambda = 0 run beside the main one"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.d, args.r, args.m, args.t_end, args.decay_off = 20, 4, 40, 30.0, 20.0
    try:
        results = run_benchmark(
            args.d,
            args.r,
            args.m,
            args.activation,
            args.weight_decay,
            args.decay_off,
            args.t_end,
            args.samples,
            args.seeds,
            args.seed,
            out=args.out,
            ablation=not args.no_ablation,
        )
    except (ValueError, MemoryError) as err:
        p.error(str(err))
    finish(
        args.out, results, table(results), {"staircase.png": plot_staircase, "mass.png": plot_mass}
    )
    return results


if __name__ == "__main__":
    main()
