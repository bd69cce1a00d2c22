"""The saddle chains of small tanh nets and the spectral densities of their Hessians.

For each net (16 inputs, one hidden tanh layer of `width` units without biases, a teacher of
two tanh units, 256 Gaussian samples, init scale 1e-4, per-neuron log scales), the
`gradient_flow` trajectory's plateaus are polished into its saddle chain
(`integrators.saddle_chain`): each saddle's ||grad||, certified Morse index, and the angle at
which the flow leaves it. Nothing predicts these saddles in closed form here, so
`distance_to_prediction` is null; the origin's index is the width, one negative curvature per
unit. Then, at each net's final point, the Hessian's spectral density by stochastic Lanczos
quadrature (`integrators.spectral_density`, outliers deflated) against the dense spectrum
(`jax.hessian` + `eigvalsh`), in Wasserstein-1 relative to ||H||.

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
from integrators import gradient_flow, neuron_units, saddle_chain, spectral_density, wasserstein1

D, N = 16, 256
WIDTHS = (3, 30, 120)


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
        {
            "width": width, "saddle": i, "time": c["time"], "flow_loss": c["flow_loss"],
            "loss": c["loss"], "grad_norm": c["grad_norm"], "ok": c["ok"],
            "morse_index": c["morse_index"], "morse_exact": c["morse_index"] >= 0,
            "morse_lower": c["morse_lower"], "escape_angle": c["escape_angle"],
            "distance_to_prediction": None,
        }
        for i, c in enumerate(chain)
    ]  # fmt: skip
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


def run_benchmark(widths=WIDTHS, horizon=40.0, seed=0):
    enable_float64()
    timer = Timer()
    rows, densities, curves = [], [], []
    for width in widths:
        r, d, c = one_net(width, horizon, seed)
        rows += r
        densities.append(d)
        curves.append(c)
    config = {
        "inputs": D, "samples": N, "widths": list(widths), "horizon": horizon,
        "init": "tanh MLP without biases, weights x 1e-4, units=neuron_units",
        "teacher": "two orthonormal tanh units", "density": "spectral_density defaults",
    }  # fmt: skip
    return {
        **header("saddle_chain", config, seed),
        "rows": rows,
        "density": densities,
        "_curves": curves,
        "wall_seconds": timer(),
    }


def _angle(value) -> str:
    """An escape angle, or a dash where there is none (the last plateau; P > 1024: no
    unstable directions; NaN reads back from results.json as None)."""
    return "-" if value is None or not np.isfinite(value) else f"{value:.1e}"


def table(results: dict) -> str:
    lines = [
        "| width | saddle | t | loss | ‖grad‖ | index | escape angle (rad) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        index = r["morse_index"] if r["morse_exact"] else f">= {r['morse_lower']}"
        lines.append(
            f"| {r['width']} | {r['saddle']} | {r['time']:.1f} | {r['loss']:.6g} | "
            f"{r['grad_norm']:.1e}{'' if r['ok'] else ' (not ok)'} | {index} | "
            f"{_angle(r['escape_angle'])} |"
        )
    lines += ["", "| width | P | W1 / ‖H‖ | SLQ s | dense s |", "|---|---|---|---|---|"]
    for d in results["density"]:
        lines.append(
            f"| {d['width']} | {d['params']:,} | {d['wasserstein1']:.1e} | "
            f"{d['slq_seconds']:.1f} | {d['dense_seconds']:.1f} |"
        )
    return "\n".join(lines)


def plot_chain(results: dict, path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, c in enumerate(results["_curves"]):
        ax.semilogy(c["ts"], c["loss"], f"C{i}-", label=f"width {c['width']}")
        for r in results["rows"]:
            if r["width"] == c["width"]:
                label = r["morse_index"] if r["morse_exact"] else f">={r['morse_lower']}"
                label = f"{label}" if r["ok"] else f"{label}?"  # ?: not polished to tol
                ax.plot(r["time"], r["flow_loss"], f"C{i}o" if r["ok"] else f"C{i}x")
                ax.annotate(label, (r["time"], r["flow_loss"]), textcoords="offset points",
                            xytext=(4, 4 + 10 * i), fontsize=8, color=f"C{i}")  # fmt: skip
    ax.set_xlabel("time")
    ax.set_ylabel("loss")
    ax.set_title("saddle chains: each plateau's Morse index (?: not a critical point to tol)")
    ax.legend()
    save_figure(fig, path)


def main(argv=None) -> dict:
    p = parser("saddle_chain", __doc__.splitlines()[0], default_seeds=1)
    args = p.parse_args(argv)
    kw = dict(widths=(3, 30), horizon=30.0) if args.quick else {}
    results = run_benchmark(seed=args.seed, **kw)
    finish(args.out, results, table(results), {"chain.png": plot_chain})
    return results


if __name__ == "__main__":
    main()
