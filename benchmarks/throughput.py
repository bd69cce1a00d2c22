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

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import _gd_sweep as gd_bench, _peers, _saddle
from benchmarks._common import (
    Timer,
    best_seconds,
    enable_float64,
    host_devices,
    log,
    parser,
    pyplot,
    save_figure,
)
from benchmarks._driver import finish, header
from dynamics import (
    MeanFieldNet,
    fixed_second_layer,
    gaussian_mixture,
    mean_field_init,
    sample_loss,
    sample_loss_gradient,
    signs_and_directions,
    standard_target,
)
from integrators import mean_field_flow, orthogonal_flow
from theory import coverage_width, max_margin, one_minus_cos, saddle_jumps
from theory.numerics import diffeqsolve

M_N_BYTES = 8 * gd_bench.M * gd_bench.N  # one seed's float64 data-basis weights
FLOW_BATCH = 2500  # rows per batch of the finite-sample field: its (b, m) arrays stay in cache


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
            _entry(
                f"GD sweep vs {name} loop",
                ours["seed_epochs_per_s"],
                rate,
                "seed-epochs/s",
                "higher",
            )
        )
    return rows, detail


def _entry(name, ours, theirs, unit, better, **extra) -> dict:
    return {
        "name": name,
        "ours": ours,
        "theirs": theirs,
        "unit": unit,
        "ratio": ours / theirs,
        "better": better,
        **extra,
    }


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
            _entry(f"{name}: wall time", ours_s, theirs_s, "s", "lower"),
            _entry(
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
            _entry(f"max_margin vs LinearSVC ({label}): time", ours_s, theirs_s, "s", "lower"),
            _entry(
                f"max_margin vs LinearSVC ({label}): error",
                max(abs(ours_err), 1e-16),
                max(abs(err), 1e-16),
                "relative primal suboptimality (floor 1e-16)",
                "lower",
            ),
        ]
    return rows, detail


def _autodiff_mean_field_flow(grad, W0, t1):
    """The finite-sample flow as `mean_field_flow` ran it before, with the autodiff field
    (lambda = 2 throughout, Tsit5, PID at rtol = 1e-4, atol = 1e-6): final W and steps."""
    m = W0.shape[0]
    sol = diffeqsolve(
        diffrax.ODETerm(lambda t, W, args: -2.0 * W - m * grad(W)),
        diffrax.Tsit5(),
        t0=0.0,
        t1=t1,
        dt0=None,
        y0=W0,
        saveat=diffrax.SaveAt(t1=True),
        stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-6),
        max_steps=100_000,
    )
    return sol.ys[-1], sol.stats["num_steps"]


def compare_multi_index(samples: int, t_sim: float, t_floor: float, base_seed: int, peak: float):
    """Population against finite-sample flow in simulated time per second, and the
    finite-sample flow against its FLOP floor: evaluations x 4 n d m (the field's two
    matmuls, X W^T and S^T X) over the measured matmul peak. Tsit5 evaluates the field six
    times per step attempt, plus once for the first stage of the first step (diffrax picks the
    first step without evaluating it); each of the two saves runs the sample loss forward
    (2 n d m). The autodiff field that the flow used before (`jax.grad` of
    `dynamics.sample_loss`) is timed per evaluation beside the written-out one."""
    d, r, m = 100, 20, 250
    batch = min(FLOW_BATCH, samples)
    target = standard_target(r, d)
    W0 = mean_field_init(m, d, key=jax.random.PRNGKey(base_seed))
    X = jax.random.normal(jax.random.PRNGKey(base_seed + 1), (samples, d))
    yv = target.predict(X)
    ts = jnp.array([0.0, t_sim])
    pop = jax.jit(lambda net: mean_field_flow(target, net, ts, weight_decay=2.0))
    fin = jax.jit(
        lambda net: mean_field_flow(
            target, net, ts, weight_decay=2.0, samples=(X, yv), batch_size=batch
        )
    )
    pop_s = best_seconds(lambda: pop(W0), repeats=2)
    fin_s = best_seconds(lambda: fin(W0), repeats=1)
    p, f = pop(W0), fin(W0)
    # the floor comparison on a longer horizon (many steps), against the same solve with
    # the autodiff field the flow had before (same solver, controller and tolerances)
    ts_floor = jnp.array([0.0, t_floor])
    longer = jax.jit(
        lambda net: mean_field_flow(
            target, net, ts_floor, weight_decay=2.0, samples=(X, yv), batch_size=batch
        )
    )
    long_s = best_seconds(lambda: longer(W0), repeats=1)
    g = longer(W0)
    steps = int(g.stats["num_steps"])
    evals = 6 * steps + 1
    per_eval = 4 * samples * d * m  # the field's two matmuls; a save's forward pass is half
    flop = evals * per_eval + 2 * per_eval // 2
    floor = flop / peak
    autodiff = jax.jit(jax.grad(lambda W: sample_loss(MeanFieldNet(W), (X, yv), batch_size=batch)))
    reference = jax.jit(lambda W: _autodiff_mean_field_flow(autodiff, W, t_floor))
    ref_s = best_seconds(lambda: reference(W0.W), repeats=1)
    W_ref, ref_steps = reference(W0.W)
    ref_floor = (6 * int(ref_steps) + 1) * per_eval / peak  # no saves there
    written = jax.jit(lambda W: sample_loss_gradient(MeanFieldNet(W), (X, yv), batch_size=batch))
    before = best_seconds(lambda: autodiff(W0.W), repeats=3)
    after = best_seconds(lambda: written(W0.W), repeats=3)
    per_eval_floor = per_eval / peak
    detail = {
        "population": {
            "seconds": pop_s,
            "steps": int(p.stats["num_steps"]),
            "loss": float(p.loss[-1]),
        },
        "finite_sample": {
            "seconds": fin_s,
            "steps": int(f.stats["num_steps"]),
            "samples": samples,
            "batch_size": batch,
            "population_loss": float(f.loss[-1]),
        },
        "floor": {
            "simulated_time": t_floor,
            "seconds": long_s,
            "steps": steps,
            "field_evaluations": evals,
            "flop": flop,
            "floor_seconds": floor,
            "over_floor": long_s / floor,
            "autodiff_seconds": ref_s,
            "autodiff_steps": int(ref_steps),
            "autodiff_floor_seconds": ref_floor,
            "autodiff_over_floor": ref_s / ref_floor,
            "max_relative_difference": float(
                jnp.max(jnp.abs(g.model.W - W_ref)) / jnp.max(jnp.abs(W_ref))
            ),
        },
        "field_evaluation": {
            "autodiff_seconds": before,
            "written_out_seconds": after,
            "floor_seconds": per_eval_floor,
            "autodiff_over_floor": before / per_eval_floor,
            "written_out_over_floor": after / per_eval_floor,
            "max_abs_difference": float(jnp.max(jnp.abs(autodiff(W0.W) - written(W0.W)))),
        },
        "simulated_time": t_sim,
    }
    return [
        _entry(
            f"multi-index: population vs finite-sample flow (n = {samples})",
            t_sim / pop_s,
            t_sim / fin_s,
            "simulated time / s",
            "higher",
        ),
        _entry(
            "finite-sample flow vs FLOP floor",
            long_s,
            floor,
            "s",
            "lower",
            note=f"the whole solve to t = {t_floor} against evaluations x 4 n d m / matmul peak",
        ),
        _entry(
            "finite-sample flow (autodiff field, before) vs FLOP floor",
            ref_s,
            ref_floor,
            "s",
            "lower",
        ),
        _entry(
            "finite-sample field evaluation: written out vs autodiff",
            after,
            before,
            "s",
            "lower",
        ),
    ], detail


def peak_flops(size: int = 2048) -> float:
    A = jax.random.normal(jax.random.PRNGKey(0), (size, size))
    f = jax.jit(lambda A: A @ A)
    return 2 * size**3 / best_seconds(lambda: f(A))


def triad_bandwidth(elements: int, iterations: int) -> float:
    """Bytes per second of the triad x <- 0.5 x + c (24 bytes per element: x and c read, x
    written) on `elements` float64 entries per device, on all local devices at once
    (`jax.pmap`, the arrays placed on their devices beforehand), repeated inside one compiled
    loop. Timed at `iterations` and at twice as many; the difference removes the call's fixed
    costs (dispatch, the copy of x on entry)."""
    devices = jax.local_devices()
    x = jax.pmap(lambda v: v, devices=devices)(jnp.ones((len(devices), elements)))

    def timed(count):
        step = jax.pmap(
            lambda x, c: jax.lax.fori_loop(0, count, lambda _, x: 0.5 * x + c, x),
            devices=devices,
        )
        return best_seconds(lambda: step(x, x))

    extra = max(timed(2 * iterations) - timed(iterations), 1e-9)
    return 24.0 * elements * iterations * len(devices) / extra


def compare_bandwidth(gd: dict, quick: bool) -> tuple[list, dict]:
    """The GD sweep's least memory traffic against the triad on its working set and on large
    arrays."""
    # the sweep's vmapped weights, split between the triad's two arrays x and c
    working = max(1, gd["batch_size"] * M_N_BYTES // 16)
    large = 2**20 if quick else 2**23  # 8 MiB / 64 MiB per array
    small_bw = triad_bandwidth(working, 200 if quick else 2000)
    large_bw = triad_bandwidth(large, 3 if quick else 10)
    achieved = gd["seed_epochs_per_s"] * gd_bench.BYTES_PER_EPOCH
    detail = {
        "working_set_elements_per_device": working,
        "triad_working_set_bytes_per_s": small_bw,
        "triad_large_bytes_per_s": large_bw,
        "large_elements_per_device": large,
        "gd_sweep_bytes_per_s": achieved,
        "gd_bytes_per_epoch": gd_bench.BYTES_PER_EPOCH,
    }
    rows = [
        _entry(
            "GD sweep vs bandwidth peak",
            achieved,
            small_bw,
            "B/s",
            "higher",
            note="least traffic of the sweep against the triad on its working set",
        ),
        _entry(
            "GD sweep vs bandwidth peak (large arrays)",
            achieved,
            large_bw,
            "B/s",
            "higher",
            note="against the triad on 64 MiB arrays (main memory)",
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
        _entry(
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
