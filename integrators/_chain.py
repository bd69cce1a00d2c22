"""The saddle chain of a trajectory: every plateau of a flow, polished to the critical point it
lingers at, with its certified Morse index, its unstable directions and the angle at which the
flow leaves it.

A plateau (`theory.loss_plateaus`: the stretches between the loss curve's jumps) is read at
its flattest save time (the least log-loss decay rate there). From the model saved there,
`critical_point(kind="any")` (Newton on grad L = 0, attracted to saddles) finds the critical
point; its index is certified (`critical_point`'s `certify`), and its unstable directions are
the eigenvectors of its negative eigenvalues (dense, P <= 1024). The flow's escape is its
displacement from the plateau's save time to the start of the next jump; its angle to the
unstable subspace U is arccos(||P_U d|| / ||d||): near 0 where the flow leaves along the
saddle's unstable directions, as the saddle-to-saddle picture says it does.

**ReLU kinks.** A two-layer ReLU net's plateau (`dynamics.TwoLayerReLU`) is a nonsmooth
critical point: pre-activations rest on their kink (held there by the flow, or frozen below
it), where the gradient of one side does not vanish. Newton's step on the smooth loss crosses
them and lands at another critical point: on orthonormal data it fitted a sample Algorithm 1
leaves unfitted, 0.025 from the predicted saddle at every alpha from 1e-4 to 1e-64, where the
flow's own plateau state came within 7e-7 (alpha = 1e-8) to 5e-13 (1e-64). Such a model is
polished on its plateau's piece: h(x) = sum_j a_j g_j(x) (w_j . x), with the gates g_j(x) =
1[w0_j . x > 1e-7 ||w0_j|| ||x||] of the plateau's weights w0 fixed, a smooth loss whose critical
points are the nonsmooth loss's own wherever the pattern holds (checked where the ReLU is
continuous: the two losses must agree at the polished point to 1e-12 of the flow's initial
loss, and the true loss's gradient in the second layer must vanish with the piece's; else
the row is not ok and `result` says `left_piece`).
"""

import equinox as eqx
import jax
import numpy as np
from jax.flatten_util import ravel_pytree

from dynamics import TwoLayerReLU
from theory import loss_plateaus, result_names

from ._critical import critical_point
from ._spectrum import DENSE_MAX, _check_model_and_loss, hessian_spectrum


def _flattest(ts, loss, lo, hi):
    """The save index in [lo, hi] where the log-loss decays slowest (a loss at 0, or a
    rounding below it, read at 1e-300 of its largest)."""
    loss = np.maximum(loss, 1e-300 * np.max(loss))
    rate = -np.diff(np.log(loss)) / np.maximum(np.diff(ts), 1e-300)
    lo, hi = int(lo), int(max(hi, lo + 1))
    window = rate[lo:hi]
    return lo + int(np.argmin(np.abs(window))) if window.size else lo


KINK_TOL = 1e-7  # a pre-activation within this of its kink, relative to ||w0_j|| ||x||, is on it


class _Fixed:
    """A value carried as a static field (hashed by identity, never traced or trained)."""

    def __init__(self, value):
        self.value = value


class _OnPiece(TwoLayerReLU):
    """A two-layer ReLU net on a fixed activation piece: h(x) = sum_j a_j g_j(x) (w_j . x),
    g_j(x) = 1[w0_j . x > KINK_TOL ||w0_j|| ||x||] (module docstring). A `TwoLayerReLU`, so
    that losses that check for one (`dynamics.square_loss`) take it."""

    W0: _Fixed = eqx.field(static=True)

    def __init__(self, a, W, W0: _Fixed):
        super().__init__(a, W)
        self.W0 = W0

    def _gates(self, X):
        W0 = self.W0.value
        pre = X @ W0.T
        size = jax.numpy.linalg.norm(W0, axis=1) * jax.numpy.linalg.norm(X, axis=-1)[..., None]
        return (pre > KINK_TOL * size).astype(self.a.dtype)

    def __call__(self, x):
        return jax.numpy.dot(self.a, self._gates(x) * (self.W @ x))

    def predict(self, X):
        return (self._gates(X) * (X @ self.W.T)) @ self.a


def _polish(model, loss, args, tol, max_steps, scale):
    """critical_point(kind="any") from `model`; a TwoLayerReLU on its piece (module
    docstring): (the critical point, as the caller's model type, its unstable-direction
    spectrum's model, and whether it stayed on its piece).

    Staying is checked where the ReLU is continuous: the true loss must equal the piece's
    (to 1e-12 of the flow's initial loss), and its gradient in the second layer, which sees
    every gate through relu(w_j . x), must vanish as the piece's does (to 1e3 `tol`). A gate
    that flipped on a neuron with a_j ~ 0 changes no loss, but it shows there (on random
    ReLU nets the loss check alone passed points whose true gradient was 1e-2)."""
    if not isinstance(model, TwoLayerReLU):
        cp = critical_point(model, loss, args=args, kind="any", tol=tol, max_steps=max_steps)
        return cp, cp.model, True
    piece = _OnPiece(model.a, model.W, _Fixed(jax.lax.stop_gradient(model.W)))
    cp = critical_point(piece, loss, args=args, kind="any", tol=tol, max_steps=max_steps)
    polished = TwoLayerReLU(cp.model.a, cp.model.W)
    if not bool(jax.numpy.isfinite(cp.loss)):
        return eqx.tree_at(lambda c: c.model, cp, polished), cp.model, True  # says nonfinite
    true_loss, grads = eqx.filter_value_and_grad(loss)(polished, args)
    same_loss = abs(float(true_loss) - float(cp.loss)) <= 1e-12 * scale
    flat_a = float(jax.numpy.linalg.norm(grads.a)) <= 1e3 * float(tol)
    return eqx.tree_at(lambda c: c.model, cp, polished), cp.model, bool(same_loss and flat_a)


def saddle_chain(sol, loss, *, args=None, tol: float = 1e-12, max_steps: int = 2000, **plateaus):
    """The saddle chain of a flow's solution: one row per plateau, each polished to the
    critical point the flow lingers at (module docstring).

    **Arguments:**

    - `sol`: a `gradient_flow`, `orthogonal_flow` or `two_layer_flow` solution saved with
      `save_trajectory=True`.
    - `loss`: `loss(model, args) -> scalar` on the trajectory's models; `args`: passed to it.
    - `tol`: the polish's target on ||grad|| (`critical_point`'s `tol`).
    - `max_steps`: Newton steps per plateau (2,000: near a degenerate saddle Newton converges
      linearly; a 3-3-1 tanh net's second plateau, index 14, took more than 500). A run that
      heads for a critical point at infinity ends `runs_to_infinity` (`critical_point`).
    - `plateaus`: passed to `theory.loss_plateaus` (`rate_threshold`, `min_drop`, `floor`).

    **Returns:** a list of dicts of NumPy values, one per plateau:

    - `time`, `flow_loss`, `flow_grad_norm`: the plateau's save time, the flow's loss and
      ||grad L|| there: how far from stationary the flow is, not whether a critical point is
      near. On `benchmarks.saddle_chain`'s tanh nets the second plateau's flow gradient was
      6.2e-3 at width 3, where Newton found a saddle of index 14 (||grad|| 1e-12), and 5.9e-3
      at width 30, where the loss kept falling (0.0232 to 0.0217 from t = 14 to 40, below the
      linear fit's 0.0255), the gradient never fell below 5.9e-3, and Newton ran off to
      infinity (`runs_to_infinity`: no finite critical point found, and none claimed).
    - `loss`, `grad_norm`, `ok`, `result`: the polished critical point's (`result` the
      name, `"RESULTS.successful"` where ||grad|| < `tol`; a `TwoLayerReLU` polished on its
      plateau's activation piece, `"left_piece"` where the polished point is off it).
    - `morse_index` (certified, -1 where not), `morse_lower`, `model`: the critical point.
    - `unstable` (index, P): its unstable directions (None for P > 1024).
    - `escape_angle`: radians between the flow's escape from the plateau and the unstable
      subspace (NaN for the last plateau, which the flow does not leave).

    **Raises:** `ValueError` where `sol` carries no trajectory, or on a loss curve
    `theory.loss_plateaus` refuses.
    """
    trajectory = getattr(sol, "trajectory", None)
    if trajectory is None:
        raise ValueError("`sol` must carry its trajectory: solve with save_trajectory=True")
    ts, flow_loss = np.asarray(sol.ts, float), np.asarray(sol.loss, float)
    found = loss_plateaus(ts, flow_loss, **plateaus)
    starts = np.searchsorted(ts, found["starts"])
    ends = np.searchsorted(ts, found["ends"])
    bounds = list(zip([0, *ends.tolist()], [*starts.tolist(), ts.size - 1], strict=True))

    def at(i):
        return jax.tree_util.tree_map(
            lambda x: x[i] if eqx.is_array(x) else x, trajectory, is_leaf=eqx.is_array
        )

    rows = []
    for j, (lo, hi) in enumerate(bounds):
        i = _flattest(ts, flow_loss, lo, hi)
        model = at(i)
        dim, _ = _check_model_and_loss(model, loss, args)
        flow_grad, _ = ravel_pytree(eqx.filter(eqx.filter_grad(loss)(model, args), eqx.is_array))
        cp, smooth, stayed = _polish(model, loss, args, tol, max_steps, abs(flow_loss[0]))
        index = int(cp.morse_index)
        unstable = None
        if dim <= DENSE_MAX and index > 0:
            spec = hessian_spectrum(smooth, loss, args=args, k=max(1, dim // 2))
            unstable = np.asarray(spec.vectors[:index])
        angle = float("nan")
        if j < len(bounds) - 1 and unstable is not None:
            here, _ = ravel_pytree(eqx.filter(model, eqx.is_inexact_array))
            there, _ = ravel_pytree(eqx.filter(at(int(starts[j])), eqx.is_inexact_array))
            d = np.asarray(there - here)
            inside = np.linalg.norm(unstable @ d) / max(np.linalg.norm(d), 1e-300)
            angle = float(np.arccos(np.clip(inside, 0.0, 1.0)))
        rows.append(
            {
                "time": float(ts[i]),
                "flow_loss": float(flow_loss[i]),
                "flow_grad_norm": float(np.linalg.norm(flow_grad)),
                "loss": float(cp.loss),
                "grad_norm": float(cp.grad_norm),
                "ok": bool(cp.ok) and stayed,
                "result": result_names(cp.result) if stayed else "left_piece",
                "morse_index": index,
                "morse_lower": int(cp.spectrum.morse_lower),
                "model": cp.model,
                "unstable": unstable,
                "escape_angle": angle,
            }
        )
    return rows
