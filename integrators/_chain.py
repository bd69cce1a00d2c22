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
"""

import equinox as eqx
import jax
import numpy as np
from jax.flatten_util import ravel_pytree

from theory import loss_plateaus

from ._critical import critical_point
from ._spectrum import DENSE_MAX, _check_model_and_loss, hessian_spectrum


def _flattest(ts, loss, lo, hi):
    """The save index in [lo, hi] where the log-loss decays slowest."""
    rate = -np.diff(np.log(loss)) / np.maximum(np.diff(ts), 1e-300)
    lo, hi = int(lo), int(max(hi, lo + 1))
    window = rate[lo:hi]
    return lo + int(np.argmin(np.abs(window))) if window.size else lo


def saddle_chain(sol, loss, *, args=None, tol: float = 1e-12, max_steps: int = 500, **plateaus):
    """The saddle chain of a flow's solution `sol` (a `gradient_flow`, `orthogonal_flow` or
    `two_layer_flow` solution saved with `save_trajectory=True`) under `loss(model, args)`:
    one row per plateau, as dicts of NumPy values (module docstring).

    - `time`, `flow_loss`: the plateau's save time and the flow's loss there.
    - `loss`, `grad_norm`, `ok`, `result`: the polished critical point's (`tol` on ||grad||).
    - `morse_index` (certified, -1 where not), `morse_lower`, `model`: the critical point.
    - `unstable` (index, P): its unstable directions (None for P > 1024).
    - `escape_angle`: radians between the flow's escape from the plateau and the unstable
      subspace (NaN for the last plateau, which the flow does not leave).

    `plateaus` go to `theory.loss_plateaus` (`rate_threshold`, `min_drop`, `floor`).
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
        cp = critical_point(model, loss, args=args, kind="any", tol=tol, max_steps=max_steps)
        index = int(cp.morse_index)
        unstable = None
        if dim <= DENSE_MAX and index > 0:
            spec = hessian_spectrum(cp.model, loss, args=args, k=max(1, dim // 2))
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
                "loss": float(cp.loss),
                "grad_norm": float(cp.grad_norm),
                "ok": bool(cp.ok),
                "result": str(cp.result),
                "morse_index": index,
                "morse_lower": int(cp.spectrum.morse_lower),
                "model": cp.model,
                "unstable": unstable,
                "escape_angle": angle,
            }
        )
    return rows
