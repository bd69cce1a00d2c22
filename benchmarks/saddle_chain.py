"""The saddle chains of small tanh nets, of ReLU nets on orthonormal data and of a teacher-student
population loss, and the spectral densities of the tanh nets' Hessians.

For each net (16 inputs, one hidden tanh layer of `width` units without biases, a teacher of
two tanh units, 256 Gaussian samples, init scale 1e-4, per-neuron log scales), the
`gradient_flow` trajectory's plateaus are polished into its saddle chain
(`integrators.saddle_chain`): each saddle's ||grad||, certified Morse index, and the angle at
which the flow leaves it. Nothing predicts these saddles in closed form here, so
`distance_to_prediction` is null; the origin's index is the width, one negative curvature per
unit. Then, at each net's final point, the Hessian's spectral density by stochastic Lanczos
quadrature (`integrators.spectral_density`, outliers deflated) against the dense spectrum
(`jax.hessian` + `eigvalsh`), in Wasserstein-1 relative to ||H||.

On orthonormal data (`ORTHO_N` samples, `ORTHO_M` ReLU neurons, balanced init at each of
`ALPHAS`, `orthogonal_flow`), each saddle is held against Algorithm 1's (`predicted_saddle`:
`distance_to_prediction` is the largest difference in any parameter; null where a group of
neurons shares a sample, whose split the prediction does not carry). On the teacher-student
population loss (erf, K = M = 2, second layer fixed), each saddle's order parameters are
held against the fixed point of the online-SGD ODEs found from the flow's plateau without
their lr^2 terms (`teacher_student_chain`).

Writes `results.json` (`rows`: one per saddle, with `grad_norm`, `morse_index`,
`morse_exact`, `escape_angle`, `distance_to_prediction`; `density`: one per net, with
`params`, `wasserstein1` relative to ||H|| and the seconds of both) and `chain.png` (the loss
with each saddle marked by its index).

    python -m benchmarks.saddle_chain [--quick]
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from benchmarks._common import Timer, enable_float64, log, parser, pyplot, save_figure
from benchmarks._driver import finish, header
from dynamics import TwoLayerNet, TwoLayerReLU, order_parameters, teacher_student_loss
from dynamics.unchecked import teacher_student_loss as unchecked_teacher_student_loss
from integrators import (
    gradient_flow,
    neuron_units,
    orthogonal_flow,
    saddle_chain,
    spectral_density,
    wasserstein1,
)
from theory import online_fixed_point, saddle_jumps

D, N = 16, 256
WIDTHS = (3, 30, 120)
ORTHO_N, ORTHO_M = 6, 5  # orthonormal data: samples (= inputs), neurons
ALPHAS = (1e-8, 1e-16, 1e-32, 1e-64)


def problem(width, seed):
    k = jax.random.split(jax.random.PRNGKey(seed), 3)
    X = jax.random.normal(k[0], (N, D))
    V = jnp.linalg.qr(jax.random.normal(k[1], (D, 2)))[0].T
    y = jnp.sum(jnp.tanh(X @ V.T), axis=1)
    mlp = eqx.nn.MLP(D, 1, width, 1, activation=jnp.tanh, use_bias=False,
                     use_final_bias=False, key=k[2])  # fmt: skip
    mlp = jax.tree_util.tree_map(lambda x: 1e-4 * x if eqx.is_inexact_array(x) else x, mlp)
    return mlp, (X, y)


def loss(m, data):
    return 0.5 * jnp.mean((jax.vmap(m)(data[0])[:, 0] - data[1]) ** 2)


def _row(c: dict, saddle: int, **extra) -> dict:
    """A results row from one `saddle_chain` row `c` (the fields every section shares), with
    the section's own `extra` fields first."""
    return {
        **extra, "saddle": saddle, "time": c["time"], "flow_loss": c["flow_loss"],
        "loss": c["loss"], "grad_norm": c["grad_norm"], "ok": c["ok"], "result": c["result"],
        "morse_index": c["morse_index"], "morse_exact": c["morse_index"] >= 0,
        "morse_lower": c["morse_lower"], "escape_angle": c["escape_angle"],
        "flow_grad_norm": c["flow_grad_norm"],
    }  # fmt: skip


def one_net(width, horizon, seed):
    mlp, data = problem(width, seed)
    ts = jnp.linspace(0.0, horizon, 401)
    timer = Timer()
    sol = gradient_flow(mlp, loss, ts, args=data, save_trajectory=True, units=neuron_units(mlp))
    flow_seconds = timer()
    timer = Timer()
    chain = saddle_chain(sol, loss, args=data)
    chain_seconds = timer()
    rows = [
        {**_row(c, i, width=width), "distance_to_prediction": None} for i, c in enumerate(chain)
    ]
    final = sol.model
    params, static = eqx.partition(final, eqx.is_inexact_array)
    flat, unravel = ravel_pytree(params)
    timer = Timer()
    H = jax.hessian(lambda x: loss(eqx.combine(unravel(x), static), data))(flat)
    ev = np.linalg.eigvalsh(np.asarray(H))
    dense_seconds = timer()
    timer = Timer()
    dens = spectral_density(final, loss, args=data)
    jax.block_until_ready(dens.nodes)
    slq_seconds = timer()
    norm = float(np.abs(ev).max())
    density = {
        "width": width, "params": int(flat.size), "ok": bool(dens.ok),
        "wasserstein1": wasserstein1(dens.nodes, dens.weights, ev) / norm, "norm": norm,
        "probes": dens.stats["probes"], "steps": dens.stats["steps"],
        "deflated": int(dens.deflated.shape[0]), "slq_seconds": slq_seconds,
        "dense_seconds": dense_seconds,
    }  # fmt: skip
    curve = {"width": width, "ts": np.asarray(ts).tolist(), "loss": np.asarray(sol.loss).tolist()}
    log(f"saddle_chain: width {width}: flow {flow_seconds:.1f} s, chain {chain_seconds:.1f} s, "
        f"{len(rows)} saddles, W1/||H|| {density['wasserstein1']:.1e}")  # fmt: skip
    return rows, density, curve


def predicted_saddle(pred, jumps, X, y, signs, directions):
    """Algorithm 1's saddle after `jumps` jumps, as (a, W): each neuron j fired so far at
    its amplitude a_j (s_j sqrt(n ||D_j||) for a lone neuron, the fast phase's for a group),
    fitting the samples S_j of its support its jump fitted (<w_j, x_i> = y_i / a_j there, 0
    elsewhere); the others at 0. None where a group's members share a sample: its split is
    the fast phase's, which the solution does not carry."""
    m, n = pred.groups.shape[1], y.shape[0]
    a, V = np.zeros(m), np.zeros((m, n))
    fitted, groups = np.asarray(pred.fitted), np.asarray(pred.groups)
    amps, y = np.asarray(pred.final_amplitudes), np.asarray(y)
    support = (np.asarray(directions) > 0) & (np.asarray(signs)[:, None] * y[None, :] > 0)
    for k in range(jumps):
        new = fitted[k] & ~(fitted[k - 1] if k else np.zeros(n, bool))
        members = groups[k][groups[k] >= 0]
        if np.any(np.sum(support[members] & new, axis=0) > 1):
            return None
        for j in members:
            mine = new & support[j]
            a[j], V[j] = amps[j], np.where(mine, y / amps[j], 0.0)
    return a, V @ np.asarray(X)


def orthonormal_chain(alpha, seed):
    """The saddle chain of `orthogonal_flow` from a balanced init of scale alpha on
    orthonormal data, each saddle against Algorithm 1's (`predicted_saddle`): the largest
    difference in any parameter."""
    k = jax.random.split(jax.random.PRNGKey(seed), 4)
    X = jnp.linalg.qr(jax.random.normal(k[0], (ORTHO_N, ORTHO_N)))[0]
    y = jax.random.normal(k[1], (ORTHO_N,))
    U = jax.random.normal(k[2], (ORTHO_M, ORTHO_N))
    U = U / jnp.linalg.norm(U, axis=1, keepdims=True)
    s = jnp.where(jax.random.bernoulli(k[3], 0.5, (ORTHO_M,)), 1.0, -1.0)
    pred = saddle_jumps(y, s, U @ X.T)
    K = int(pred.num_jumps)
    times = np.asarray(pred.times)[:K]
    ts = jnp.linspace(0.0, 1.3 * float(times[-1]) + 0.5, 801)
    timer = Timer()
    sol = orthogonal_flow(X, y, TwoLayerReLU(alpha * s, alpha * U), ts,
                          time_scale=np.log(1 / alpha), rtol=1e-10, atol=1e-10,
                          save_trajectory=True)  # fmt: skip
    flow_seconds = timer()

    def mse(model, data):
        return 0.5 * jnp.mean((model.predict(data[0]) - data[1]) ** 2)

    timer = Timer()
    chain = saddle_chain(sol, mse, args=(X, y))
    chain_seconds = timer()
    rows = []
    for i, c in enumerate(chain):
        jumps = int(np.sum(times < c["time"]))
        predicted = predicted_saddle(pred, jumps, X, y, s, U @ X.T)
        distance = None
        if predicted is not None:
            a, W = predicted
            distance = max(float(np.max(np.abs(np.asarray(c["model"].a) - a))),
                           float(np.max(np.abs(np.asarray(c["model"].W) - W))))  # fmt: skip
        row = _row(c, i, width=ORTHO_M, data="orthonormal", alpha=alpha, seed=seed)
        rows.append({**row, "jumps_before": jumps, "distance_to_prediction": distance})
    distances = ", ".join(_distance(r) for r in rows)
    log(
        f"saddle_chain: orthonormal, alpha {alpha:.0e}: flow {flow_seconds:.1f} s, chain "
        f"{chain_seconds:.1f} s, distances to Algorithm 1 {distances}"
    )
    curve = {"alpha": alpha, "seed": seed, "ts": np.asarray(ts).tolist(),
             "loss": np.asarray(sol.loss).tolist()}  # fmt: skip
    return rows, curve


TS_D, TS_EPS = 10, 1e-3  # teacher-student: inputs, the start's overlap with the teacher


def teacher_student_chain(eps=TS_EPS):
    """The saddle chain of the population gradient flow of an erf student (K = 2, second
    layer fixed at 1) on its erf teacher (M = 2, orthonormal units), from Q = 0.05 I and
    R = eps I, each saddle's order parameters against the fixed point of the online-SGD ODEs
    found from the flow's own plateau (`theory.online_fixed_point` with `second_order=False`:
    the gradient-flow limit; at lr = 1e-6 the ODEs' lr^2 term, which no gradient flow has,
    moved the fixed point by 1e-6)."""
    E = jnp.eye(TS_D)
    teacher = TwoLayerNet(E[:2], jnp.ones(2), activation="erf")
    W0 = eps * E[:2] + np.sqrt(0.05 - eps**2) * E[2:4]
    student = TwoLayerNet(W0, jnp.ones(2), activation="erf", train_second_layer=False)
    ts = jnp.linspace(0.0, 400.0, 801)
    timer = Timer()
    sol = gradient_flow(student, unchecked_teacher_student_loss, ts, args=teacher,
                        hold_kinks=False, save_trajectory=True, rtol=1e-10, atol=1e-10)  # fmt: skip
    flow_seconds = timer()
    timer = Timer()
    chain = saddle_chain(sol, teacher_student_loss, args=teacher)
    chain_seconds = timer()
    rows = []
    for i, c in enumerate(chain):
        j = int(np.argmin(np.abs(np.asarray(ts) - c["time"])))
        at = jax.tree_util.tree_map(lambda x, j=j: x[j] if eqx.is_array(x) else x,
                                    sol.trajectory)  # fmt: skip
        fixed = online_fixed_point(order_parameters(at, teacher), activation="erf",
                                   second_order=False)  # fmt: skip
        ours = order_parameters(c["model"], teacher)
        distance = None
        if bool(fixed.ok):
            distance = max(float(jnp.max(jnp.abs(fixed.state.Q - ours.Q))),
                           float(jnp.max(jnp.abs(fixed.state.R - ours.R))))  # fmt: skip
        row = _row(c, i, width=2, data="teacher_student")
        rows.append({**row, "distance_to_prediction": distance, "fixed_point_eg": float(fixed.eg)})
    log(f"saddle_chain: teacher-student: flow {flow_seconds:.1f} s, chain {chain_seconds:.1f} s, "
        f"distances to the ODEs' fixed points {', '.join(_distance(r) for r in rows)}")  # fmt: skip
    return rows


def run_benchmark(widths=WIDTHS, horizon=40.0, seed=0, alphas=ALPHAS, ortho_seeds=4):
    enable_float64()
    timer = Timer()
    rows, densities, curves = [], [], []
    for width in widths:
        r, d, c = one_net(width, horizon, seed)
        rows += r
        densities.append(d)
        curves.append(c)
    ortho_curves = []
    for alpha in alphas:
        for k in range(ortho_seeds):
            r, c = orthonormal_chain(alpha, seed + k)
            rows += r
            ortho_curves.append(c)
    rows += teacher_student_chain()
    config = {
        "inputs": D, "samples": N, "widths": list(widths), "horizon": horizon,
        "init": "tanh MLP without biases, weights x 1e-4, units=neuron_units",
        "teacher": "two orthonormal tanh units", "density": "spectral_density defaults",
        "orthonormal": {"samples": ORTHO_N, "neurons": ORTHO_M, "alphas": list(alphas),
                        "seeds": ortho_seeds,
                        "labels": "Gaussian", "init": "balanced, random signs and directions"},
    }  # fmt: skip
    return {
        **header("saddle_chain", config, seed),
        "rows": rows,
        "density": densities,
        "_curves": curves,
        "_orthonormal_curves": ortho_curves,
        "wall_seconds": timer(),
    }


def _angle(value) -> str:
    """An escape angle, or a dash where there is none (the last plateau; P > 1024: no
    unstable directions; NaN reads back from results.json as None)."""
    return "-" if value is None or not np.isfinite(value) else f"{value:.1e}"


def _index(row) -> str:
    """The certified Morse index, or the bound reached where it is not certified; a dash
    where the polish found no critical point (the Hessian's inertia at a point that is not
    one is no saddle's index)."""
    if not row["ok"] and row.get("result") != "left_piece":
        return "-"
    return str(row["morse_index"]) if row["morse_exact"] else f">= {row['morse_lower']}"


def _why(row) -> str:
    """Nothing for a row polished to tol, else why not (the result's name)."""
    if row["ok"]:
        return ""
    return f" (not ok: {row.get('result', '?').removeprefix('RESULTS.')})"


def _flow_grad(row) -> str:
    """The flow's ||grad L|| where the plateau was read (a dash in results before it)."""
    g = row.get("flow_grad_norm")
    return "-" if g is None else f"{g:.1e}"


def _distance(row) -> str:
    d = row["distance_to_prediction"]
    return "-" if d is None else f"{d:.1e}"


def table(results: dict) -> str:
    lines = [
        "| width | saddle | t | flow's ‖grad‖ | loss | ‖grad‖ | index | escape angle (rad) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    tanh = [r for r in results["rows"] if r.get("data") is None]
    ts_rows = [r for r in results["rows"] if r.get("data") == "teacher_student"]
    ortho = [r for r in results["rows"] if r.get("data") == "orthonormal"]
    for r in tanh:
        lines.append(
            f"| {r['width']} | {r['saddle']} | {r['time']:.1f} | {_flow_grad(r)} | "
            f"{r['loss']:.6g} | "
            f"{r['grad_norm']:.1e}{_why(r)} | {_index(r)} | {_angle(r['escape_angle'])} |"
        )
    lines += ["", "| width | P | W1 / ‖H‖ | SLQ s | dense s |", "|---|---|---|---|---|"]
    for d in results["density"]:
        lines.append(
            f"| {d['width']} | {d['params']:,} | {d['wasserstein1']:.1e} | "
            f"{d['slq_seconds']:.1f} | {d['dense_seconds']:.1f} |"
        )
    if ortho:
        lines += [
            "",
            "| alpha | seed | saddle | jumps before | t | loss | ‖grad‖ | index | "
            "distance to Algorithm 1 |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
    for r in ortho:
        lines.append(
            f"| {r['alpha']:.0e} | {r['seed']} | {r['saddle']} | {r['jumps_before']} | "
            f"{r['time']:.2f} | "
            f"{r['loss']:.6g} | {r['grad_norm']:.1e}{_why(r)} | "
            f"{_index(r)} | {_distance(r)} |"
        )
    if ts_rows:
        lines += [
            "",
            "| teacher-student saddle | t | loss | ODEs' fixed point eg | ‖grad‖ | index | "
            "distance in Q, R |",
            "|---|---|---|---|---|---|---|",
        ]
    for r in ts_rows:
        lines.append(
            f"| {r['saddle']} | {r['time']:.1f} | {r['loss']:.12g} | {r['fixed_point_eg']:.12g} "
            f"| {r['grad_norm']:.1e}{_why(r)} | {_index(r)} | {_distance(r)} |"
        )
    return "\n".join(lines)


def plot_chain(results: dict, path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, c in enumerate(results["_curves"]):
        ax.semilogy(c["ts"], c["loss"], f"C{i}-", label=f"width {c['width']}")
        for r in results["rows"]:
            if r["width"] == c["width"] and r.get("data") is None:
                label = _index(r).replace(" ", "")
                label = label if r["ok"] else f"{label}?"  # ?: not polished to tol
                ax.plot(r["time"], r["flow_loss"], f"C{i}o" if r["ok"] else f"C{i}x")
                ax.annotate(label, (r["time"], r["flow_loss"]), textcoords="offset points",
                            xytext=(4, 4 + 10 * i), fontsize=8, color=f"C{i}")  # fmt: skip
    ax.set_xlabel("time")
    ax.set_ylabel("loss")
    ax.set_title("saddle chains: each plateau's Morse index (?: no critical point to tol)")
    ax.legend()
    save_figure(fig, path)


def plot_orthonormal(results: dict, path) -> None:
    """The orthonormal flows' losses in rescaled time, each saddle marked by its index, for
    the seed with the most saddles Algorithm 1 predicts."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ortho = [r for r in results["rows"] if r.get("data") == "orthonormal"]
    seeds = sorted({r["seed"] for r in ortho})
    if not seeds:
        return
    shown = max(seeds, key=lambda k: sum(r["distance_to_prediction"] is not None
                                         for r in ortho if r["seed"] == k))  # fmt: skip
    curves = [c for c in results.get("_orthonormal_curves", []) if c.get("seed") == shown]
    for i, c in enumerate(curves):
        ax.semilogy(c["ts"], c["loss"], f"C{i}-", label=f"alpha {c['alpha']:.0e}")
        for r in results["rows"]:
            same = r.get("data") == "orthonormal" and r["alpha"] == c["alpha"]
            if same and r["seed"] == shown:
                ax.plot(r["time"], r["flow_loss"], f"C{i}o" if r["ok"] else f"C{i}x")
                ax.annotate(f"{r['morse_index']} ({_distance(r)})",
                            (r["time"], r["flow_loss"]), textcoords="offset points",
                            xytext=(4, 4 + 10 * i), fontsize=8, color=f"C{i}")  # fmt: skip
    ax.set_xlabel("rescaled time")
    ax.set_ylabel("loss")
    ax.set_title(f"orthonormal data, seed {shown}: index (distance to Algorithm 1's saddle)",
                 fontsize=10)  # fmt: skip
    ax.legend()
    save_figure(fig, path)


def main(argv=None) -> dict:
    p = parser("saddle_chain", __doc__.splitlines()[0], default_seeds=1)
    args = p.parse_args(argv)
    kw = dict(widths=(3, 30), horizon=30.0, alphas=(1e-16,), ortho_seeds=2) if args.quick else {}
    results = run_benchmark(seed=args.seed, **kw)
    figures = {"chain.png": plot_chain, "orthonormal.png": plot_orthonormal}
    finish(args.out, results, table(results), figures)
    return results


if __name__ == "__main__":
    main()
