"""Gradient descent extrapolated to step 0: the reference `two_layer_vs_gd`,
`correlated_vs_gd` and `relu_networks` hold the flows against.

GD (on (a, W) with `gd_curve`, on any model's parameters with `model_gd_curve`) at steps
eta, eta/2, eta/4 (a plain `lax.scan`, saved on one grid of rescaled
times t = k eta / tau), combined by Richardson to second order,
(8 L(eta/4) - 6 L(eta/2) + L(eta)) / 3. Its own uncertainty is, with three steps, the gap to
the first-order combination 2 L(eta/4) - L(eta/2); with a fourth (eta/8), the gap to the
extrapolant of the coarser three. Through many ReLU kinks the extrapolant converges at about
first order, not second (each crossing's Euler error has a part that depends on where it
falls inside a step and does not cancel), and the three-step uncertainty understated the
error 2-3x on deep ReLU MLPs (measured against six halvings: `integrators._stepped`); the
four-step one overstated it 1.6-3.7x. Errors are relative, where the loss is above 1e-3 of
its start (a relative error of a loss near 0 says nothing).
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

SAVE_EVERY = 0.05  # rescaled time between saved points


@functools.partial(jax.jit, static_argnums=(4, 5))
def gd_curve(X, y, model, eta, steps, every):
    """Plain GD on (a, W), the loss saved every `every` steps."""

    def loss(params):
        a, W = params
        r = a @ jax.nn.relu(W @ X.T) - y
        return 0.5 * jnp.mean(r * r)

    grad = jax.grad(loss)

    def inner(params, _):
        return jax.tree_util.tree_map(lambda p, g: p - eta * g, params, grad(params)), None

    def outer(params, _):
        params, _ = jax.lax.scan(inner, params, None, length=every)
        return params, loss(params)

    _, losses = jax.lax.scan(outer, (model.a, model.W), None, length=steps // every)
    return losses


def model_gd_curve(loss, params, static, data):
    """`curve(eta, steps, every)`: plain GD on an Equinox model's `params` (its inexact
    arrays; `static` the rest) under `loss(model, data)`, the loss saved every `every` steps."""

    def value(p):
        return loss(eqx.combine(p, static), data)

    @functools.partial(jax.jit, static_argnums=(2, 3))
    def run(p, eta, steps, every):
        def inner(p, _):
            return jax.tree_util.tree_map(lambda a, g: a - eta * g, p, jax.grad(value)(p)), None

        def outer(p, _):
            p, _ = jax.lax.scan(inner, p, None, length=every)
            return p, value(p)

        return jax.lax.scan(outer, p, None, length=steps // every)[1]

    return lambda eta, steps, every: run(params, eta, steps, every)


class Reference:
    """GD at the steps `etas` (three or four, largest first, each half the one before) on
    [0, `horizon`] of rescaled time at log(1/alpha) = `tau`: `ts` (the shared grid), `curves`
    {eta: loss}, `seconds` {eta: wall time, compilation included}, `loss` (the
    extrapolation) and `uncertainty`; `error(curve)` is a curve's relative error against it.
    `curve(eta, steps, every)` runs GD (`functools.partial(gd_curve, X, y, model)`,
    `model_gd_curve`)."""

    def __init__(self, curve, tau, horizon, etas):
        from benchmarks._common import Timer

        etas = tuple(etas)
        halved = all(b == a / 2 for a, b in zip(etas[:-1], etas[1:], strict=True))
        if len(etas) not in (3, 4) or not halved:
            raise ValueError(f"`etas` must be 3 or 4 steps, each half the one before, got {etas}")

        every0 = max(1, int(round(SAVE_EVERY * tau / etas[0])))
        chunks = int(horizon * tau / (etas[0] * every0))
        self.curves, self.seconds = {}, {}
        for eta in etas:
            every = int(round(every0 * etas[0] / eta))
            timer = Timer()
            self.curves[eta] = np.asarray(curve(eta, every * chunks, every))
            self.seconds[eta] = timer()
        self.ts = np.arange(1, chunks + 1) * every0 * etas[0] / tau
        finest = [self.curves[e] for e in sorted(etas)]  # eta/4 (or /8), eta/2, eta, ...

        def richardson(l1, l2, l4):
            return (8 * l1 - 6 * l2 + l4) / 3

        self.loss = richardson(*finest[:3])
        self._big = self.loss > 1e-3 * self.loss[0]
        coarser = richardson(*finest[1:4]) if len(etas) > 3 else 2 * finest[0] - finest[1]
        self.uncertainty = self.error(coarser)

    def _gaps(self, curve) -> np.ndarray:
        """|curve / loss - 1| where the loss is above 1e-3 of its start."""
        return np.abs(np.asarray(curve)[self._big] / self.loss[self._big] - 1.0)

    def error(self, curve) -> float:
        return float(np.max(self._gaps(curve)))

    def worst(self, curve) -> tuple[float, float]:
        """Where `error(curve)` is reached: the rescaled time, and the shift in time of the
        reference that would make that gap there (the gap over |d log L / dt|): a shift far
        below the save spacing on a steep drop is a jump timed slightly apart."""
        gaps = self._gaps(curve)
        k = int(np.argmax(gaps))
        i = int(np.flatnonzero(self._big)[k])
        slope = np.gradient(np.log(np.maximum(self.loss, 1e-300)), self.ts)[i]
        return float(self.ts[i]), float(gaps[k] / max(abs(slope), 1e-300))
