"""Per-unit log scale for `gradient_flow(..., units=)`.

Plain tolerances are absolute and relative to the whole parameter vector, so at tiny
initialization (alpha far below atol) the small neurons are integrated with no relative
accuracy. With `units` (an integer label per parameter entry, e.g. `neuron_units(model)`),
every unit u is integrated as theta_u = exp(kappa_u) psi_u with the gauge

    d kappa_u/dt = -tau <psi_u, e^(-kappa_u) g_u> / ||psi_u||^2,
    d psi_u/dt = -tau e^(-kappa_u) g_u - psi_u d kappa_u/dt,

(g = grad_theta loss), which keeps ||psi_u|| = 1: each unit's tolerance is relative to its
own size, whatever alpha is (down to alpha ~ 1e-150, where theta_u itself underflows
float64). Entries labelled -1 are integrated plainly. This is the generalization of the
per-neuron log scale of `orthogonal_flow`.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from dynamics import LeakyReLUNet, TwoLayerNet, TwoLayerReLU


def neuron_units(model) -> eqx.Module:
    """Unit labels for `gradient_flow(..., units=)`: one unit per neuron.

    - `dynamics.TwoLayerReLU`, `TwoLayerNet` (teacher-student) and `LeakyReLUNet`: neuron j
      is (a_j, w_j), with its bias b_j where the net has biases.
    - `eqx.nn.MLP`: every neuron of every layer is its row of the layer's weight and its
      bias (its incoming parameters), numbered layer by layer.

    **Arguments:** `model`: one of the models above.

    **Returns:** a pytree shaped like the model's inexact arrays, holding integer labels.

    **Raises:** `ValueError` for any other model, or a batch of models (label one inside
    its `vmap`).

    >>> from dynamics import LeakyReLUNet, TwoLayerNet, TwoLayerReLU
    >>> units = neuron_units(TwoLayerReLU(jnp.ones(2), jnp.ones((2, 3))))
    >>> units.a.tolist(), units.W.tolist()
    ([0, 1], [[0, 0, 0], [1, 1, 1]])
    """
    if isinstance(model, TwoLayerReLU | TwoLayerNet | LeakyReLUNet):
        if jnp.ndim(model.W) != 2:
            raise ValueError(
                f"`model.W` must have shape (m, d) (one model: label a batch inside its vmap), "
                f"got {jnp.shape(model.W)}"
            )
        m, d = model.W.shape
        j = jnp.arange(m)
        params = eqx.filter(model, eqx.is_inexact_array)
        labels = eqx.tree_at(
            lambda t: (t.a, t.W), params, (j, jnp.broadcast_to(j[:, None], (m, d)))
        )
        if getattr(model, "b", None) is not None:
            labels = eqx.tree_at(lambda t: t.b, labels, j)
        return labels
    if isinstance(model, eqx.nn.MLP):
        start, layers = 0, []
        for layer in model.layers:
            out = layer.weight.shape[0]
            j = jnp.arange(start, start + out)
            weight = jnp.broadcast_to(j[:, None], layer.weight.shape)
            bias = None if layer.bias is None else j.reshape(layer.bias.shape)
            layers.append(
                eqx.tree_at(
                    lambda lay: (lay.weight, lay.bias),
                    layer,
                    (weight, bias),
                    is_leaf=lambda x: x is None,
                )
            )
            start += out
        params = eqx.filter(model, eqx.is_inexact_array)
        return eqx.tree_at(lambda mlp: mlp.layers, params, tuple(layers))
    raise ValueError(
        "`model` must be a TwoLayerReLU, TwoLayerNet, LeakyReLUNet or eqx.nn.MLP for "
        f"neuron_units, got "
        f"{type(model).__name__}: pass `units` as integer labels shaped like its arrays"
    )


def unit_labels(units, params):
    """Flatten `units` against `params`: one integer array per parameter leaf."""
    leaves, treedef = jax.tree_util.tree_flatten(params)
    try:
        labels = treedef.flatten_up_to(units)
    except (ValueError, TypeError) as error:
        raise ValueError(
            "`units` must have the structure of the model's inexact arrays "
            f"(one integer array per weight), got a mismatch: {error}"
        ) from None
    out = []
    for leaf, label in zip(leaves, labels, strict=True):
        if isinstance(label, jax.core.Tracer):
            raise ValueError(
                "`units` must be concrete labels (they fix the number of units), got a traced "
                "value: close over them instead of passing them through jit or vmap"
            )
        label = np.asarray(label)
        if label.shape != leaf.shape or not jnp.issubdtype(label.dtype, jnp.integer):
            raise ValueError(
                f"`units` entries must be integer arrays shaped like the weights, got "
                f"{label.dtype}{tuple(label.shape)} for a weight of shape {tuple(leaf.shape)}"
            )
        out.append(label)
    count = max(int(np.max(label, initial=-1)) for label in out) + 1
    low = min(int(np.min(label, initial=0)) for label in out)
    if low < -1 or count == 0:
        raise ValueError(
            "`units` labels must be -1 (no unit) or 0, 1, ... with at least one unit, got "
            f"labels from {low} to {count - 1}"
        )
    return out, count


def _unit_sum(labels, leaves, count):
    """sum over each unit's entries of `leaves` (entries labelled -1 dropped)."""
    total = 0.0
    for lab, x in zip(labels, leaves, strict=True):
        total = total + jax.ops.segment_sum(
            jnp.where(lab >= 0, x, 0.0).ravel(), jnp.maximum(lab, 0).ravel(), count
        )
    return total


def _to_log_scale(params, labels, count, dtype):
    """(kappa, psi): kappa_u = log ||theta_u|| without underflow, psi = theta / e^kappa."""
    leaves = jax.tree_util.tree_leaves(params)
    top = 0.0
    for lab, x in zip(labels, leaves, strict=True):
        top = jnp.maximum(
            top,
            jax.ops.segment_max(
                jnp.where(lab >= 0, jnp.abs(x), 0.0).ravel(), jnp.maximum(lab, 0).ravel(), count
            ),
        )
    top = jnp.where(top > 0, top, 1.0)
    scaled = [(x / top[jnp.maximum(lab, 0)]) ** 2 for lab, x in zip(labels, leaves, strict=True)]
    norm2 = _unit_sum(labels, scaled, count)
    kappa = jnp.asarray(jnp.log(top) + 0.5 * jnp.log(jnp.where(norm2 > 0, norm2, 1.0)), dtype)
    psi = [
        jnp.where(lab >= 0, x * jnp.exp(-kappa[jnp.maximum(lab, 0)]), x)
        for lab, x in zip(labels, leaves, strict=True)
    ]
    return kappa, jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(params), psi)


def zero_units(params, labels, count):
    """Units whose weights are all zero at the start (a zero unit has no scale to follow:
    its kappa would run off like log t)."""
    # sum |x|, not x^2: a unit of size 1e-30 squares to 0 in float32 but is not zero
    sizes = _unit_sum(labels, [jnp.abs(x) for x in jax.tree_util.tree_leaves(params)], count)
    used = np.zeros(count, bool)
    for lab in labels:
        used[np.asarray(lab)[np.asarray(lab) >= 0]] = True
    return (sizes == 0) & jnp.asarray(used)


class LogScale(eqx.Module):
    """The state (kappa, psi) of the per-unit log scale (module docstring) for parameters
    whose entries carry the integer `labels` (one array per leaf, -1 for none) of `count`
    units."""

    labels: list
    count: int = eqx.field(static=True)

    def initial(self, params, dtype):
        """(kappa, psi) at `params`."""
        return _to_log_scale(params, self.labels, self.count, dtype)

    def _scale(self, kappa, sign):
        return [
            jnp.where(lab >= 0, jnp.exp(sign * kappa[jnp.maximum(lab, 0)]), 1.0)
            for lab in self.labels
        ]

    def to_params(self, y):
        """theta = exp(kappa) psi, unit by unit (entries labelled -1 as they are)."""
        kappa, psi = y
        leaves, treedef = jax.tree_util.tree_flatten(psi)
        scaled = [s * x for s, x in zip(self._scale(kappa, 1.0), leaves, strict=True)]
        return jax.tree_util.tree_unflatten(treedef, scaled)

    def field(self, y, grad, tau):
        """(d kappa/dt, d psi/dt) for the flow d theta/dt = -tau `grad`."""
        kappa, psi = y
        psis, treedef = jax.tree_util.tree_flatten(psi)
        grads = jax.tree_util.tree_leaves(grad)
        scaled = [s * g for s, g in zip(self._scale(kappa, -1.0), grads, strict=True)]
        dot = _unit_sum(self.labels, [x * g for x, g in zip(psis, scaled, strict=True)], self.count)
        norm2 = _unit_sum(self.labels, [x * x for x in psis], self.count)
        dkappa = -tau * dot / jnp.where(norm2 > 0, norm2, 1.0)
        dpsi = [
            -tau * g - jnp.where(lab >= 0, dkappa[jnp.maximum(lab, 0)], 0.0) * x
            for lab, x, g in zip(self.labels, psis, scaled, strict=True)
        ]
        return dkappa, jax.tree_util.tree_unflatten(treedef, dpsi)
