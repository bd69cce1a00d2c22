"""Table 2 of the orthogonal-data paper: the interpolator's norm against width, two inits.

n = d = 32 and m in {10, 32, 100, 500, 1000}. Small balanced init (alpha = 1e-30 / sqrt(m)) with
GD at eta = 1.0, and PyTorch's default He-uniform init. For He init the paper's eta = 0.001 is
tried first with a step cap; where it does not reach L <= 1e-10 within the cap, the row uses
the largest stable step found by halving: eta* = 2^-k / lambda_max(K(theta_0)), starting at
half the edge of stability 2 / lambda_max of the initial tangent kernel
K_ii' = (1/n) sum_j [relu(v_ji) relu(v_ji') + a_j^2 1[v_ji > 0] 1[i = i']], with the smallest
k >= 0 whose run does not diverge (the kernel grows during training at small width), and
says so. Per row: final loss, 1/2 ||theta||^2, deviation from the minimum norm, and uncovered
samples: for small init those in no neuron's support (<u_j, x_i> > 0 and s_j y_i > 0), which
that flow can never fit, so GD stops at their loss + 1e-10; for He init those with no active
neuron (<w_j, x_i> <= 0 for all j), which GD can never fit. Writes `results.json` and
`widths.png` to `--out`.

    python -m benchmarks.width_ablation [--widths 10 32 100 500 1000] [--seeds 10]
"""

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._common import Timer, enable_float64, host_devices, log, parser, pyplot, save_figure
from benchmarks._driver import finish, header, run_sweep
from dynamics import (
    balanced_init,
    half_squared_norm,
    he_uniform_init,
    orthogonal_data,
    signs_and_directions,
    tangent_kernel_max,
)
from integrators import gradient_descent, stable_gradient_descent
from theory import RESULTS, min_norm_cost, saddle_jumps

N = 32
TOL = 1e-10


def _outcome(sol, X, y) -> dict:
    """What a table row needs from one GD run."""
    r = sol.model.predict(X) - y
    return {
        "epochs": sol.stats["num_steps"],
        "converged": sol.ok,
        "diverged": sol.result == RESULTS.diverged,
        "final_loss": sol.final_loss,
        "norm": half_squared_norm(sol.model),
        "unfit": jnp.sum(jnp.abs(r) > 1e-4),
        "finite": sol.result != RESULTS.diverged,  # a run that blew up is a failed solve
        "min_norm_cost": min_norm_cost(y),
        "eta": sol.learning_rate,
    }


def make(key, init, width, eta, paper_eta, paper_steps, max_steps):
    kx, kw = jax.random.split(key)
    X, y = orthogonal_data(N, key=kx, dtype=jnp.float64)
    if init == "small":
        model = balanced_init(width, N, 1e-30 / np.sqrt(width), key=kw, dtype=jnp.float64)
    else:
        model = he_uniform_init(width, N, key=kw, dtype=jnp.float64)
    # the eigenvalue is computed here, not in `run`: `make` runs unsharded, and LAPACK calls
    # in a sharded program with a long loop were seen to deadlock on XLA:CPU (integrators.sweep)
    return X, y, model, tangent_kernel_max(model, X)


def run(instance, init, width, eta, paper_eta, paper_steps, max_steps):
    X, y, model, kernel_max = instance
    out = {"initial_norm": half_squared_norm(model)}
    gd = dict(num_checkpoints=60)
    if init == "small":
        pred = saddle_jumps(y, *signs_and_directions(model, X))
        sol = gradient_descent(
            X, y, model, learning_rate=eta, tol=pred.final_loss + TOL, max_steps=max_steps, **gd
        )
        out |= _outcome(sol, X, y)
        out["uncovered"] = jnp.sum(pred.uncovered)
        return out
    dead = ~jnp.any(model.W @ X.T > 0, axis=0)
    floor = 0.5 * jnp.sum(jnp.where(dead, y * y, 0.0)) / N
    paper = gradient_descent(
        X, y, model, learning_rate=paper_eta, tol=floor + TOL, max_steps=paper_steps, **gd
    )
    out |= {f"paper_{k}": v for k, v in _outcome(paper, X, y).items()}
    stable = stable_gradient_descent(
        X, y, model, kernel_max=kernel_max, tol=floor + TOL, max_steps=max_steps, **gd
    )
    out |= _outcome(stable, X, y)
    out["uncovered"] = jnp.sum(dead)
    return out


def summarize(init, m, o, paper_eta) -> dict:
    # He init: the paper's step unless the stable step brings more seeds to L <= 1e-10
    use_paper = init == "he" and np.sum(o["paper_converged"]) >= np.sum(o["converged"])
    pick = (lambda k: o[f"paper_{k}"]) if use_paper else (lambda k: o[k])
    dev = pick("norm") / o["min_norm_cost"] - 1.0
    r = {
        "init": init,
        "m": m,
        "seeds": int(o["norm"].shape[0]),
        "eta": paper_eta if use_paper else float(np.median(o["eta"])),
        "eta_rule": (
            "paper"
            if init == "small" or use_paper
            else "2^-k / lambda_max(K0), largest not diverging: the paper's eta brought fewer"
            " seeds to L <= 1e-10 within the cap"
        ),
        "converged": int(np.sum(pick("converged"))),
        "epochs_mean": float(np.mean(pick("epochs"))),
        "final_loss": float(np.max(pick("final_loss"))),
        "final_loss_median": float(np.median(pick("final_loss"))),
        "norm_mean": float(np.mean(pick("norm"))),
        "norm_std": float(np.std(pick("norm"))),
        "initial_norm_mean": float(np.mean(o["initial_norm"])),
        "opt_norm_mean": float(np.mean(o["min_norm_cost"])),
        "rel_deviation_mean": float(np.mean(dev)),
        "rel_deviation_std": float(np.std(dev)),
        "uncovered_mean": float(np.mean(o["uncovered"])),
        "uncovered_seeds": int(np.sum(o["uncovered"] > 0)),
        "uncovered_per_seed": [int(u) for u in o["uncovered"]],
        "unfit_mean": float(np.mean(pick("unfit"))),
    }
    if init == "he":
        r["paper_eta"] = {
            "eta": paper_eta,
            "converged": int(np.sum(o["paper_converged"])),
            "epochs_mean": float(np.mean(o["paper_epochs"])),
            "final_loss_median": float(np.median(o["paper_final_loss"])),
            "norm_mean": float(np.mean(o["paper_norm"])),
        }
    return r


def run_benchmark(
    widths=(10, 32, 100, 500, 1000),
    seeds=10,
    seed=0,
    eta=1.0,
    paper_eta=1e-3,
    paper_steps=1_000_000,
    max_steps=2_000_000,
    out=None,
):
    enable_float64()
    timer = Timer()
    log(f"width_ablation: n = d = {N}, m = {list(widths)}, {seeds} seeds")
    grid = [
        dict(
            init=init,
            width=m,
            eta=eta,
            paper_eta=paper_eta,
            paper_steps=paper_steps,
            max_steps=max_steps,
        )
        for init in ("small", "he")
        for m in widths
    ]
    result, record = run_sweep(
        run,
        make=make,
        seeds=seeds,
        grid=grid,
        static=("init", "width", "paper_steps", "max_steps"),
        out=out,
        name="width_ablation",
        config={"n": N, "tol": TOL},
        base_seed=seed,
        ok=("finite",),
    )
    rows = []
    for point, o, wall in zip(grid, result.outputs, result.point_seconds, strict=True):
        rows.append(summarize(point["init"], point["width"], o, paper_eta))
        rows[-1]["wall_seconds"] = wall
    config = {
        "n": N,
        "d": N,
        "widths": list(widths),
        "small_init": "balanced, alpha = 1e-30 / sqrt(m)",
        "he_init": "W ~ U(-1/sqrt(d), 1/sqrt(d)), a ~ U(-1/sqrt(m), 1/sqrt(m))",
        "eta_small": eta,
        "paper_eta_he": paper_eta,
        "paper_eta_step_cap": paper_steps,
        "max_steps": max_steps,
        "tol": TOL,
        "seeds": seeds,
        "loss": "L = 1/(2n) sum (h - y)^2",
    }
    return {
        **header("width_ablation", config, seed),
        "wall_seconds": timer(),
        **record,
        "rows": rows,
    }


def table(results: dict) -> str:
    head = (
        f"{'init':>5} {'m':>5} {'eta':>8} {'conv':>5} {'epochs':>8} {'max loss':>9}"
        f" {'norm':>16} {'dev':>8} {'uncov':>6}"
    )
    lines = [head, "-" * len(head)]
    for r in results["rows"]:
        lines.append(
            f"{r['init']:>5} {r['m']:>5} {r['eta']:>8.3g} {r['converged']:>2}/{r['seeds']:<2}"
            f" {r['epochs_mean']:>8.0f} {r['final_loss']:>9.1e}"
            f" {r['norm_mean']:>8.2f} +- {r['norm_std']:<5.2f}"
            f" {100 * r['rel_deviation_mean']:>+7.1f}%"
            f" {r['uncovered_mean']:>6.2f}"
        )
        if "paper_eta" in r:
            pe = r["paper_eta"]
            lines.append(
                f"{'':>11} eta = {pe['eta']:g}: {pe['converged']}/{r['seeds']} converged, median"
                f" loss {pe['final_loss_median']:.1e} after {pe['epochs_mean']:.0f} epochs"
            )
    lines.append(f"total wall time {results['wall_seconds']:.1f} s (compilation included)")
    return "\n".join(lines)


def plot(results: dict, path) -> None:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 4.2))
    for init, marker in (("small", "o-"), ("he", "s-")):
        rows = [r for r in results["rows"] if r["init"] == init]
        ms = [r["m"] for r in rows]
        ax.errorbar(
            ms,
            [r["norm_mean"] for r in rows],
            yerr=[r["norm_std"] for r in rows],
            fmt=marker,
            capsize=3,
            label=f"{init} init, GD",
        )
        if init == "he":
            ax.plot(ms, [r["initial_norm_mean"] for r in rows], "k:", label="He init's own norm")
    opt = np.mean([r["opt_norm_mean"] for r in results["rows"]])
    ax.axhline(opt, color="gray", ls="--", label="min-norm interpolator")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("width m")
    ax.set_ylabel("1/2 ||theta||^2 at L <= 1e-10")
    ax.set_title(f"n = d = {N}: implicit bias against width")
    ax.legend(fontsize=8)
    save_figure(fig, path)


def main(argv=None) -> dict:
    host_devices()
    p = parser("width_ablation", __doc__.splitlines()[0], default_seeds=10)
    p.add_argument("--widths", type=int, nargs="+", default=[10, 32, 100, 500, 1000])
    p.add_argument("--paper-steps", type=int, default=1_000_000, help="cap for He at eta=1e-3")
    args = p.parse_args(argv)
    if args.quick:
        args.widths, args.seeds, args.paper_steps = [10, 64], 2, 20_000
    results = run_benchmark(
        tuple(args.widths), args.seeds, args.seed, paper_steps=args.paper_steps, out=args.out
    )
    finish(args.out, results, table(results), {"widths.png": plot})
    return results


if __name__ == "__main__":
    main()
