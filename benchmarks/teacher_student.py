"""Gaussian teacher-student: the population gradient flow, its plateaus and their saddles.

A student x -> sum_j a_j sigma(w_j . x) of width m learns a teacher sum_k sigma(v_k . x) of
width k (orthonormal v_k, unit second layer) on x ~ N(0, I_d), d = 8, by gradient flow on
the population loss (`dynamics.teacher_student_loss`: exact for relu and erf) from a small
(scale 1e-3) or standard (scale 1) Gaussian initialization, with the second layer trained.
For each setting:

- the plateaus of the loss curve (`theory.loss_plateaus`);
- the model at each plateau polished by `integrators.critical_point` to ||grad L|| < 1e-10,
  with its loss and Morse index (number of negative Hessian eigenvalues: a saddle has >= 1);
- the same flow on the empirical loss of `samples` Gaussian inputs (10^4): its plateaus and
  final loss beside the population's.

Writes `results.json` (`rows`), `table.md`, `loss_curves.png` and `saddles.png`.
"""

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._common import Timer, enable_float64, log, parser, pyplot, save_figure
from benchmarks._driver import finish, header
from dynamics import TwoLayerNet, unchecked
from integrators import critical_point, gradient_flow
from theory import loss_plateaus, result_names

D = 8
SCALES = {"small": 1e-3, "standard": 1.0}
T_END = 3e3


def setting_data(k: int, m: int, activation: str, init: str, seed: int, samples: int):
    keys = jax.random.split(jax.random.PRNGKey(seed), 4)
    V = jnp.linalg.qr(jax.random.normal(keys[0], (D, k)))[0].T
    teacher = TwoLayerNet(V, jnp.ones(k), activation=activation)
    s = SCALES[init]
    W = s * jax.random.normal(keys[1], (m, D)) / np.sqrt(D)
    a = s * jax.random.normal(keys[2], (m,)) / np.sqrt(m)
    student = TwoLayerNet(W, a, activation=activation)
    X = jax.random.normal(keys[3], (samples, D))
    return teacher, student, (X, teacher(X))


def sample_loss(model, data):
    X, y = data
    r = model(X) - y
    return 0.5 * jnp.mean(r * r)


def _plateaus(ts, loss):
    found = loss_plateaus(np.asarray(ts), np.maximum(np.asarray(loss), 1e-300))
    return {k: np.asarray(v).tolist() for k, v in found.items()}


def _plateau_indices(ts, loss, found) -> list[int]:
    """For each plateau but the last, the save index inside it where the loss is flattest."""
    ts, loss = np.asarray(ts), np.log(np.maximum(np.asarray(loss), 1e-300))
    rate = np.abs(np.diff(loss) / np.diff(ts))
    bounds = [0.0] + list(found["times"])
    out = []
    for j in range(len(found["times"])):
        lo, hi = bounds[j], found["starts"][j]
        inside = np.flatnonzero((ts[:-1] >= lo) & (ts[:-1] <= hi) & (ts[:-1] > 0))
        if inside.size:
            out.append(int(inside[np.argmin(rate[inside])]))
    return out


def one(k, m, activation, init, seed, samples) -> dict:
    teacher, student, data = setting_data(k, m, activation, init, seed, samples)
    ts = jnp.concatenate([jnp.zeros(1), jnp.geomspace(1e-2, T_END, 400)])
    t = Timer()
    pop = gradient_flow(
        student, unchecked.teacher_student_loss, ts, args=teacher, hold_kinks=False,
        save_trajectory=True,
    )  # fmt: skip
    jax.block_until_ready(pop.loss)
    pop_seconds = t()
    t = Timer()
    smp = gradient_flow(student, sample_loss, ts, args=data, hold_kinks=False, max_steps=200000)
    jax.block_until_ready(smp.loss)
    sample_seconds = t()
    found = _plateaus(ts, pop.loss)
    found_sample = _plateaus(ts, smp.loss)
    saddles = []
    for i in _plateau_indices(ts, pop.loss, found):
        model = jax.tree_util.tree_map(lambda x, i=i: x[i], pop.trajectory)
        t = Timer()
        cp = critical_point(model, unchecked.teacher_student_loss, args=teacher, kind="any")
        saddles.append(
            dict(
                time=float(ts[i]), flow_loss=float(pop.loss[i]), loss=float(cp.loss),
                grad_norm=float(cp.grad_norm), morse_index=int(cp.morse_index),
                morse_exact=bool(cp.spectrum.morse_exact), ok=bool(cp.ok),
                result=result_names(cp.result), seconds=t(),
            )
        )  # fmt: skip
    return dict(
        k=k, m=m, activation=activation, init=init, seed=seed, samples=samples,
        ok=bool(pop.ok and smp.ok), flow_result=result_names(pop.result),
        sample_result=result_names(smp.result),
        plateau_levels=found["levels"], jump_times=found["times"],
        sample_plateau_levels=found_sample["levels"], sample_jump_times=found_sample["times"],
        final_loss=float(pop.loss[-1]), sample_final_loss=float(smp.loss[-1]),
        population_loss_of_sample_run=float(
            unchecked.teacher_student_loss(smp.model, teacher)
        ),
        saddles=saddles, flow_steps=int(pop.stats["num_steps"]),
        sample_steps=int(smp.stats["num_steps"]), flow_seconds=pop_seconds,
        sample_seconds=sample_seconds,
        curve=dict(ts=np.asarray(ts).tolist(), population=np.asarray(pop.loss).tolist(),
                   sample=np.asarray(smp.loss).tolist()),
    )  # fmt: skip


def run_benchmark(
    ks=(2, 3, 4), widths=(1, 2, 4), activations=("relu", "erf"), inits=("small", "standard"),
    seeds=1, seed=0, samples=10**4,
) -> dict:  # fmt: skip
    enable_float64()
    timer = Timer()
    rows = []
    for activation in activations:
        for k in ks:
            for factor in widths:
                for init in inits:
                    for s in range(seed, seed + seeds):
                        log(f"teacher_student: {activation}, k = {k}, m = {factor * k}, {init}")
                        rows.append(one(k, factor * k, activation, init, s, samples))
    config = {
        "d": D, "scales": SCALES, "t_end": T_END, "samples": samples,
        "teacher": "orthonormal first layer, unit second layer",
        "student": "W ~ scale N(0, 1/d), a ~ scale N(0, 1/m), both layers trained",
        "flow": "integrators.gradient_flow (Tsit5, rtol = atol = 1e-8, hold_kinks=False)",
        "polish": "integrators.critical_point(kind='any') from the flattest save of each plateau",
    }  # fmt: skip
    return {**header("teacher_student", config, seed), "rows": rows, "wall_seconds": timer()}


def table(results: dict) -> str:
    lines = [
        "| act | k | m | init | seed | ok | plateaus (population) | plateaus (samples) | "
        "saddles: loss / Morse index | final loss pop. / samples | s pop. / samples |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        levels = ", ".join(f"{v:.3g}" for v in r["plateau_levels"][:-1]) or "-"
        slevels = ", ".join(f"{v:.3g}" for v in r["sample_plateau_levels"][:-1]) or "-"
        sad = ", ".join(
            f"{s['loss']:.4g}/{s['morse_index']}{'' if s['ok'] else '?'}" for s in r["saddles"]
        ) or "-"  # fmt: skip
        lines.append(
            f"| {r['activation']} | {r['k']} | {r['m']} | {r['init']} | {r['seed']} | "
            f"{r['ok']} | {levels} | {slevels} | {sad} | {r['final_loss']:.1e} / "
            f"{r['sample_final_loss']:.1e} | {r['flow_seconds']:.1f} / "
            f"{r['sample_seconds']:.1f} |"
        )
    lines.append(
        "\nplateaus: the loss on each plateau before the last (`loss_plateaus`); saddles: the "
        "polished critical point's loss / Morse index ('?': not polished to 1e-10)"
    )
    return "\n".join(lines)


def plot_curves(results: dict, path) -> None:
    plt = pyplot()
    rows = results["rows"]
    acts = list(dict.fromkeys(r["activation"] for r in rows))
    inits = list(dict.fromkeys(r["init"] for r in rows))
    fig, axes = plt.subplots(len(acts), len(inits), figsize=(5 * len(inits), 3.4 * len(acts)),
                             squeeze=False)  # fmt: skip
    for i, act in enumerate(acts):
        for j, init in enumerate(inits):
            ax = axes[i][j]
            mine = [r for r in rows if r["activation"] == act and r["init"] == init]
            for c, r in enumerate(mine):
                ts = np.asarray(r["curve"]["ts"][1:])
                ax.loglog(ts, np.maximum(r["curve"]["population"][1:], 1e-16), color=f"C{c}",
                          lw=1.2, label=f"k = {r['k']}, m = {r['m']}")  # fmt: skip
                ax.loglog(ts, np.maximum(r["curve"]["sample"][1:], 1e-16), color=f"C{c}",
                          lw=0.8, ls="--")  # fmt: skip
            ax.set_title(f"{act}, {init} init (dashed: {mine[0]['samples']} samples)", fontsize=9)
            ax.set_xlabel("t")
            ax.set_ylabel("loss")
            ax.legend(fontsize=6)
    save_figure(fig, path)


def plot_saddles(results: dict, path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for r in results["rows"]:
        for s in r["saddles"]:
            marker = "o" if r["activation"] == "relu" else "s"
            ax.scatter(s["flow_loss"], s["loss"], c=f"C{min(s['morse_index'], 9)}", marker=marker)
    lims = ax.get_xlim()
    ax.plot(lims, lims, "k:", lw=0.8)
    ax.set_xlabel("loss on the plateau (flow)")
    ax.set_ylabel("loss at the polished critical point")
    ax.set_title("circles: relu, squares: erf; colour: Morse index (C0 = 0, C1 = 1, ...)",
                 fontsize=8)  # fmt: skip
    save_figure(fig, path)


def main(argv=None) -> dict:
    p = parser("teacher_student", __doc__.splitlines()[0], default_seeds=1)
    p.add_argument("--samples", type=int, default=10**4, help="inputs of the empirical run")
    args = p.parse_args(argv)
    kw = dict(seeds=args.seeds, seed=args.seed, samples=args.samples)
    if args.quick:
        kw.update(ks=(2,), widths=(2,), inits=("small",), samples=min(args.samples, 2000))
    results = run_benchmark(**kw)
    finish(args.out, results, table(results), {"loss_curves.png": plot_curves,
                                                "saddles.png": plot_saddles})  # fmt: skip
    return results


if __name__ == "__main__":
    main()
