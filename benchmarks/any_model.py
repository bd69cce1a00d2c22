"""`gradient_flow` on models beyond the papers, against independent references.

Three cases, each beside plain diffrax (`diffrax.diffeqsolve` with Tsit5 on the raveled
gradient, as a user would write it: no kink handling, no small-init check) and plain gradient
descent:

- `diagonal`: a diagonal linear network beta = u * u - v * v on a sparse regression (n = 20,
  d = 40, three nonzero coefficients), u = v = alpha at alpha = 1e-10 and 1e-30, in rescaled
  time (tau = log(1/alpha)). Reference: the flow in log coordinates u = alpha e^p (scipy
  Radau, 1e-12). Methods: the default call (refused: `below_tolerance`), `units=` (one unit
  per entry), plain diffrax, GD (lr 0.01 in ordinary time). Jumps by `loss_plateaus`.
- `deep_relu`: a two-hidden-layer ReLU `eqx.nn.MLP` (width 16, weights scaled by 1e-3,
  biases as initialized) learning a ReLU teacher on 200 Gaussian samples, to t = 1200.
  Reference: GD extrapolated to step 0 (Richardson from lr 0.01 and 0.005). Methods: the
  default call (kinks held, sliding entries slid on), `hold_kinks=False`.
- `shallow_relu`: a one-hidden-layer bias-free ReLU `eqx.nn.MLP` (width 8) learning a
  width-3 ReLU teacher on 100 Gaussian samples from init scaled by alpha = 1e-10 and 1e-30,
  in rescaled time (tau = log(1/alpha)) with `units=neuron_units(model)` and
  `max_sliding=32`: where GD cannot go; the two alphas' plateaus and jumps side by side.
  (The deep net above is not rescaled so: with three layers at scale alpha the first escape
  takes a time of order 1/alpha, not log(1/alpha).)
- `tanh`: a tanh MLP (3-16-16-1, 64 samples) to t = 5 against scipy's DOP853 at 1e-12.

`results.json` has `rows` with `case`, `alpha`, `method`, `ok`, `result`, `steps`,
`wall_seconds` (one solve after a compiling warm-up), `max_rel_error` (max over the save times
reached of |L / L_ref - 1|), and `stop_time`; `curves.png` shows the loss curves.
"""

from functools import partial

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from scipy.integrate import solve_ivp

from dynamics import DiagonalNet, diagonal_units
from dynamics.unchecked import diagonal_loss
from integrators import gradient_flow, neuron_units
from theory import loss_plateaus
from theory.numerics import diffeqsolve

from ._common import (
    Timer,
    enable_float64,
    environment,
    host_devices,
    log,
    parser,
    pyplot,
    save_figure,
    write_results,
)


def mse(model, data):
    X, y = data
    return 0.5 * jnp.mean((jax.vmap(model)(X)[:, 0] - y) ** 2)


def diagonal_reference(X, y, alpha, ts):
    """The diagonal flow in log coordinates (u = alpha e^p, v = alpha e^q), scipy Radau."""
    X, y = np.asarray(X), np.asarray(y)
    n, d = X.shape
    tau, la = np.log(1 / alpha), np.log(alpha)
    H = X.T @ X / n

    def beta(z):
        return np.exp(2 * (la + z[:d])) - np.exp(2 * (la + z[d:]))

    def field(t, z):
        g = X.T @ (X @ beta(z) - y) / n
        return np.concatenate([-2 * tau * g, 2 * tau * g])

    def jac(t, z):
        jp = np.concatenate(
            [H * 2 * np.exp(2 * (la + z[:d])), -H * 2 * np.exp(2 * (la + z[d:]))], 1
        )
        return np.concatenate([-2 * tau * jp, 2 * tau * jp])

    # Radau's rejected trial steps may overflow exp (it shrinks the step); a failed solve raises
    with np.errstate(over="ignore", invalid="ignore"):
        sol = solve_ivp(
            field, (0, ts[-1]), np.zeros(2 * d), "Radau", ts, rtol=1e-12, atol=1e-12, jac=jac
        )
    if not sol.success:
        raise RuntimeError(f"diagonal_reference: Radau failed: {sol.message}")
    return np.array([0.5 * np.mean((X @ beta(z) - y) ** 2) for z in sol.y.T])


def plain_diffrax(model, loss, ts, data, tau):
    """The flow as a user would write it with diffrax alone: Tsit5 on the raveled gradient."""
    params, static = eqx.partition(model, eqx.is_inexact_array)
    flat, unravel = ravel_pytree(params)

    def value(x):
        return loss(eqx.combine(unravel(x), static), data)

    @jax.jit
    def solve(flat):
        sol = diffeqsolve(
            diffrax.ODETerm(lambda t, x, a: -tau * jax.grad(value)(x)),
            diffrax.Tsit5(),
            ts[0],
            ts[-1],
            None,
            flat,
            saveat=diffrax.SaveAt(ts=ts, fn=lambda t, x, a: value(x)),
            stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8),
            max_steps=200_000,
            throw=False,
        )
        return sol.ys, sol.stats["num_steps"], sol.result == diffrax.RESULTS.successful

    return lambda: solve(flat)


def gd_curve(model, loss, ts, data, tau, lr):
    """Plain gradient descent at learning rate `lr` in ordinary time, read at tau * ts."""
    params, static = eqx.partition(model, eqx.is_inexact_array)
    flat, unravel = ravel_pytree(params)
    marks = np.rint(np.asarray(ts) * tau / lr).astype(int)

    def value(x):
        return loss(eqx.combine(unravel(x), static), data)

    @jax.jit
    def run(flat):
        def body(x, _):
            return x - lr * jax.grad(value)(x), value(x)

        _, losses = jax.lax.scan(body, flat, None, length=int(marks[-1]) + 1)
        return losses[marks]

    return lambda: run(flat)


def timed(fn):
    """(output, wall seconds of one run after a warm-up that compiles)."""
    jax.block_until_ready(fn())
    t = Timer()
    out = jax.block_until_ready(fn())
    return out, t()


def row(case, alpha, method, loss, ref, ok, steps, seconds, result="", stop=np.inf):
    loss, ref = np.asarray(loss, float), np.asarray(ref, float)
    reached = np.isfinite(loss) & np.isfinite(ref)
    error = np.max(np.abs(loss[reached] / ref[reached] - 1)) if reached.any() else np.nan
    log(
        f"{case:>9} alpha={alpha:<8.0e} {method:>12}: ok={bool(ok)!s:5} steps={int(steps):>7} "
        f"{seconds:8.3f} s  max rel error {error:.2e}  {result}"
    )
    return {
        "case": case,
        "alpha": alpha,
        "method": method,
        "ok": bool(ok),
        "result": result,
        "steps": int(steps),
        "wall_seconds": seconds,
        "max_rel_error": float(error),
        "stop_time": float(stop),
        "loss": loss,
    }


def flow_row(case, alpha, method, ref, **kwargs):
    sol, seconds = timed(lambda: gradient_flow(**kwargs))
    name = "" if sol.ok else str(sol.result).split("<")[-1][:60]
    stop = float(sol.stats.get("kink_time", np.inf))
    if "sliding_entries" in sol.stats:
        log(f"  {int(sol.stats['sliding_entries'])} sliding entries")
    return row(
        case, alpha, method, sol.loss, ref, sol.ok, sol.stats["num_steps"], seconds, name, stop
    )


def diagonal_case(alpha, key):
    k1, _ = jax.random.split(key)
    X = jax.random.normal(k1, (20, 40), jnp.float64)
    y = X @ jnp.zeros(40).at[:3].set(jnp.array([1.0, -2.0, 0.5]))
    ts = np.linspace(0.0, 3.0, 301)
    tau = float(np.log(1 / alpha))
    model = DiagonalNet(jnp.full(40, alpha), jnp.full(40, alpha))
    ref = diagonal_reference(X, y, alpha, ts)
    common = dict(model=model, loss=diagonal_loss, ts=jnp.asarray(ts), args=(X, y), time_scale=tau)
    units = diagonal_units(model)
    rows = [
        flow_row("diagonal", alpha, "default", ref, **common),
        flow_row("diagonal", alpha, "units", ref, units=units, **common),
    ]
    (loss, steps, ok), seconds = timed(
        plain_diffrax(model, diagonal_loss, jnp.asarray(ts), (X, y), tau)
    )
    rows.append(row("diagonal", alpha, "diffrax", loss, ref, ok, steps, seconds))
    loss, seconds = timed(gd_curve(model, diagonal_loss, ts, (X, y), tau, 0.01))
    rows.append(row("diagonal", alpha, "gd", loss, ref, True, round(ts[-1] * tau / 0.01), seconds))
    jumps = loss_plateaus(ts, ref)["times"]
    found = loss_plateaus(ts, np.asarray(rows[1]["loss"]))["times"]
    log(f"  jumps: reference {np.round(jumps, 4).tolist()}, units {np.round(found, 4).tolist()}")
    return rows, ts, ref, {"reference_jumps": jumps, "units_jumps": found}


def deep_relu_case(key, horizon):
    k = jax.random.split(key, 3)
    teacher = eqx.nn.MLP(4, 1, 4, 1, activation=jax.nn.relu, key=k[0])
    X = jax.random.normal(k[1], (200, 4), jnp.float64)
    cast = lambda m: jax.tree_util.tree_map(  # noqa: E731
        lambda x: x.astype(jnp.float64) if eqx.is_inexact_array(x) else x, m
    )
    y = jax.vmap(cast(teacher))(X)[:, 0]
    student = cast(eqx.nn.MLP(4, 1, 16, 2, activation=jax.nn.relu, key=k[2]))
    student = eqx.tree_at(
        lambda m: [lay.weight for lay in m.layers], student, replace_fn=lambda w: 1e-3 * w
    )
    ts = np.linspace(0.0, horizon, 241)
    coarse, _ = timed(gd_curve(student, mse, ts, (X, y), 1.0, 0.01))
    fine, gd_seconds = timed(gd_curve(student, mse, ts, (X, y), 1.0, 0.005))
    ref = 2 * np.asarray(fine) - np.asarray(coarse)  # GD extrapolated to step 0
    common = dict(model=student, loss=mse, ts=jnp.asarray(ts), args=(X, y), max_steps=200_000)
    rows = [
        flow_row("deep_relu", 1.0, "default", ref, **common),
        flow_row("deep_relu", 1.0, "no_hold", ref, hold_kinks=False, **common),
        row("deep_relu", 1.0, "gd", fine, ref, True, round(horizon / 0.005), gd_seconds),
    ]
    return rows, ts, ref


def shallow_relu_case(key, horizon):
    k = jax.random.split(key, 3)
    cast = lambda m: jax.tree_util.tree_map(  # noqa: E731
        lambda x: x.astype(jnp.float64) if eqx.is_inexact_array(x) else x, m
    )
    relu_mlp = dict(activation=jax.nn.relu, use_bias=False, use_final_bias=False)
    teacher = cast(eqx.nn.MLP(4, 1, 3, 1, key=k[0], **relu_mlp))
    X = jax.random.normal(k[1], (100, 4), jnp.float64)
    y = jax.vmap(teacher)(X)[:, 0]
    base = cast(eqx.nn.MLP(4, 1, 8, 1, key=k[2], **relu_mlp))
    ts = np.linspace(0.0, horizon, 301)
    rows, jumps = [], {}
    for alpha in (1e-10, 1e-30):
        student = eqx.tree_at(
            lambda m: [lay.weight for lay in m.layers],
            base,
            replace_fn=partial(jnp.multiply, alpha),
        )
        ref = np.full(ts.shape, np.nan)  # no reference: gradient descent cannot go there
        rows.append(
            flow_row(
                "shallow_relu",
                alpha,
                "units",
                ref,
                model=student,
                loss=mse,
                ts=jnp.asarray(ts),
                args=(X, y),
                time_scale=float(np.log(1 / alpha)),
                units=neuron_units(student),
                max_sliding=32,
            )
        )
        loss = np.asarray(rows[-1]["loss"])
        if not np.all(np.isfinite(loss)):  # a solve that stopped early: no curve to read
            jumps[f"{alpha:.0e}"] = {"times": [], "levels": []}
            log(f"  not ok ({rows[-1]['result']}): no plateaus read")
            continue
        found = loss_plateaus(ts, loss)
        jumps[f"{alpha:.0e}"] = {"times": found["times"], "levels": found["levels"]}
        log(
            f"  jumps {np.round(found['times'], 4).tolist()}, levels "
            f"{np.round(found['levels'], 5).tolist()}"
        )
    return rows, ts, jumps


def tanh_case(key):
    k = jax.random.split(key, 2)
    mlp = eqx.nn.MLP(3, 1, 16, 2, activation=jnp.tanh, key=k[0])
    mlp = jax.tree_util.tree_map(lambda x: x.astype(jnp.float64) if eqx.is_array(x) else x, mlp)
    X = jax.random.normal(k[1], (64, 3), jnp.float64)
    y = jnp.sin(X[:, 0]) * X[:, 1]
    ts = np.linspace(0.0, 5.0, 51)
    params, static = eqx.partition(mlp, eqx.is_inexact_array)
    flat, unravel = ravel_pytree(params)
    grad = jax.jit(jax.grad(lambda x: mse(eqx.combine(unravel(x), static), (X, y))))
    value = jax.jit(lambda x: mse(eqx.combine(unravel(x), static), (X, y)))
    sol = solve_ivp(
        lambda t, x: -np.asarray(grad(jnp.asarray(x))),
        (0, 5.0),
        np.asarray(flat),
        "DOP853",
        ts,
        rtol=1e-12,
        atol=1e-12,
    )
    ref = np.array([float(value(jnp.asarray(x))) for x in sol.y.T])
    rows = [
        flow_row("tanh", 1.0, "default", ref, model=mlp, loss=mse, ts=jnp.asarray(ts), args=(X, y))
    ]
    (loss, steps, ok), seconds = timed(plain_diffrax(mlp, mse, jnp.asarray(ts), (X, y), 1.0))
    rows.append(row("tanh", 1.0, "diffrax", loss, ref, ok, steps, seconds))
    loss, seconds = timed(gd_curve(mlp, mse, ts, (X, y), 1.0, 0.01))
    rows.append(row("tanh", 1.0, "gd", loss, ref, True, 500, seconds))
    return rows, ts, ref


def main(argv=None):
    host_devices()
    p = parser("any_model", __doc__.splitlines()[0], default_seeds=1)
    args = p.parse_args(argv)
    enable_float64()
    key = jax.random.PRNGKey(args.seed)
    horizon = 600.0 if args.quick else 1200.0
    plt = pyplot()
    fig, axes = plt.subplots(1, 5, figsize=(22, 4))
    rows, extra = [], {}
    for ax, alpha in zip(axes[:2], (1e-10, 1e-30), strict=True):
        found, ts, ref, jumps = diagonal_case(alpha, key)
        rows += found
        extra[f"diagonal_{alpha:.0e}"] = jumps
        _plot(ax, ts, ref, found, f"diagonal net, alpha = {alpha:.0e} (rescaled time)")
    found, ts, jumps = shallow_relu_case(key, 30.0)
    rows += found
    extra["shallow_relu"] = jumps
    _plot(axes[3], ts, None, found, "shallow ReLU net, small init (rescaled time)")
    for ax, (found, ts, ref), title in (
        (axes[2], deep_relu_case(key, horizon), "deep ReLU teacher-student"),
        (axes[4], tanh_case(key), "tanh MLP"),
    ):
        rows += found
        _plot(ax, ts, ref, found, title)
    args.out.mkdir(parents=True, exist_ok=True)
    save_figure(fig, args.out / "curves.png")
    path = write_results(
        args.out,
        {
            "config": {"seed": args.seed, "quick": args.quick, "horizon": horizon},
            "rows": [{k: v for k, v in r.items() if k != "loss"} for r in rows],
            "jumps": extra,
            "environment": environment(),
        },
    )
    print(table({"rows": rows}))
    log(f"wrote {path}")
    return rows


def table(results: dict) -> str:
    """One row per (case, alpha, method): ok, steps, wall seconds, max relative loss error
    against the case's reference."""
    lines = [
        "| case | alpha | method | ok | steps | seconds | max rel err |",
        "|---|---|---|---|---|---|---|",
    ]

    def num(v, spec):
        return "-" if v is None or v != v else format(v, spec)  # no reference: None or nan

    for r in results["rows"]:
        lines.append(
            f"| {r['case']} | {num(r['alpha'], '.0e')} | {r['method']} | {r['ok']} | "
            f"{r['steps']} | {num(r['wall_seconds'], '.3f')} | {num(r['max_rel_error'], '.2e')} |"
        )
    return "\n".join(lines)


def _plot(ax, ts, ref, rows, title):
    if ref is not None:
        ax.semilogy(ts, ref, "k-", lw=3, alpha=0.3, label="reference")
    for r in rows:
        label = f"{r['method']}, alpha {r['alpha']:.0e}" if ref is None else r["method"]
        ax.semilogy(ts, r["loss"], "--", label=f"{label} ({'ok' if r['ok'] else 'not ok'})")
    ax.set_title(title)
    ax.set_xlabel("t")
    ax.legend(fontsize=7)


if __name__ == "__main__":
    main()
