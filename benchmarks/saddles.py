"""From the end of a flow to a certified critical point: `critical_point` against scipy.

MLPGradientFlow.jl's protocol: a tanh student MLP against a tanh teacher MLP on N Gaussian
inputs (square loss; N = 10^4, and 10^3 for the largest net), integrated by `gradient_flow`
from a standard init to time T, then polished to ||grad L||_2 < 1e-10. Networks of 33, 601
and 5,569 parameters (one hidden layer of 4 on 6 inputs, one of 50 on 10, two of 64 on 20)
against teachers of width 8, 8, and 8 x 8. The smallest student cannot fit its teacher (an
isolated minimum of nonzero loss); the two larger ones can (their minima form manifolds of
zero loss, with a near-null Hessian cluster that no Krylov method resolves quickly, so that
their Morse indices may be lower bounds, marked "+"). Each polish starts
from the same point, with the same loss, gradient and Hessian-vector product (all
jit-compiled and warmed up first, so that no time below is compilation):

- `critical_point(kind="minimum")`: trust-region Newton-CG on HVPs (ours);
- `critical_point(kind="any")`: trust-region Newton with MINRES on grad L (ours, attracted to
  saddles too; it is not built for far-from-critical starts and may run out of steps);
- scipy's `trust-krylov` (HVPs, the nearly exact trust-region subproblem) and `BFGS`
  (gradients only, a dense P x P inverse Hessian; `norm=2`), each stopped after 120 s.

Every end point is then classified by the same `hessian_spectrum` (dense up to 1,024
parameters, else the 8 smallest and largest eigenpairs by Lanczos), timed apart. A last
section times, at the largest case's flow end, the dense `hessian_spectrum` against
`jax.hessian` + numpy's `eigvalsh`, and Lanczos (k = 5) against that dense spectrum.

Writes `results.json` (`rows`: `params`, `method`, `seconds`, `grad_norm`, `morse_index`,
`ok`, with the loss and the counts) to `--out`, and `polish.png` (seconds and ||grad|| per
method and size).

    python -m benchmarks.saddles [--quick]
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
from jax.flatten_util import ravel_pytree

from benchmarks._common import Timer, enable_float64, log, parser, pyplot, save_figure
from benchmarks._driver import finish, header
from integrators import critical_point, gradient_flow, hessian_spectrum
from theory import result_names

# (inputs d, student width, student depth, teacher width, flow time T, samples N)
CASES = (
    (6, 4, 1, 8, 200.0, 10_000),
    (10, 50, 1, 8, 200.0, 10_000),
    (20, 64, 2, 8, 100.0, 1_000),  # 10^4 samples: about 10 x slower per HVP
)
TOL = 1e-10
SCIPY_MAXITER = 20_000
SCIPY_SECONDS = 120.0  # a scipy run still short of TOL is stopped here (and reported so)


def _f64(model):
    return jax.tree_util.tree_map(
        lambda x: x.astype(jnp.float64) if eqx.is_inexact_array(x) else x, model
    )


def loss(model, data):
    """1/2 mean (f(x) - y)^2."""
    X, y = data
    return 0.5 * jnp.mean((jax.vmap(model)(X)[:, 0] - y) ** 2)


def problem(d, width, depth, teacher_width, samples, seed):
    k = jax.random.split(jax.random.PRNGKey(seed), 4)
    X = jax.random.normal(k[0], (samples, d), jnp.float64)
    teacher = _f64(eqx.nn.MLP(d, 1, teacher_width, depth, activation=jnp.tanh, key=k[1]))
    y = jax.vmap(teacher)(X)[:, 0]
    student = _f64(eqx.nn.MLP(d, 1, width, depth, activation=jnp.tanh, key=k[2]))
    return student, (X, y)


def _scipy(method, x0, f, g, hvp):
    fun = jax.jit(f)
    jac = jax.jit(g)
    hessp = jax.jit(hvp)
    for fn in (fun, jac):  # compile
        jax.block_until_ready(fn(x0))
    jax.block_until_ready(hessp(x0, x0))
    kw = dict(
        fun=lambda x: float(fun(x)),
        x0=np.asarray(x0),
        jac=lambda x: np.asarray(jac(x)),
        method=method,
    )
    if method == "trust-krylov":
        kw["hessp"] = lambda x, p: np.asarray(hessp(x, p))
        kw["options"] = dict(gtol=TOL, maxiter=SCIPY_MAXITER)
    else:
        kw["options"] = dict(gtol=TOL, maxiter=SCIPY_MAXITER, norm=2)
    timer = Timer()

    def budget(intermediate_result):
        if timer() > SCIPY_SECONDS:
            raise StopIteration

    res = scipy.optimize.minimize(**kw, callback=budget)
    seconds = timer()
    counts = {"steps": int(res.nit), "gradients": int(res.njev)}
    if method == "trust-krylov":
        counts["hvps"] = int(res.nhev)
    return jnp.asarray(res.x), seconds, counts, str(res.message)


def case(d, width, depth, teacher_width, T, samples, seed, methods):  # noqa: PLR0913
    student, data = problem(d, width, depth, teacher_width, samples, seed)
    timer = Timer()
    flow = gradient_flow(student, loss, jnp.array([0.0, T]), args=data)
    jax.block_until_ready(flow.model)
    flow_seconds = timer()
    start = flow.model
    params, static = eqx.partition(start, eqx.is_inexact_array)
    x0, unravel = ravel_pytree(params)
    P = int(x0.size)

    def f(x):
        return loss(eqx.combine(unravel(x), static), data)

    g = jax.grad(f)

    def hvp(x, v):
        return jax.jvp(g, (x,), (v,))[1]

    g0 = float(jnp.linalg.norm(g(x0)))
    log(f"saddles: P = {P}, flow to T = {T} in {flow_seconds:.1f} s, ||grad|| = {g0:.2e}")
    k = None if P <= 1024 else 8
    rows = []
    for method in methods:
        if method.startswith("critical_point"):
            kind = method.split("=")[1].strip(")\"'")
            jax.block_until_ready(critical_point(start, loss, args=data, kind=kind).loss)  # compile
            timer = Timer()
            cp = critical_point(start, loss, args=data, kind=kind)
            jax.block_until_ready(cp.loss)
            seconds = timer()
            x = ravel_pytree(eqx.filter(cp.model, eqx.is_inexact_array))[0]
            # the counts (the stats also hold the iterate's norms, NaN midway where the
            # polish ended before its budget's half)
            counts = {key: int(v) for key, v in cp.stats.items() if key.startswith("num_")}
            message = result_names(cp.result)
        else:
            x, seconds, counts, message = _scipy(method, x0, f, g, hvp)
        model = eqx.combine(unravel(x), static)
        grad = g(x)
        timer = Timer()
        spec = hessian_spectrum(model, loss, args=data, k=k)
        jax.block_until_ready(spec.eigenvalues)
        gn = float(jnp.linalg.norm(grad))
        rows.append(
            {
                "params": P, "method": method, "seconds": seconds, "grad_norm": gn,
                "grad_max": float(jnp.max(jnp.abs(grad))), "loss": float(f(x)),
                "morse_index": int(spec.morse_index), "morse_exact": bool(spec.morse_exact),
                "ok": bool(gn < TOL), "counts": counts, "stop": message,
                "spectrum_seconds": timer(), "smallest_eigenvalue": float(spec.eigenvalues[0]),
                "flow_time": T, "flow_seconds": flow_seconds, "start_grad_norm": g0,
                "start_loss": float(f(x0)), "samples": samples,
            }
        )  # fmt: skip
        r = rows[-1]
        log(
            f"  {method:32s} {seconds:7.1f} s  ||grad|| {gn:.1e}  loss {r['loss']:.6e}  "
            f"Morse {r['morse_index']}{'' if r['morse_exact'] else '+'}  {counts}"
        )
    return rows


def spectra(d, width, depth, teacher_width, T, samples, seed) -> dict:  # noqa: PLR0913
    """At the flow's end: `hessian_spectrum` dense against `jax.hessian` + numpy's `eigvalsh`
    (each timed after a compiling call), and Lanczos (k = 5) against the dense spectrum."""
    student, data = problem(d, width, depth, teacher_width, samples, seed)
    start = gradient_flow(student, loss, jnp.array([0.0, T]), args=data).model
    params, static = eqx.partition(start, eqx.is_inexact_array)
    x0, unravel = ravel_pytree(params)
    hess = jax.jit(jax.hessian(lambda x: loss(eqx.combine(unravel(x), static), data)))
    jax.block_until_ready(hess(x0))
    timer = Timer()
    reference = np.linalg.eigvalsh(np.asarray(hess(x0)))
    numpy_seconds = timer()
    jax.block_until_ready(hessian_spectrum(start, loss, args=data).eigenvalues)
    timer = Timer()
    dense = hessian_spectrum(start, loss, args=data)
    jax.block_until_ready(dense.eigenvalues)
    dense_seconds = timer()
    timer = Timer()
    lanczos = hessian_spectrum(start, loss, args=data, k=5, steps=min(60, int(x0.size)))
    jax.block_until_ready(lanczos.eigenvalues)
    lanczos_first = timer()
    timer = Timer()
    lanczos = hessian_spectrum(start, loss, args=data, k=5, steps=min(60, int(x0.size)))
    jax.block_until_ready(lanczos.eigenvalues)
    lanczos_seconds = timer()
    want = np.r_[reference[:5], reference[-5:]]
    scale = np.abs(reference).max()
    out = {
        "params": int(x0.size), "samples": samples,
        "jax_hessian_plus_numpy_eigvalsh_seconds": numpy_seconds,
        "dense_seconds": dense_seconds,
        "dense_max_abs_error": float(np.max(np.abs(np.asarray(dense.eigenvalues) - reference))),
        "lanczos_seconds": lanczos_seconds, "lanczos_seconds_with_compile": lanczos_first,
        "lanczos_ok": bool(lanczos.ok), "lanczos_hvps": int(lanczos.stats["num_hvps"]),
        "lanczos_restarts": int(lanczos.stats["num_restarts"]),
        "lanczos_max_error_over_norm": float(
            np.max(np.abs(np.asarray(lanczos.eigenvalues) - want)) / scale
        ),
        "lanczos_max_error_over_value": float(
            np.max(np.abs(np.asarray(lanczos.eigenvalues) - want) / np.abs(want))
        ),
        "lanczos_max_residual_over_norm": float(np.max(lanczos.residuals) / scale),
        "morse_index_dense": int(dense.morse_index),
        "morse_index_lanczos": int(lanczos.morse_index),
        "morse_exact_lanczos": bool(lanczos.morse_exact),
    }  # fmt: skip
    log(f"spectra at P = {out['params']}: " + ", ".join(f"{k} {v}" for k, v in out.items()))
    return out


METHODS = (
    'critical_point(kind="minimum")',
    'critical_point(kind="any")',
    "trust-krylov",
    "BFGS",
)


def run_benchmark(cases=CASES, seed=0, methods=METHODS, with_spectra=True) -> dict:
    enable_float64()
    timer = Timer()
    rows = []
    for c in cases:
        rows += case(*c, seed, methods)
    extra = {"spectra": spectra(*cases[-1], seed)} if with_spectra else {}
    config = {
        "cases": [list(c) for c in cases],
        "case_fields": [
            "inputs d", "student width", "depth", "teacher width", "flow time T", "samples",
        ],
        "tol": TOL, "activation": "tanh (student and teacher)",
        "loss": "1/2 mean (f(x) - y)^2, x ~ N(0, I_d)", "scipy_maxiter": SCIPY_MAXITER,
        "scipy_seconds": SCIPY_SECONDS,
        "flow": "integrators.gradient_flow (default solver) from eqx.nn.MLP's init",
    }  # fmt: skip
    return {**header("saddles", config, seed), "rows": rows, **extra, "wall_seconds": timer()}


def table(results: dict) -> str:
    lines = [
        "| P | method | seconds | ‖grad‖ | loss | Morse index | ok | steps / HVPs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        c = r["counts"]
        work = f"{c.get('num_steps', c.get('steps'))} / {c.get('num_hvps', c.get('hvps', '-'))}"
        lines.append(
            f"| {r['params']:,} | {r['method']} | {r['seconds']:.1f} | {r['grad_norm']:.1e} | "
            f"{r['loss']:.6e} | {r['morse_index']}{'' if r['morse_exact'] else '+'} | "
            f"{r['ok']} | {work} |"
        )
    if "spectra" in results:
        sp = results["spectra"]
        lines += [
            "",
            f"Spectrum at P = {sp['params']:,}: dense {sp['dense_seconds']:.1f} s against "
            f"jax.hessian + numpy eigvalsh {sp['jax_hessian_plus_numpy_eigvalsh_seconds']:.1f} s; "
            f"Lanczos k = 5 {sp['lanczos_seconds']:.1f} s ({sp['lanczos_hvps']} HVPs), "
            f"max error {sp['lanczos_max_error_over_norm']:.1e} x ||H|| "
            f"({sp['lanczos_max_error_over_value']:.1e} relative to each value)",
        ]
    return "\n".join(lines)


def plot(results: dict, path) -> None:
    plt = pyplot()
    rows = results["rows"]
    methods = list(dict.fromkeys(r["method"] for r in rows))
    sizes = sorted({r["params"] for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, m in enumerate(methods):
        mine = {r["params"]: r for r in rows if r["method"] == m}
        xs = [s for s in sizes if s in mine]
        axes[0].loglog(xs, [mine[s]["seconds"] for s in xs], "o-", color=f"C{i}", label=m)
        axes[1].loglog(xs, [mine[s]["grad_norm"] for s in xs], "o-", color=f"C{i}", label=m)
    axes[1].axhline(TOL, color="k", lw=0.8, ls=":")
    axes[0].set_ylabel("seconds to ||grad|| < 1e-10 (or stop)")
    axes[1].set_ylabel("final ||grad L||_2")
    for ax in axes:
        ax.set_xlabel("parameters P")
    axes[0].legend(fontsize=7)
    save_figure(fig, path)


def main(argv=None) -> dict:
    p = parser("saddles", __doc__.splitlines()[0], default_seeds=1)
    p.add_argument("--no-spectra", action="store_true", help="skip the spectrum timings")
    args = p.parse_args(argv)
    kw = {}
    if args.quick:
        kw = dict(cases=((6, 4, 1, 8, 200.0, 1000),))
    results = run_benchmark(seed=args.seed, with_spectra=not args.no_spectra, **kw)
    finish(args.out, results, table(results), {"polish.png": plot})
    return results


if __name__ == "__main__":
    main()
