"""`two_layer_flow` on the correlated inputs of `benchmarks.beyond_orthogonal`, each seed checked
against gradient descent on the same X extrapolated to step 0.

The settings are the ones whose solves ran into a Zeno loop of kink events before the fix
(c = 1e-6 and 1e-3 at alpha = 1e-10, c = 1e-6 at 1e-30; n = 16, m from `coverage_width`).
The reference is GD at eta = 5e-3, 2.5e-3 and 1.25e-3 combined by Richardson to second order
(`benchmarks.two_layer_vs_gd`), compared where the loss is above 1e-3 of its start (the flow
interpolates, and a relative error of a loss near 0 says nothing); its own uncertainty is the
gap to the first-order combination. Prints one line per setting.

    python -m benchmarks.correlated_vs_gd [--seeds 8]
"""

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._common import enable_float64, parser
from benchmarks.beyond_orthogonal import HORIZON, loewdin, make
from benchmarks.two_layer_vs_gd import _gd_curve
from dynamics import signs_and_directions
from integrators import two_layer_flow
from theory import coverage_width, saddle_jumps

SETTINGS = ((1e-6, 10), (1e-3, 10), (1e-6, 30))  # (c, log10(1/alpha))
ETAS = (0.005, 0.0025, 0.00125)


def check(c, p, seed, n=16):
    X, y, model = make(jax.random.fold_in(jax.random.PRNGKey(0), seed), "correlated", n, n + 1,
                       c, p, coverage_width(n))  # fmt: skip
    tau = float(p * np.log(10.0))
    signs, directions = signs_and_directions(model, loewdin(X))
    horizon = float(saddle_jumps(y, signs, directions, time_scale=tau).horizon(HORIZON))
    every0 = int(round(0.05 * tau / ETAS[0]))
    chunks = int(horizon * tau / (ETAS[0] * every0))
    curves = []
    for eta in ETAS:
        every = int(round(every0 * ETAS[0] / eta))
        curves.append(np.asarray(_gd_curve(X, y, model, eta, every * chunks, every)))
    l4, l2, l1 = curves
    reference = (8 * l1 - 6 * l2 + l4) / 3
    ts = np.arange(1, chunks + 1) * every0 * ETAS[0] / tau
    grid = jnp.concatenate([jnp.zeros(1), jnp.asarray(ts)])
    sol = two_layer_flow(model, X, y, grid, time_scale=tau)
    big = reference > 1e-3 * reference[0]

    def rel(curve):
        return float(np.max(np.abs(curve[big] / reference[big] - 1.0)))

    return bool(sol.ok), rel(np.asarray(sol.loss[1:])), rel(2 * l1 - l2)


def main(argv=None) -> None:
    args = parser("correlated_vs_gd", __doc__.splitlines()[0], default_seeds=8).parse_args(argv)
    enable_float64()
    for c, p in SETTINGS:
        out = [check(c, p, s) for s in range(args.seeds)]
        oks, errs, uncs = zip(*out, strict=True)
        print(
            f"c = {c:g}, alpha = 1e-{p}: ok {sum(oks)}/{len(oks)}; flow vs GD extrapolated: "
            f"median {np.median(errs):.1e}, max {max(errs):.1e}; the reference's own "
            f"uncertainty: median {np.median(uncs):.1e}, max {max(uncs):.1e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
