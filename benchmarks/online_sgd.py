"""Online SGD in the teacher-student setting: the order-parameter ODEs against simulations,
against fixed-step Euler, and at the symmetric plateau.

Setting (`theory.online_sgd_ode`): a student of K units learns a teacher of M units with
orthonormal rows (T = I) and c = 1 from one Gaussian sample per step, in time t = steps / d.
The student starts with macroscopic overlaps R0 = [[0.2, 0.1], [0.1, 0.15]] (padded with 0.05
for a third unit) and a random part of norm 0.3 orthogonal to the teacher, so that every d
starts from the same order parameters up to O(d^-1/2).

1. **Simulations** (`integrators.online_sgd`, through `integrators.sweep` over seeds): per d, the
   ODE is integrated from each seed's own initial overlaps. `max_eg_gap` is the largest gap
   over t between the seeds' mean eps_g and the ODEs' mean; `max_z` that gap over the
   seeds' standard error; `seed_rms_gap` the root mean square over seeds of each run's largest
   gap to its own ODE, whose slope against d (log-log) is `gap_exponent` (-1/2 expected).
2. **Solvers**: `rhs_evals` and the largest relative error of eps_g over the horizon (where
   eps_g is above 1e-3 of its start) against a reference (Dopri8 at rtol = atol = 1e-14), for
   Euler at dt = 0.01 (what the public codes do), Euler at the evaluations of Dopri8 at rtol
   1e-10, Tsit5 and Dopri8 at rtol 1e-10.
3. **Plateau** (erf, K = M = 2, fixed second layer, Q0 = 0.05 I, R0 = eps I): its height
   against the fixed point of the ODEs (`theory.online_fixed_point`, polished from the
   plateau), and the escape time (eps_g below half the plateau) against log(1 / eps): slope
   against 1 / lambda, lambda the fixed point's unstable eigenvalue.

The configurations marked `tuned: false` were chosen once and not adjusted (K = 3 on M = 2,
relu, both layers trained, label noise 0.1).

Writes `results.json` (`simulation` rows: `activation`, `K`, `M`, `d`, `seeds`, `max_eg_gap`,
`max_z`, `seed_rms_gap`; `exponents`; `solver` rows: `activation`, `method`, `rhs_evals`,
`max_rel_error`; `plateau`) and `eg.png` (eps_g against t: the ODE over the simulations at
several d) and `plateau.png`.

    python -m benchmarks.online_sgd [--quick] [--seeds S]
"""

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._common import Timer, enable_float64, fit_slope, log, parser, pyplot, save_figure
from benchmarks._driver import finish, header, run_sweep
from dynamics import TwoLayerNet, order_parameters
from integrators import online_sgd
from theory import OrderParameters, online_fixed_point, online_sgd_ode

# (activation, K, M, lr, lr_second, noise, horizon, tuned)
CONFIGS = (
    ("erf", 2, 2, 1.0, 0.0, 0.0, 40.0, True),
    ("relu", 2, 2, 0.5, 0.0, 0.0, 40.0, True),
    ("linear", 2, 2, 0.5, 0.0, 0.0, 20.0, True),
    ("relu", 3, 2, 0.3, 0.3, 0.1, 40.0, False),
)
DIMS = (250, 1000, 4000)  # `--dims 8000` runs the largest on its own (about 8 minutes a config)
SAVES = 41
R0 = np.array([[0.2, 0.1], [0.1, 0.15], [0.05, 0.05]])
EPSILONS = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
# solver errors are relative where eps_g > EG_FLOOR eps_g(0): eps_g = 1/2 omega^T I2 omega
# cancels O(1) terms, so below 1e-3 of its start an atol of 1e-12 on Q and R alone moves it
# by 1e-9 relative (linear units reach eps_g 1e-9 of its start by t = 20)
EG_FLOOR = 1e-3


def teacher(activation, M, d):
    """M orthonormal rows (fixed key: one teacher per d), c = 1."""
    V = jnp.linalg.qr(jax.random.normal(jax.random.PRNGKey(12345), (d, M)))[0].T
    return TwoLayerNet(V, jnp.ones(M), activation=activation)


def student(key, teach, K):
    """R0 on the teacher plus a random part of norm 0.3 orthogonal to it; a = 1."""
    V = teach.W
    Z = jax.random.normal(key, (K, V.shape[1]), V.dtype)
    Z = Z - (Z @ V.T) @ V
    Z = 0.3 * Z / jnp.linalg.norm(Z, axis=1, keepdims=True)
    return TwoLayerNet(
        jnp.asarray(R0[:K, : V.shape[0]]) @ V + Z, jnp.ones(K), activation=teach.activation
    )


def simulate(config, dims, seeds, base_seed, out):
    activation, K, M, lr, lr_second, noise, horizon, tuned = config
    ts = jnp.linspace(0.0, horizon, SAVES)
    rates = dict(lr=lr, lr_second=lr_second, noise=noise)

    def make(key, d):
        return key

    def run(key, d):
        teach = teacher(activation, M, d)
        k1, k2 = jax.random.split(key)
        init = student(k1, teach, K)
        sim = online_sgd(init, teach, ts, key=k2, **rates)
        ode = online_sgd_ode(order_parameters(init, teach), ts, activation=activation, **rates)
        return {"sim": sim.eg, "ode": ode.eg, "ok": sim.ok & ode.ok}

    name = f"online_{activation}_K{K}_M{M}"
    res, record = run_sweep(
        run, make=make, seeds=seeds, grid=[{"d": d} for d in dims], static=["d"],
        out=None if out is None else out / name, name=name, base_seed=base_seed,
        config={"config": list(config), "saves": SAVES}, ok=("ok",),
    )  # fmt: skip
    rows, curves = [], []
    for d, o in zip(dims, res.outputs, strict=True):
        sim, ode = np.asarray(o["sim"]), np.asarray(o["ode"])
        mean, se = sim.mean(0), sim.std(0, ddof=1) / np.sqrt(seeds)
        gap = np.abs(mean - ode.mean(0))
        per_seed = np.max(np.abs(sim - ode), axis=1)
        rows.append(
            {
                "activation": activation, "K": K, "M": M, "d": d, "seeds": seeds, "lr": lr,
                "lr_second": lr_second, "noise": noise, "tuned": tuned,
                "max_eg_gap": float(gap.max()),
                "max_z": float((gap / np.maximum(se, 1e-300)).max()),
                "seed_rms_gap": float(np.sqrt(np.mean(per_seed**2))),
                "ok": bool(np.all(o["ok"])), "seconds": float(res.point_seconds[dims.index(d)]),
            }
        )  # fmt: skip
        curves.append({"d": d, "ts": np.asarray(ts).tolist(), "sim": mean.tolist(),
                       "se": se.tolist(), "ode": ode.mean(0).tolist()})  # fmt: skip
        log(f"  {name} d={d}: gap {gap.max():.2e} (z {rows[-1]['max_z']:.1f}), "
            f"per-seed rms {rows[-1]['seed_rms_gap']:.2e}")  # fmt: skip
    exponent = fit_slope(dims, [r["seed_rms_gap"] for r in rows])  # log-log
    return rows, {"config": name, "gap_exponent": exponent, "sweep": record}, curves


def _start(config):
    K, M = config[1], config[2]
    R = jnp.asarray(R0[:K, :M])
    Q = R @ R.T + 0.09 * jnp.eye(K)
    return OrderParameters(Q=Q, R=R, T=jnp.eye(M), a=jnp.ones(K), c=jnp.ones(M))


def solvers(config):
    """Each method's right-hand-side evaluations and worst relative error in eps_g."""
    activation, K, M, lr, lr_second, noise, horizon, _ = config
    kw = dict(activation=activation, lr=lr, lr_second=lr_second, noise=noise)
    state, ts = _start(config), jnp.linspace(0.0, horizon, SAVES)
    import diffrax  # noqa: PLC0415

    ref = online_sgd_ode(state, ts, rtol=1e-14, atol=1e-14, **kw)
    check = online_sgd_ode(state, ts, rtol=1e-14, atol=1e-14, solver=diffrax.Tsit5(), **kw)
    ref_eg = np.asarray(ref.eg)
    rows = []

    keep = ref_eg > EG_FLOOR * ref_eg[0]

    def add(method, sol, seconds):
        err = float(np.max(np.abs(np.asarray(sol.eg)[keep] / ref_eg[keep] - 1)))
        rows.append({"activation": activation, "K": K, "M": M, "tuned": config[-1],
                     "method": method, "rhs_evals": int(sol.stats["rhs_evals"]),
                     "max_rel_error": err, "ok": bool(sol.ok), "seconds": seconds})  # fmt: skip
        log(f"  {activation} {method}: {rows[-1]['rhs_evals']} evals, error {err:.1e}")

    def timed(**options):
        jax.block_until_ready(online_sgd_ode(state, ts, **kw, **options).eg)  # compile
        timer = Timer()
        sol = online_sgd_ode(state, ts, **kw, **options)
        jax.block_until_ready(sol.eg)
        return sol, timer()

    add("euler", *timed(dt=0.01, max_steps=10**7))
    dopri8, seconds = timed(rtol=1e-10, atol=1e-12)
    tsit5 = timed(rtol=1e-10, atol=1e-12, solver=diffrax.Tsit5())
    add("tsit5", *tsit5)
    add("dopri8", dopri8, seconds)
    equal = horizon / int(dopri8.stats["rhs_evals"])
    add("euler_equal_evals", *timed(dt=equal, max_steps=10**7))
    reference = {"activation": activation, "reference_vs_tsit5": float(
        np.max(np.abs(np.asarray(check.eg)[keep] / ref_eg[keep] - 1))),
        "smallest_eg_compared": float(ref_eg[keep].min())}  # fmt: skip
    return rows, reference


def plateau(lr=0.5, horizon=400.0):
    """Plateau height and escape times of erf, K = M = 2, from Q0 = 0.05 I, R0 = eps I."""
    ts = jnp.linspace(0.0, horizon, 801)
    rows, curves = [], []
    for eps in EPSILONS:
        state = OrderParameters(Q=0.05 * jnp.eye(2), R=eps * jnp.eye(2), T=jnp.eye(2),
                                a=jnp.ones(2), c=jnp.ones(2))  # fmt: skip
        sol = online_sgd_ode(state, ts, activation="erf", lr=lr)
        eg = np.asarray(sol.eg)
        rate = np.abs(np.gradient(eg, np.asarray(ts)))
        learned = np.argmax(eg < 1e-3) if (eg < 1e-3).any() else len(eg)
        i = 20 + int(np.argmin(rate[20:learned]))  # the flattest point after the first drop
        after = (np.arange(len(eg)) > i) & (eg < 0.5 * eg[i])
        at = jax.tree_util.tree_map(lambda x, i=i: x[i], sol.state)
        fixed = online_fixed_point(at, activation="erf", lr=lr)
        lam = float(fixed.eigenvalues.real[0])
        rows.append({"eps": eps, "plateau_eg": float(eg[i]), "fixed_point_eg": float(fixed.eg),
                     "fixed_point_ok": bool(fixed.ok), "unstable": lam,
                     "escape_time": float(ts[np.argmax(after)]) if after.any() else None,
                     "ode_ok": bool(sol.ok)})  # fmt: skip
        curves.append(eg.tolist())
    times = [r["escape_time"] for r in rows]
    slope = float(np.polyfit(np.log(1.0 / np.array(EPSILONS)), np.array(times, float), 1)[0])
    summary = {"lr": lr, "rows": rows, "escape_slope": slope,
               "inverse_unstable": 1.0 / rows[-1]["unstable"]}  # fmt: skip
    return summary, {"ts": np.asarray(ts).tolist(), "eg": curves}


def run_benchmark(configs=CONFIGS, dims=DIMS, seeds=8, seed=0, out=None):
    enable_float64()
    timer = Timer()
    simulation, exponents, curves, solver_rows, references = [], [], {}, [], []
    for config in configs:
        log(f"online_sgd: {config}")
        rows, exponent, c = simulate(config, dims, seeds, seed, out)
        simulation += rows
        exponents.append(exponent)
        curves[exponent["config"]] = c
        r, ref = solvers(config)
        solver_rows += r
        references.append(ref)
    plat, plat_curves = plateau()
    config = {"configs": [list(c) for c in configs], "dims": list(dims), "seeds": seeds,
              "R0": R0.tolist(), "saves": SAVES, "epsilons": list(EPSILONS)}  # fmt: skip
    return {
        **header("online_sgd", config, seed),
        "simulation": simulation, "exponents": exponents, "solver": solver_rows,
        "references": references, "plateau": plat, "_curves": curves,
        "_plateau": plat_curves, "wall_seconds": timer(),
    }  # fmt: skip


def table(results) -> str:
    lines = ["| activation | K | M | d | seeds | max eg gap | max z | seed rms gap |",
             "|---|--:|--:|--:|--:|--:|--:|--:|"]  # fmt: skip
    for r in results["simulation"]:
        tag = "" if r["tuned"] else " (untuned)"
        lines.append(
            f"| {r['activation']}{tag} | {r['K']} | {r['M']} | {r['d']} | {r['seeds']} | "
            f"{r['max_eg_gap']:.2e} | {r['max_z']:.1f} | {r['seed_rms_gap']:.2e} |"
        )
    lines += ["", "| config | gap exponent |", "|---|--:|"]
    for e in results["exponents"]:  # one d alone has no slope (null in results.json)
        slope = e["gap_exponent"]
        shown = "-" if slope is None or not np.isfinite(slope) else f"{slope:.2f}"
        lines.append(f"| {e['config']} | {shown} |")
    lines += [
        "",
        "| activation | K | method | rhs evals | max rel error |",
        "|---|--:|---|--:|--:|",
    ]
    for r in results["solver"]:
        tag = "" if r.get("tuned", True) else " (untuned)"
        lines.append(f"| {r['activation']}{tag} | {r['K']} | {r['method']} | {r['rhs_evals']:,} | "
                     f"{r['max_rel_error']:.1e} |")  # fmt: skip
    p = results["plateau"]
    lines += ["", "| eps | plateau eg | fixed point eg | escape t |", "|--:|--:|--:|--:|"]
    for r in p["rows"]:
        lines.append(f"| {r['eps']:.0e} | {r['plateau_eg']:.6f} | {r['fixed_point_eg']:.6f} | "
                     f"{r['escape_time']} |")  # fmt: skip
    lines.append(f"\nescape slope {p['escape_slope']:.3f} against 1/lambda "
                 f"{p['inverse_unstable']:.3f}")  # fmt: skip
    return "\n".join(lines)


def plot_eg(results, path):
    plt = pyplot()
    curves = results["_curves"]
    fig, axes = plt.subplots(1, len(curves), figsize=(4 * len(curves), 3.5), squeeze=False)
    for ax, (name, cs) in zip(axes[0], curves.items(), strict=True):
        for i, c in enumerate(cs):
            t, m, se = np.array(c["ts"]), np.array(c["sim"]), np.array(c["se"])
            ax.fill_between(t, m - 2 * se, m + 2 * se, color=f"C{i}", alpha=0.25)
            ax.semilogy(t, m, f"C{i}o", ms=3, label=f"SGD d={c['d']}")
            ax.semilogy(t, c["ode"], f"C{i}-", lw=1)
        ax.set_title(name)
        ax.set_xlabel("t = steps / d")
        ax.set_ylabel("eps_g")
        ax.legend(fontsize=7)
    fig.suptitle("online SGD (dots, 2 s.e. bands) against the ODEs (lines)")
    save_figure(fig, path)


def plot_plateau(results, path):
    plt = pyplot()
    p, c = results["plateau"], results["_plateau"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.5))
    for r, eg in zip(p["rows"], c["eg"], strict=True):
        a1.semilogy(c["ts"], eg, label=f"eps={r['eps']:.0e}")
    a1.axhline(p["rows"][0]["fixed_point_eg"], color="k", ls=":", label="fixed point")
    a1.set_xlabel("t")
    a1.set_ylabel("eps_g")
    a1.legend(fontsize=7)
    x = np.log(1.0 / np.array([r["eps"] for r in p["rows"]]))
    a2.plot(x, [r["escape_time"] for r in p["rows"]], "o", label="ODE escape times")
    t0 = p["rows"][0]["escape_time"] - p["inverse_unstable"] * x[0]
    a2.plot(x, t0 + p["inverse_unstable"] * x, "k--", label="slope 1/lambda")
    a2.set_xlabel("log(1/eps)")
    a2.set_ylabel("escape time")
    a2.legend(fontsize=7)
    save_figure(fig, path)


def main(argv=None) -> dict:
    p = parser("online_sgd", __doc__.splitlines()[0], default_seeds=8)
    p.add_argument("--dims", type=int, nargs="+", default=list(DIMS), help="input dimensions d")
    p.add_argument("--configs", type=int, nargs="+", default=list(range(len(CONFIGS))),
                   help="which of CONFIGS (indices)")  # fmt: skip
    args = p.parse_args(argv)
    if args.quick:
        results = run_benchmark(configs=(("erf", 2, 2, 1.0, 0.0, 0.0, 20.0, True),),
                                dims=(250, 500), seeds=min(args.seeds, 8), seed=args.seed,
                                out=args.out)  # fmt: skip
    else:
        configs = tuple(CONFIGS[i] for i in args.configs)
        results = run_benchmark(configs, tuple(args.dims), args.seeds, args.seed, args.out)
    finish(args.out, results, table(results), {"eg.png": plot_eg, "plateau.png": plot_plateau})
    return results


if __name__ == "__main__":
    main()
