"""`gradient_flow` on deep ReLU networks through their loss drop, against gradient descent.

A student `eqx.nn.MLP` (d = 8 inputs, `depth` hidden ReLU layers of `width`, biases) learns a
ReLU teacher (8-12-12-1, weights x 2) on n Gaussian samples under the mean squared loss, from
its default initialization scaled by `init` (with `units=neuron_units(model)`, each neuron on
its own log scale, where init < 0.01), in ordinary time to `horizon` (past the loss drop).

The reference is gradient descent extrapolated to step 0 (`benchmarks._gd_reference`: GD at
eta, eta/2, eta/4, eta/8, Richardson to second order on the finest three; its uncertainty is
the gap to the extrapolant of the coarsest three).
Errors are relative, where the loss is above 1e-3 of its start. GD's error is first order in
its step, so the step that reaches an accuracy E is eta_E = eta E / err(eta), and GD's time at
E is its compiled cost per step (timed) times horizon / eta_E, with E the flow's error or the
reference's uncertainty, whichever is larger (the flow is not credited with an accuracy the
reference cannot confirm).

Methods, side by side in one run, each compiled once (a warm-up call; `compile_seconds` is
the first call's time over the second's):

- `held`: `method="events"`, kinks held, entries sliding on their Filippov system
  (`integrators._sliding`), at rtol = atol = `TOL`, capped at `MAX_STEPS`;
- `plain`: `hold_kinks=False`, the plain adaptive solve, whose error estimate is all that
  charges the crossings;
- `steps`: `method="steps"` at rtol `STEPS_TOL`, the event-capturing alternative: explicit
  Euler stepping over the kinks at halved steps, extrapolated to step 0 until two
  extrapolants agree (`integrators._stepped`). An implicit (Moreau-Jean) step was not run:
  Euler at these steps is stable, so implicitness would buy no stability and cost a Newton
  solve per step.

`extrapolated_gd_seconds` is the reference's own cost (GD at eta, ..., eta/8: 15 horizon /
eta steps at GD's compiled cost per step), to reach its uncertainty.

Writes `results.json` (`rows`: one per case and method, with `ok`, `result`, `error`,
`reference_uncertainty`, `steps`, `rejected`, `kink_crossings`, `max_sliding`,
`sliding_entries`, `levels`, `compile_seconds`, `solve_seconds`,
`gd_seconds_equal_accuracy`, `flow_over_gd`, `extrapolated_gd_seconds`) and `losses.png` to `--out`.

    python -m benchmarks.relu_networks [--quick | --large] [--methods held,plain,steps]
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._common import (
    Timer,
    best_seconds,
    enable_float64,
    log,
    parser,
    pyplot,
    save_figure,
)
from benchmarks._driver import finish, header
from benchmarks._gd_reference import Reference, model_gd_curve
from integrators import gradient_flow, neuron_units
from theory import result_names

# (depth, width, n, init, horizon, GD step eta). The one-layer nets' eta is the one whose
# reference confirms the held flow's accuracy: at eta = 0.01 their uncertainty was 3.3e-5 and
# 9.0e-6 where the flow was 3e-6 off, at 0.005 and 0.0025 it is 4.7e-6 and 1.0e-6
CASES = (
    (1, 16, 64, 1e-3, 60.0, 0.005),
    (2, 12, 160, 0.1, 200.0, 0.005),
    (3, 16, 32, 0.3, 150.0, 0.005),
    (2, 32, 256, 0.3, 100.0, 0.005),
    (1, 64, 256, 1e-3, 60.0, 0.0025),
)
QUICK = ((3, 16, 32, 0.3, 150.0, 0.01),)  # through its drop (t ~ 110-125)
# --large: where networks learn, n = 1000 (held and steps: the plain solve spends its
# 200,000 steps long before the drop at n = 256 already); about 45 minutes on 2 cores
LARGE = ((1, 64, 1000, 1e-3, 60.0, 0.01),)
SAVES = 60
TOL = 1e-9
STEPS_TOL = 1e-4  # rtol of method="steps" (atol STEPS_TOL * 1e-6)
MAX_STEPS = 200_000


def mse(model, data):
    X, y = data
    return 0.5 * jnp.mean((jax.vmap(model)(X)[:, 0] - y) ** 2)


def problem(depth, width, n, init, seed):
    """The student (float64), and the data (X, y) from the teacher."""
    keys = jax.random.split(jax.random.PRNGKey(seed), 3)
    X = jax.random.normal(keys[0], (n, 8), jnp.float64)
    teacher = eqx.nn.MLP(8, 1, 12, 2, activation=jax.nn.relu, key=keys[1])
    teacher = jax.tree_util.tree_map(lambda x: 2.0 * x if eqx.is_array(x) else x, teacher)
    y = jax.vmap(teacher)(X)[:, 0].astype(jnp.float64)
    student = eqx.nn.MLP(8, 1, width, depth, activation=jax.nn.relu, key=keys[2])
    student = jax.tree_util.tree_map(
        lambda x: (init * x).astype(jnp.float64) if eqx.is_array(x) else x, student
    )
    return student, (X, y)


def _flow(model, data, ts, method):
    kwargs = dict(args=data, rtol=TOL, atol=TOL, max_steps=MAX_STEPS, method="events")
    if method == "steps":
        kwargs.update(method="steps", rtol=STEPS_TOL, atol=STEPS_TOL * 1e-6, max_steps=10**8)
    else:
        kwargs["hold_kinks"] = method == "held"
        leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
        if max(float(jnp.max(jnp.abs(x))) for x in leaves) < 0.01:
            kwargs["units"] = neuron_units(model)
    timer = Timer()
    jax.block_until_ready(gradient_flow(model, mse, ts, **kwargs).loss)
    first = timer()
    timer = Timer()
    sol = gradient_flow(model, mse, ts, **kwargs)
    jax.block_until_ready(sol.loss)
    return sol, first, timer()


METHODS = ("held", "plain", "steps")  # side by side


def run_case(case, seed, methods=METHODS):
    depth, width, n, init, horizon, eta = case
    model, data = problem(depth, width, n, init, seed)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    curve = model_gd_curve(mse, params, static, data)
    etas = (eta, eta / 2, eta / 4, eta / 8)
    ref = Reference(curve, 1.0, horizon, etas)
    stride = max(1, len(ref.ts) // SAVES)
    keep = np.arange(stride - 1, len(ref.ts), stride)
    ts = jnp.asarray(np.concatenate([[0.0], ref.ts[keep]]))
    gd_error = ref.error(ref.curves[eta])
    steps = int(min(horizon / eta * 4, 200_000))  # GD's compiled seconds per step
    per_step = best_seconds(lambda: curve(eta / 4, steps, steps // 10), repeats=1) / steps
    rows, curves = [], {"ts": ts[1:].tolist(), "reference": ref.loss[keep].tolist()}
    for method in methods:
        log(f"  {method}...")
        sol, first, seconds = _flow(model, data, ts, method)
        loss = np.asarray(sol.loss[1:])
        reached = np.isfinite(loss)
        error = float(np.max(np.abs(loss[reached] / ref.loss[keep][reached] - 1)))
        accuracy = max(error, ref.uncertainty)
        gd_seconds = per_step * horizon / (eta * accuracy / gd_error)
        stats = {k: float(v) for k, v in sol.stats.items()}
        rows.append(
            {
                "depth": depth, "width": width, "n": n, "init": init, "horizon": horizon,
                "method": method, "ok": bool(sol.ok), "result": result_names(sol.result),
                "loss_start": float(sol.loss[0]), "loss_end": float(ref.loss[-1]),
                "error": error, "reference_uncertainty": ref.uncertainty,
                "steps": stats["num_steps"],
                "rejected": stats.get("num_rejected_steps", float("nan")),
                "levels": stats.get("num_levels", float("nan")),
                "kink_crossings": stats.get("kink_crossings", float("nan")),
                "max_sliding": stats.get("max_sliding", float("nan")),
                "sliding_entries": stats.get("sliding_entries", float("nan")),
                "compile_seconds": first - seconds, "solve_seconds": seconds,
                "gd_error_at_eta": gd_error, "gd_seconds_per_step": per_step,
                "gd_seconds_equal_accuracy": gd_seconds, "flow_over_gd": seconds / gd_seconds,
                "extrapolated_gd_seconds": per_step * horizon * 15 / eta,
            }
        )  # fmt: skip
        curves[method] = np.asarray(sol.loss[1:]).tolist()
        log(f"    {rows[-1]['result']}: error {error:.1e}, {seconds:.1f} s, GD {gd_seconds:.1f} s")
    return rows, curves


def _seconds(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def table(results) -> str:
    """The rows as a Markdown table (`flow/GD`: the flow's compiled solve over GD's time at
    equal accuracy)."""
    lines = [
        "| net | n | init | method | ok | error | ref. unc. | steps | rejected | levels "
        "| crossings | most sliding | compile s | solve s | GD s (equal acc.) | flow/GD "
        "| GD extrapolated s (to ref. unc.) |",
        "|---|--:|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]

    def count(value, fmt=",.0f"):
        return "-" if value is None or value != value else format(value, fmt)  # nan: none

    for r in results["rows"]:
        net = "8-" + "-".join([str(r["width"])] * r["depth"]) + "-1"
        cross = "-" if r["method"] == "plain" else count(r["kink_crossings"])
        most = "-" if r["method"] == "plain" else count(r["max_sliding"])
        lines.append(
            f"| {net} | {r['n']} | {r['init']:g} | {r['method']} | {'yes' if r['ok'] else 'no'} "
            f"| {r['error']:.1e} | {r['reference_uncertainty']:.1e} | {r['steps']:,.0f} "
            f"| {count(r['rejected'])} | {count(r.get('levels'))} | {cross} | {most} "
            f"| {r['compile_seconds']:.1f} "
            f"| {r['solve_seconds']:.1f} | {r['gd_seconds_equal_accuracy']:.1f} "
            f"| {r['flow_over_gd']:.2f} | {_seconds(r.get('extrapolated_gd_seconds'))} |"
        )
    return "\n".join(lines)


def plot(results, path):
    plt = pyplot()
    cases = results["curves"]
    fig, axes = plt.subplots(1, len(cases), figsize=(4.2 * len(cases), 3.4), squeeze=False)
    for ax, (label, c) in zip(axes[0], cases.items(), strict=True):
        ax.semilogy(c["ts"], c["reference"], "k-", lw=3, alpha=0.3, label="GD extrapolated")
        if "held" in c:
            ax.semilogy(c["ts"], c["held"], "C0-", label="flow (held kinks)")
        if "plain" in c:
            ax.semilogy(c["ts"], c["plain"], "C1--", label="flow (plain)")
        if "steps" in c:
            ax.semilogy(c["ts"], c["steps"], "C2:", label="steps, extrapolated")
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("t")
    axes[0][0].set_ylabel("loss")
    axes[0][0].legend(fontsize=8)
    save_figure(fig, path)


def main(argv=None):
    p = parser("relu_networks", __doc__.splitlines()[0], default_seeds=1)
    p.add_argument("--large", action="store_true", help="the n = 1000 case alone, no plain")
    hint = f"comma-separated, of {', '.join(METHODS)} (default all; --large: held,steps)"
    p.add_argument("--methods", default=None, help=hint)
    args = p.parse_args(argv)
    enable_float64()
    cases = LARGE if args.large else QUICK if args.quick else CASES
    methods = ("held", "steps") if args.large else METHODS
    if args.methods is not None:
        methods = tuple(args.methods.split(","))
        if not set(methods) <= set(METHODS):
            p.error(f"--methods must name some of {METHODS}, got {args.methods!r}")
    config = {"cases": cases, "tol": TOL, "steps_tol": STEPS_TOL, "max_steps": MAX_STEPS}
    results = header("relu_networks", config, args.seed)
    rows, curves = [], {}
    for case in cases:
        depth, width, n, init, horizon, _ = case
        label = f"8-{'-'.join([str(width)] * depth)}-1, n={n}, init {init:g}"
        log(label)
        case_rows, curves[label] = run_case(case, args.seed, methods)
        rows += case_rows
    results["rows"] = rows
    results["curves"] = curves
    finish(args.out, results, table(results), {"losses.png": plot})


if __name__ == "__main__":
    main()
