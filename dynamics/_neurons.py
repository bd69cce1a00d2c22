"""Neuron operations that embed a narrower network's critical point into a wider network's.

Splitting hidden neuron j (incoming weights w_j, bias b_j, outgoing weights c_j) into two
copies with the same incoming weights and outgoing weights lambda c_j and (1 - lambda) c_j
leaves the function unchanged, and maps a critical point of the narrower net to a critical
point of the wider one with the same loss (a line of them, over lambda). Its Morse index is
derived in `split_neuron`'s docstring (Fukumizu and Amari, 2000). Merging two neurons with
equal incoming weights (sum of their outgoing weights) is the inverse.

Supported: `TwoLayerReLU` (hidden neurons are the rows of W, outgoing weights the entries of
a) and `equinox.nn.MLP` (any hidden layer: rows of `layers[l].weight` and `layers[l].bias`,
columns of `layers[l + 1].weight`). Any other model whose hidden layer is a linear map
followed by an elementwise activation and a linear read-out splits the same way: copy the
neuron's row (and bias) in the first map, and split its column in the second.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._model import TwoLayerReLU


def _index(name, j, width):
    if isinstance(j, bool) or not isinstance(j, int | np.integer):
        raise ValueError(f"`{name}` must be a Python int neuron index, got {j!r}")
    if not -width <= j < width:
        raise ValueError(f"`{name}` must index one of the {width} neurons, got {j}")
    return j % width


def _hidden(model, layer):
    """(incoming weight (m, fan_in), incoming bias (m,) or None, outgoing (k, m)) of the
    hidden layer, and a function rebuilding the model from new ones."""
    if isinstance(model, TwoLayerReLU):
        if layer not in (None, 0):
            raise ValueError(f"`layer` must be 0 (or None) for a TwoLayerReLU, got {layer!r}")

        def rebuild(W, b, C):
            return TwoLayerReLU(C[0], W)

        return model.W, None, model.a[None, :], rebuild
    if isinstance(model, eqx.nn.MLP):
        hidden = len(model.layers) - 1
        if hidden < 1:
            raise ValueError("`model` has no hidden layer (depth 0)")
        layer = 0 if layer is None else layer
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < hidden:
            raise ValueError(
                f"`layer` must be a hidden layer index in [0, {hidden}), got {layer!r}"
            )
        first, second = model.layers[layer], model.layers[layer + 1]

        def rebuild(W, b, C):
            def linear(old, weight, bias):
                new = eqx.nn.Linear(
                    weight.shape[1], weight.shape[0], use_bias=bias is not None,
                    dtype=weight.dtype, key=jax.random.PRNGKey(0),
                )  # fmt: skip
                new = eqx.tree_at(lambda m: m.weight, new, weight)
                if bias is not None:
                    new = eqx.tree_at(lambda m: m.bias, new, bias)
                return new

            layers = list(model.layers)
            layers[layer] = linear(first, W, b)
            layers[layer + 1] = linear(second, C, second.bias)
            return eqx.tree_at(lambda m: m.layers, model, tuple(layers))

        return first.weight, first.bias, second.weight, rebuild
    raise ValueError(
        f"`model` must be a TwoLayerReLU or an equinox.nn.MLP, got {type(model).__name__} "
        "(other models split the same way: see the module docstring)"
    )


def split_neuron(model, j: int, fraction=0.5, *, layer: int | None = None):
    """The model with hidden neuron j duplicated: both copies keep its incoming weights (and
    bias); its outgoing weights c_j become `fraction` c_j (at j) and (1 - `fraction`) c_j (a
    new last neuron). The function is unchanged, so a critical point maps to a critical point
    with the same loss.

    **Morse index of the split.** In coordinates (the narrower net's parameters, the split of
    c_j, the difference delta of the copies' incoming weights) the Hessian at the split point
    is block diagonal (the cross terms are the narrower net's gradient): the narrower net's
    Hessian, a 0 (the line of critical points over `fraction`), and lambda (1 - lambda) B
    with lambda = `fraction` and

        B = sum_i g_ij sigma''(z_ij) h_i h_i^T,

    h_i the layer's input on sample i (with a 1 appended for a bias), z_ij = w_j.h_i and
    g_ij = dL / d sigma(z_ij) (the loss's sensitivity to the neuron's output). By Sylvester's
    law of inertia, index(split) = index(narrower) + the number of negative eigenvalues of
    lambda (1 - lambda) B: those of B for lambda in (0, 1), its positive ones for lambda
    outside [0, 1]. For ReLU, sigma'' = 0 away from the kink: B = 0, and the split adds only
    zero eigenvalues (`tests/test_neurons.py` checks both against the dense Hessian).

    **Arguments:**

    - `model`: a `TwoLayerReLU` or an `eqx.nn.MLP` with at least one hidden layer.
    - `j`: the neuron, a Python or NumPy int in [-width, width) (negative counts from the
      end).
    - `fraction`: lambda, one finite real number (default 0.5; values outside [0, 1] are
      allowed), with |lambda| and |1 - lambda| at most 1/sqrt(eps) of the outgoing weights'
      dtype.
    - `layer`: which hidden layer of an `eqx.nn.MLP`, a Python int in [0, number of hidden
      layers) (default `None`: layer 0); `None` or 0 for a `TwoLayerReLU`.

    **Returns:** a model of the same kind, one neuron wider in that layer (the copy is its
    last neuron), computing the same function.

    **Raises:** `ValueError` where `model` is neither kind or an MLP without a hidden layer,
    `layer` is not a valid hidden-layer index, `j` is not an int index in range, or
    `fraction` is not one finite real number or exceeds the bound above.

    >>> net = TwoLayerReLU(jnp.array([1.0, -2.0]), jnp.eye(2))
    >>> wide = split_neuron(net, 1, 0.25)
    >>> wide.a.tolist(), wide.W.shape
    ([1.0, -0.5, -1.5], (3, 2))
    """
    W, b, C, rebuild = _hidden(model, layer)
    j = _index("j", j, W.shape[0])
    if isinstance(fraction, str | bool | np.bool_) or np.iscomplexobj(fraction):
        raise ValueError(f"`fraction` must be one finite number, got {fraction!r}")
    lam = jnp.asarray(fraction, C.dtype)
    if lam.shape != () or not bool(jnp.isfinite(lam)):
        raise ValueError(f"`fraction` must be one finite number, got {fraction!r}")
    # lam c_j + (1 - lam) c_j = c_j only to rounding: eps max(|lam|, |1 - lam|) relative
    bound = float(np.sqrt(1.0 / np.finfo(C.dtype).eps))
    if max(abs(float(lam)), abs(1.0 - float(lam))) > bound:
        raise ValueError(
            f"`fraction` must have |fraction| and |1 - fraction| <= {bound:.3g} (1/sqrt(eps) "
            f"of {C.dtype}; larger splits change the function by rounding), got {fraction!r}"
        )
    W2 = jnp.concatenate([W, W[j : j + 1]], axis=0)
    b2 = None if b is None else jnp.concatenate([b, b[j : j + 1]])
    C2 = jnp.concatenate([C.at[:, j].multiply(lam), (1 - lam) * C[:, j : j + 1]], axis=1)
    return rebuild(W2, b2, C2)


def merge_neurons(model, i: int, j: int, *, layer: int | None = None, atol: float = 1e-12):
    """The model with hidden neurons i and j merged into i (outgoing weights summed, j
    removed): the inverse of `split_neuron`.

    **Arguments:**

    - `model`: a `TwoLayerReLU` or an `eqx.nn.MLP` with at least one hidden layer.
    - `i`, `j`: two different neurons, Python or NumPy ints in [-width, width) (negative
      counts from the end); j is merged into i.
    - `layer`: which hidden layer, as in `split_neuron` (default `None`: layer 0).
    - `atol`: one finite real number >= 0 (default 1e-12): the incoming weights (and biases)
      of i and j must agree to `atol` x max(1, max |w_i|) in every entry, else the function
      would change.

    **Returns:** a model of the same kind, one neuron narrower in that layer: neuron i
    carries the summed outgoing weights, j is removed and the neurons after j move down one
    place.

    **Raises:** `ValueError` where `atol` is not one finite number >= 0, `model`, `layer` or
    an index is refused as in `split_neuron`, `i` and `j` are the same neuron, or their
    incoming weights differ by more than the tolerance (the message says by how much).

    >>> net = TwoLayerReLU(jnp.array([1.0, -0.5, -1.5]), jnp.array([[1.0, 0], [0, 1], [0, 1]]))
    >>> merge_neurons(net, 1, 2).a.tolist()
    [1.0, -2.0]
    """
    if (
        isinstance(atol, bool | str)
        or np.ndim(atol) != 0
        or not (np.isrealobj(atol) and np.isfinite(atol) and atol >= 0)
    ):
        raise ValueError(f"`atol` must be a finite number >= 0, got {atol!r}")
    W, b, C, rebuild = _hidden(model, layer)
    m = W.shape[0]
    i, j = _index("i", i, m), _index("j", j, m)
    if i == j:
        raise ValueError(f"`i` and `j` must be two different neurons, got {i} twice")
    wi = W[i] if b is None else jnp.append(W[i], b[i])
    wj = W[j] if b is None else jnp.append(W[j], b[j])
    atol = float(atol)
    gap = float(jnp.max(jnp.abs(wi - wj)))
    size = max(1.0, float(jnp.max(jnp.abs(wi))))
    if not gap <= atol * size:
        raise ValueError(
            f"neurons {i} and {j} have different incoming weights (max difference {gap:.3e}, "
            f"`atol` x size = {atol * size:.3e}): merging them would change the function"
        )
    keep = jnp.array([k for k in range(m) if k != j])
    C2 = C.at[:, i].add(C[:, j])[:, keep]
    return rebuild(W[keep], None if b is None else b[keep], C2)
