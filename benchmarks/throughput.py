"""The engine against what researchers write themselves, measured side by side in one run.

- GD on the orthogonal problem (n = d = 64, m = 47, eta = 0.5, 2,000 epochs, float64): the
  engine's seed sweep over 256 seeds against a plain PyTorch loop per seed (`torch.optim.SGD`,
  float64, CPU) and a NumPy loop per seed, in seed-epochs per second, on the same instances.
- The rescaled gradient flow (n = 32, m = 45, alpha = 1e-10 / sqrt(m), the main job's instance)
  against `scipy.integrate.solve_ivp` (RK45) on the same flow in plain (a, <w_j, x_i>)
  coordinates, rtol = 1e-7 and atol = 1e-7 alpha (a plain atol of 1e-7 never leaves the first
  saddle): steps, wall time and final loss.
- `theory.max_margin` against scikit-learn's `LinearSVC(loss="hinge", fit_intercept=False,
  C = 1e6)` on the lifted features of the same program: time, and 1 - cos to the exact
  solution (certified by its duality gap).
- The multi-index population flow against the finite-sample flow at n = 50,000, in simulated
  time per wall second; the finite-sample flow to t = 0.1 against its FLOP floor (field
  evaluations x 4 n d m over the matmul peak), beside the same solve with the autodiff field it
  used before, and one field evaluation written out (`dynamics.sample_loss_gradient`) against
  autodiff.
- The GD sweep's achieved FLOP/s against a measured float64 matmul peak on this machine, and
  its memory traffic (at least the m x n weights read and written per step) against a
  STREAM-like triad x <- s x + c measured in the same run, on every device at once, inside a
  compiled loop as the sweep runs: on arrays of the sweep's working set per device (its
  vmapped batch of weights) and on large ones (64 MiB per array). Whichever fraction of its
  peak is larger is the limit that binds.

`results.json` has `comparisons`: entries with `name`, `ours`, `theirs`, `unit`, `ratio`
(ours / theirs) and `better` (whether higher or lower is better). Peers that are not installed
(`pip install -e '.[bench]'`) are reported as skipped. Writes `ratios.png`.

    python -m benchmarks.throughput [--quick]
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import _gd_sweep as gd_bench, _peers, _saddle
from benchmarks._common import (
    Timer,
    best_seconds,
    comparison_entry,
    enable_float64,
    host_devices,
    log,
    parser,
    pyplot,
    save_figure,
)
from benchmarks._driver import finish, header
from benchmarks._roofline import compare_bandwidth, peak_flops
from benchmarks._throughput_mean_field import compare_multi_index
from dynamics import (
    fixed_second_layer,
    gaussian_mixture,
    signs_and_directions,
)
from integrators import orthogonal_flow
from theory import coverage_width, max_margin, one_minus_cos, saddle_jumps


def _gd_instances(count: int, base_seed: int):
    """The sweep's first `count` instances, as NumPy arrays (seed i = fold_in(key, i))."""
    key0 = jax.random.PRNGKey(base_seed)
    out = []
    for i in range(count):
        X, y, model = gd_bench.make(jax.random.fold_in(key0, i), gd_bench.ALPHA)
        out.append(tuple(np.asarray(v) for v in (X, y, model.a, model.W)))
    return out


def _per_seed_rate(fn, instances, epochs):
    """Seed-epochs/s of a per-seed reference loop (after one warm-up seed), and its losses."""
    fn(*instances[0], min(epochs, 20), gd_bench.ETA)
    t = Timer()
    losses = [fn(*inst, epochs, gd_bench.ETA) for inst in instances]
    return len(instances) * epochs / t(), losses


def compare_gd(seeds: int, ref_seeds: int, base_seed: int) -> tuple[list, dict]:
    ours = gd_bench.measure(seeds, base_seed)
    engine_losses = gd_bench.final_losses(ref_seeds, base_seed)
    instances = _gd_instances(ref_seeds, base_seed)
    rows, detail = [], {"engine": ours}
    # The loops below work in W; on orthonormal data X X^T = I only to ~1e-15, which flips the
    # sign of frozen components of size ~alpha and wakes samples the exact dynamics cannot
    # reach. The same NumPy loop in the data basis (X = I, W X^T) reproduces the engine.
    X, y, a, W = instances[0]
    exact = _peers.numpy_gd(np.eye(X.shape[0]), y, a, W @ X.T, gd_bench.EPOCHS, gd_bench.ETA)
    detail["numpy_data_basis_final_loss_rel_diff"] = float(abs(exact / engine_losses[0] - 1))
    for name, fn in (("numpy", _peers.numpy_gd), ("torch", _peers.torch_gd)):
        try:
            rate, losses = _per_seed_rate(fn, instances, gd_bench.EPOCHS)
        except ImportError:
            rows.append({"name": f"GD sweep vs {name} loop", "skipped": f"{name} not installed"})
            continue
        agree = float(np.max(np.abs(np.asarray(losses) / engine_losses - 1)))
        detail[name] = {"seed_epochs_per_s": rate, "seeds": ref_seeds, "final_loss_rel_diff": agree}
        rows.append(
            comparison_entry(
                f"GD sweep vs {name} loop",
                ours["seed_epochs_per_s"],
                rate,
                "seed-epochs/s",
                "higher",
            )
        )
    return rows, detail


@partial(jax.jit, static_argnums=5)
def _engine_flow(model, X, y, tau, ts, rtol):
    return orthogonal_flow(X, y, model, ts, time_scale=tau, rtol=rtol, atol=rtol)


def compare_flow(base_seed: int, ps=(10, 30, 100), rtol: float = 1e-7) -> tuple[list, dict]:
    """The main job's flow for one seed at alpha = 10^-p / sqrt(m), against solve_ivp (RK45, the
    same Dormand-Prince pair as the engine's Dopri5) in plain coordinates."""
    try:
        from scipy.integrate import solve_ivp
    except ImportError:
        return [{"name": "flow vs solve_ivp", "skipped": "scipy not installed"}], {}
    n = 32
    m = coverage_width(n)
    rows, detail = [], {}
    for p in ps:
        X, y, model = _saddle.instance(jax.random.PRNGKey(base_seed), p, n, m)
        pred = saddle_jumps(y, *signs_and_directions(model, X))
        t1 = float(pred.horizon(1.15))
        tau = float(_saddle.time_scale(p, m))
        ts = jnp.array([0.0, t1])
        args = (model, X, y, tau, ts)
        ours_s = best_seconds(partial(_engine_flow, *args, rtol))
        sol = _engine_flow(*args, rtol)
        Xn, yn = np.asarray(X), np.asarray(y)
        alpha = float(np.exp(-tau))
        field = _peers.plain_flow_field(tau, yn, m, n)
        u0 = np.concatenate([np.asarray(model.a), (np.asarray(model.W) @ Xn.T).ravel()])
        t = Timer()
        ref = solve_ivp(field, (0.0, t1), u0, method="RK45", rtol=rtol, atol=rtol * alpha)
        theirs_s = t()
        a, V = ref.y[:m, -1], ref.y[m:, -1].reshape(m, n)
        ref_loss = float(0.5 * np.mean((np.maximum(V, 0.0).T @ a - yn) ** 2))
        accepted = len(ref.t) - 1
        total = (ref.nfev - 2) // 6  # RK45: 6 new evaluations per attempted step (FSAL)
        detail[f"p={p}"] = {
            "engine": {
                "seconds": ours_s,
                "steps": int(sol.stats["num_steps"]),
                "accepted_steps": int(sol.stats["num_accepted_steps"]),
                "final_loss": float(sol.loss[-1]),
            },
            "solve_ivp": {
                "seconds": theirs_s,
                "steps": int(total),
                "accepted_steps": accepted,
                "nfev": int(ref.nfev),
                "final_loss": ref_loss,
                "status": int(ref.status),
            },
        }
        name = f"flow vs solve_ivp, alpha = 1e-{p}/sqrt(m)"
        rows += [
            comparison_entry(f"{name}: wall time", ours_s, theirs_s, "s", "lower"),
            comparison_entry(
                f"{name}: steps",
                int(sol.stats["num_steps"]),
                int(total),
                "steps (incl. rejected)",
                "lower",
            ),
        ]
    return rows, detail


def compare_max_margin(base_seed: int) -> tuple[list, dict]:
    n, d, m, gamma = 20, 400, 10, 0.1
    X, y, _, _ = gaussian_mixture(n, d, signal=15.0, key=jax.random.PRNGKey(base_seed))
    a = fixed_second_layer(m)
    solve = jax.jit(lambda X, y: max_margin(X, y, a, gamma))
    ours_s = best_seconds(lambda: solve(X, y), repeats=20)
    mm = solve(X, y)
    detail = {
        "engine": {
            "seconds": ours_s,
            "relative_gap": float(mm.relative_gap),
            "kkt": float(mm.kkt_residual),
        }
    }
    try:
        from sklearn.svm import LinearSVC
    except ImportError:
        return [
            {"name": "max_margin vs LinearSVC", "skipped": "scikit-learn not installed"}
        ], detail
    c = np.where(np.asarray(mm.pattern), 1.0, gamma)  # (m, n): phi's slopes, all-activated
    feats = (np.asarray(a)[:, None, None] * c[:, :, None] * np.asarray(X)[None]).transpose(1, 0, 2)
    feats = feats.reshape(n, m * d)
    dual_value = float(jnp.sum(mm.dual) - 0.5 * mm.dual @ mm.margins)  # <= the optimum

    def suboptimality(W):
        """(1/2 ||W / min margin||^2 - D) / D: W scaled to feasibility against the dual value."""
        margins = np.asarray(y) * (feats @ W.ravel())
        return (0.5 * float(np.sum(W**2)) / float(np.min(margins)) ** 2 - dual_value) / dual_value

    ours_err = suboptimality(np.asarray(mm.W) * float(mm.norm))
    rows = []
    for label, kwargs in (
        ("tol 1e-10", dict(tol=1e-10, max_iter=1_000_000)),
        ("defaults", dict()),
    ):
        svc = LinearSVC(C=1e6, loss="hinge", fit_intercept=False, **kwargs)
        t = Timer()
        svc.fit(feats, np.asarray(y))
        theirs_s = t()
        W_svc = svc.coef_.reshape(m, d)
        err = suboptimality(W_svc)
        detail[f"LinearSVC ({label})"] = {
            "seconds": theirs_s,
            "relative_suboptimality": err,
            "one_minus_cos_to_ours": float(one_minus_cos(jnp.asarray(W_svc), mm.W)),
            "iterations": int(svc.n_iter_),
        }
        rows += [
            comparison_entry(
                f"max_margin vs LinearSVC ({label}): time", ours_s, theirs_s, "s", "lower"
            ),
            comparison_entry(
                f"max_margin vs LinearSVC ({label}): error",
                max(abs(ours_err), 1e-16),
                max(abs(err), 1e-16),
                "relative primal suboptimality (floor 1e-16)",
                "lower",
            ),
        ]
    return rows, detail


def run_benchmark(quick=False, base_seed=0) -> dict:
    enable_float64()
    timer = Timer()
    seeds, ref_seeds = (32, 2) if quick else (256, 4)
    samples, t_sim, t_floor = (2000, 0.002, 0.01) if quick else (50_000, 0.002, 0.1)
    comparisons, details = [], {}
    peak = peak_flops(1024 if quick else 2048)
    for label, (rows, detail) in (
        ("gd", compare_gd(seeds, ref_seeds, base_seed)),
        ("flow", compare_flow(base_seed)),
        ("max_margin", compare_max_margin(base_seed)),
        ("multi_index", compare_multi_index(samples, t_sim, t_floor, base_seed, peak)),
    ):
        comparisons += rows
        details[label] = detail
        log(f"throughput: {label} done ({timer():.0f} s)")
    achieved = details["gd"]["engine"]["seed_epochs_per_s"] * gd_bench.FLOPS_PER_EPOCH
    comparisons.append(
        comparison_entry(
            "GD sweep vs float64 matmul peak",
            achieved,
            peak,
            "FLOP/s",
            "higher",
            note="fraction of the measured peak",
        )
    )
    rows, details["bandwidth"] = compare_bandwidth(details["gd"]["engine"], quick)
    comparisons += rows
    flop_fraction = achieved / peak
    bw_fraction = rows[0]["ratio"]
    details["binding_limit"] = {
        "flop_fraction": flop_fraction,
        "bandwidth_fraction": bw_fraction,
        "binds": "bandwidth" if bw_fraction > flop_fraction else "flops",
    }
    config = {
        "quick": quick,
        "gd_seeds": seeds,
        "reference_seeds": ref_seeds,
        "gd_flops_per_epoch": gd_bench.FLOPS_PER_EPOCH,
        "multi_index_samples": samples,
    }
    return {
        **header("throughput", config, base_seed),
        "wall_seconds": timer(),
        "comparisons": comparisons,
        "details": details,
    }


def table(results: dict) -> str:
    lines = [f"{'comparison':<52} {'ours':>11} {'theirs':>11} {'ratio':>9}  unit"]
    for c in results["comparisons"]:
        if "skipped" in c:
            lines.append(f"{c['name']:<52} skipped: {c['skipped']}")
            continue
        lines.append(
            f"{c['name']:<52} {c['ours']:>11.4g} {c['theirs']:>11.4g} {c['ratio']:>9.3g}"
            f"  {c['unit']} ({c['better']} is better)"
        )
    b = results["details"]["binding_limit"]
    lines.append(
        f"GD sweep: {b['flop_fraction']:.3g} of the FLOP peak, {b['bandwidth_fraction']:.3g} of"
        f" the bandwidth on its working set: {b['binds']} binds"
    )
    lines.append(f"total wall time {results['wall_seconds']:.1f} s")
    return "\n".join(lines)


def plot(results: dict, path) -> None:
    plt = pyplot()
    rows = [c for c in results["comparisons"] if "skipped" not in c]
    gain = [c["ratio"] if c["better"] == "higher" else 1.0 / c["ratio"] for c in rows]
    fig, ax = plt.subplots(figsize=(7.5, 0.5 * len(rows) + 1.5))
    ypos = np.arange(len(rows))
    ax.barh(ypos, gain, color=["tab:green" if g >= 1 else "tab:red" for g in gain])
    ax.set_yticks(ypos, [c["name"] for c in rows], fontsize=8)
    ax.set_xscale("log")
    ax.axvline(1.0, color="k", lw=0.8)
    for y, g in zip(ypos, gain, strict=True):
        ax.text(g, y, f" {g:.3g}x", va="center", fontsize=8)
    ax.set_xlabel("advantage of the engine (ratio, oriented so that > 1 is better)")
    ax.invert_yaxis()
    save_figure(fig, path)


def main(argv=None) -> dict:
    host_devices()
    p = parser("throughput", __doc__.splitlines()[0], default_seeds=256)
    args = p.parse_args(argv)
    results = run_benchmark(args.quick, args.seed)
    finish(args.out, results, table(results), {"ratios.png": plot})
    return results


if __name__ == "__main__":
    main()
