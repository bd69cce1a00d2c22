"""Held kinks for any loss: the piecewise-linear sites of a jaxpr, evaluated on a held pattern.

A ReLU network's gradient field jumps wherever a pre-activation crosses a kink. To hold each step's
activation pattern fixed (as `theory.numerics.HoldArgs` does for the two-layer flows), for *any*
model, the loss is traced once to a jaxpr and re-evaluated by a small interpreter that treats every
kink site by its held side. The sites are the primitives where a smooth function of the parameters
switches branch:

- `max(x, y)` and `min(x, y)` (`jax.nn.relu`, `jnp.maximum(x, 0)`, `jnp.clip`, relu6;
  `lax.clamp` as both): held out = where(p, x, y), with p = (x > y) (resp. x < y) at the
  step's start;
- `jnp.max` / `jnp.min` over axes (`reduce_max`, `reduce_min`: global max-pooling) and over
  sliding windows (`reduce_window_max`, `reduce_window_min`: `eqx.nn.MaxPool2d`): a tree of
  the pairwise max / min above, one site per level (`_Run._reduce`, `_Run._window`);
- `abs(x)`: held out = where(p, x, -x), p = (x >= 0);
- a float comparison `gt`, `ge`, `lt`, `le` (`jax.nn.leaky_relu`, `jnp.where(x > 0, ...)`):
  its boolean is held; where it selects between two branches (`select_n`) or becomes a float
  (`convert_element_type`), that use is the site's kink.

Each site has a *switching variable* z (x - y, or x) whose sign is its pattern p.

**Exact ties.** Where a max / min site's branches are exactly equal (two pooled relus both
clamped at 0), z = 0 says nothing, and the recorded pattern follows their *shadows*: what
their own max / min sites clamp (a relu's pre-activation), carried through reshapes, slices,
padding and the reduction tree. A max takes the branch with the larger shadow, the entry
nearest to becoming its maximum: where that entry is a relu sliding on its kink (its
pre-activation at -1e-13 or +1e-13, as rounding falls), the pool passes the relu's blend, as
gradient descent does. A constant carried there (padding) never wins; a value tied with a
constant at the site itself (relu(0)) keeps the convention, p = (z > 0).

Why a jaxpr interpreter rather than an activation wrapper: the models researchers bring are
written with `jax.nn.relu`, `jnp.abs` and `jnp.where`, and `eqx.nn.MLP` takes any activation;
rewriting the traced loss finds every such site without asking the model to change. Sites
inside control flow (`scan`, `while`, `cond`) and inside custom-derivative functions other
than `jax.nn.relu` and `relu6` (whose rules a held evaluation would drop) are evaluated as
written, not held. Integer max/min/abs are no kinks. Other nonsmooth primitives (`sort`,
`top_k`, `cummax`, `argmax`, `floor`...) on values that vary with the arguments are evaluated
as written too; `KinkedFunction.unheld` names them and the control flow with sites inside,
and `gradient_flow` warns. Smooth functions written with max or abs (logsumexp) count as
sites: held, exactly, at some cost in steps.

Blend weights w (one per site entry, 0 normally) give out = held + w (other - held), the
direction in which the true (switched) branch differs from the held one: their
Jacobian-vector product is the error of integrating a crossed kink as if it were smooth.
"""

import itertools

import jax
import jax.extend.core as jex
import jax.numpy as jnp

_COMPARE = {"gt": 1, "ge": 1, "lt": -1, "le": -1}  # z = sign * (x - y)
_MINMAX = {"max": 1, "min": -1}
_REDUCE = {"reduce_max": "max", "reduce_min": "min"}  # held as trees of pairwise max / min
_WINDOW = {"reduce_window_max": "max", "reduce_window_min": "min"}  # pooling windows: the same
# nonsmooth primitives that are not held (evaluated as written: `KinkedFunction.unheld`)
_UNHELD = {"sort", "top_k", "cummax", "cummin", "argmax", "argmin", "floor", "ceil", "round",
           "reduce_window"}  # fmt: skip
# primitives that only move, copy or reshape entries: a shadow (`_Run._pair`) follows them
_STRUCTURAL = {
    "reshape", "transpose", "squeeze", "expand_dims", "broadcast_in_dim", "slice", "rev",
    "dynamic_slice", "concatenate", "pad", "copy", "copy_p", "gather", "select_n",
    "convert_element_type", "reduce_precision",
}  # fmt: skip
_CALL = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr"}
_CUSTOM = {"custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr"}
# custom-derivative functions whose rule is the derivative of their held branches (relu's
# relu'(0) = 0, relu6's 0 at 0 and 6): inlined. Any other custom rule is kept, its call bound
# as it is (a site inside it is then not held: interpreting its primal would drop a surrogate
# gradient).
_INLINED_CUSTOM = {"relu", "relu6"}


def _inlined(name, params) -> bool:
    """A custom-derivative call that is interpreted (its held branches give its rule)."""
    if name not in _CUSTOM or _CUSTOM[name] not in params:
        return False
    info = getattr(_closed(params[_CUSTOM[name]])[0], "debug_info", None)
    return getattr(info, "func_name", None) in _INLINED_CUSTOM


def _float(var) -> bool:
    return jnp.issubdtype(var.aval.dtype, jnp.floating)


def _choose(sign, x, y):
    """The shadow of max(x, y) (sign 1) or min(x, y): a constant's NaN shadow never wins."""
    return jnp.fmax(x, y) if sign > 0 else jnp.fmin(x, y)


class _Shadow:
    """What a recorded value's max / min sites know of it for breaking exact ties: its
    `shadow` (None: none), whether it `varies` with the function's arguments (a literal or a
    constant does not), and whether it is `floating` (an integer index or a predicate has no
    shadow)."""

    def __init__(self, shadow, varies, floating=True):
        self.shadow, self.varies, self.floating = shadow, varies, floating

    def of(self, value, sign):
        """The shadow a max (sign 1) / min (sign -1) site compares: the value's own where it
        has none, and -sign inf for a constant (the clamp of a relu: never chosen at a tie)."""
        if self.shadow is not None:
            return self.shadow
        if not self.varies:
            return jnp.full(jnp.shape(value), -sign * jnp.inf, jnp.result_type(value))
        return value

    def moved(self, value):
        """The shadow of a value without one moved by a structural primitive: its own where it
        varies, NaN for a constant (a padding value, a concatenated zero)."""
        if self.varies:
            return value
        return jnp.full(jnp.shape(value), jnp.nan, jnp.result_type(value))


def _blend(out, weight, other):
    """out + weight (other - out), linear in the weight; a non-finite difference (an infinite
    other branch: log_softmax's max(-inf, ...)) counts as 0."""
    difference = other - out
    return out + weight * jnp.where(jnp.isfinite(difference), difference, 0.0)


def _closed(jaxpr):
    if isinstance(jaxpr, jex.ClosedJaxpr):
        return jaxpr.jaxpr, jaxpr.consts
    return jaxpr, ()


def _tag(site_of, v):
    """The site whose held boolean `v` carries, or None (literals carry none)."""
    return None if isinstance(v, jex.Literal) else site_of.get(v)


def _inner_jaxprs(params):
    """The jaxprs among an equation's parameters (a scan's body, a cond's branches...)."""
    for value in params.values():
        for v in value if isinstance(value, tuple | list) else (value,):
            if isinstance(v, jex.ClosedJaxpr | jex.Jaxpr):
                yield _closed(v)[0]


def _has_site(jaxpr) -> bool:
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        kinked = name in _MINMAX or name in _REDUCE or name in _WINDOW or name in ("abs", "clamp")
        kinked = kinked or name in _COMPARE
        if kinked and _float(eqn.invars[0]):
            return True
        key = _CALL.get(name)
        if _inlined(name, eqn.params):
            key = _CUSTOM[name]
        if key is not None and key in eqn.params and _has_site(_closed(eqn.params[key])[0]):
            return True
    return False


class _Run:
    """One evaluation of a jaxpr: records the pattern and z of every site (`held` None), or
    evaluates each site on its held pattern, blended towards its other branch by `weights`."""

    def __init__(self, held=None, weights=None):
        self.held, self.weights = held, weights
        self.patterns, self.switches = [], []
        self.unheld = set()

    def _site(self, pattern, z):
        """Register a site; returns its held pattern and its blend weight (or None)."""
        index = len(self.patterns)
        if self.held is not None:
            pattern = self.held[index]
        self.patterns.append(pattern)
        self.switches.append(z)
        weight = None if self.weights is None else self.weights[index]
        return pattern, weight, index

    def _pair(self, sign, x, y, ties=None):
        """max(x, y) (sign 1) or min(x, y) (sign -1) as a site: z = sign (x - y) (0 where
        x = y, infinities included: a pooling window's padding). Where x = y exactly, `ties`
        (x's and y's shadow arrays, `_Shadow`) decides the branch (recording only): the
        larger shadow for a max where both are finite, the finite one against a constant
        moved there (NaN); against a constant at the site itself (+-inf), the convention.
        Returns the value and (with `ties`) its shadow, the chosen of the two."""
        z = jnp.where(x == y, jnp.zeros_like(x), sign * (x - y))
        taken = z > 0
        if ties is not None:
            (a, b), finite = ties, jnp.isfinite(ties[0]) & jnp.isfinite(ties[1])
            wins = (finite & (sign * (a - b) > 0)) | (jnp.isfinite(a) & jnp.isnan(b))
            taken = taken | ((z == 0) & wins)
        pattern, weight, _ = self._site(taken, z)
        out = jnp.where(pattern, x, y)
        if weight is not None:
            out = _blend(out, weight, jnp.where(pattern, y, x))
        return out, None if ties is None else _choose(sign, *ties)

    def _reduce(self, sign, x, axes, shape, shadow=None):
        """A max / min over `axes` (max-pooling, `jnp.max`) as a tree of pairwise ones: the
        reduced axes flattened to one of length L, its halves compared entry by entry, one site
        per level (ceil(log2 L) sites, L - 1 entries per output). The same value, each argmax
        change a kink of one site entry, held and slid like any other. Returns the value and
        (where `shadow`, x's, is given) its shadow."""
        keep = [a for a in range(x.ndim) if a not in axes]

        def flat(v):
            v = jnp.transpose(v, tuple(axes) + tuple(keep))
            return v.reshape((-1,) + tuple(v.shape[len(axes) :]))

        return self._tree(sign, flat(x), None if shadow is None else flat(shadow), shape)

    def _window(self, sign, x, params, shape, shadow=None):
        """A max / min over sliding windows (`reduce_window_max`: `eqx.nn.MaxPool1d/2d/3d`,
        `jax.lax.reduce_window`): x padded with -sign inf (also between entries, the base
        dilation), one strided slice per window offset stacked (K = the window's size), and
        the tree of `_tree` over them: ceil(log2 K) sites."""
        fill = -jnp.inf if sign > 0 else jnp.inf
        config = [
            (lo, hi, d - 1)
            for (lo, hi), d in zip(params["padding"], params["base_dilation"], strict=True)
        ]
        windows = params["window_dimensions"]
        strides, dilation = params["window_strides"], params["window_dilation"]

        def patches(v):
            padded = jax.lax.pad(v, jnp.asarray(fill, v.dtype), config)
            out = []
            for offset in itertools.product(*[range(k) for k in windows]):
                start = [o * d for o, d in zip(offset, dilation, strict=True)]
                limit = [a + (n - 1) * s + 1 for a, n, s in zip(start, shape, strides, strict=True)]
                out.append(jax.lax.slice(padded, start, limit, strides))
            return jnp.stack(out)

        return self._tree(sign, patches(x), None if shadow is None else patches(shadow), shape)

    def _tree(self, sign, x, s, shape):
        """max / min over x's first axis as a tree of pairwise sites, one per level; the value
        and (where `s` is given) its shadow, shaped `shape`."""
        while x.shape[0] > 1:
            half = x.shape[0] // 2
            ties = None if s is None else (s[:half], s[half : 2 * half])
            paired, both = self._pair(sign, x[:half], x[half : 2 * half], ties)
            x = jnp.concatenate([paired, x[2 * half :]]) if x.shape[0] % 2 else paired
            if s is not None:
                s = jnp.concatenate([both, s[2 * half :]]) if s.shape[0] % 2 else both
        return x[0].reshape(shape), None if s is None else s[0].reshape(shape)

    def eval(self, jaxpr, consts, args, tags=None, shadows=None, varies=None):
        """The jaxpr's outputs. Recording, `self.shadows` then holds the outputs' shadows
        (`_Shadow`); `shadows` are the inputs'."""
        env, site_of, shadow_of = {}, {}, {}
        if varies is None:  # which inputs vary with the function's arguments (all: the top)
            varying = set(jaxpr.invars)
        else:
            varying = {v for v, f in zip(jaxpr.invars, varies, strict=True) if f}

        def read(v):
            return v.val if isinstance(v, jex.Literal) else env[v]

        def shadow(v):
            return None if isinstance(v, jex.Literal) else shadow_of.get(v)

        for v, x in zip(jaxpr.constvars, consts, strict=True):
            env[v] = x
        for i, (v, x) in enumerate(zip(jaxpr.invars, args, strict=True)):
            env[v] = x
            if tags is not None and tags[i] is not None:
                site_of[v] = tags[i]
            if shadows is not None and shadows[i] is not None:
                shadow_of[v] = shadows[i]
        for eqn in jaxpr.eqns:
            invals = [read(v) for v in eqn.invars]
            if self.held is None:  # recording: each input's shadow, and whether it varies
                ins = [
                    _Shadow(shadow(v), not isinstance(v, jex.Literal) and v in varying, _float(v))
                    for v in eqn.invars
                ]
            else:
                ins = None
            outs, out_tag, out_shadows = self._eqn(eqn, invals, site_of, ins)
            if eqn.primitive.name == "not" and _tag(site_of, eqn.invars[0]) is not None:
                out_tag = site_of[eqn.invars[0]]
            vary = any(v in varying for v in eqn.invars if not isinstance(v, jex.Literal))
            for i, (v, x) in enumerate(zip(eqn.outvars, outs, strict=True)):
                if not isinstance(v, jex.DropVar):
                    env[v] = x
                    if out_tag is not None:
                        site_of[v] = out_tag
                    if vary:
                        varying.add(v)
                    if out_shadows is not None and out_shadows[i] is not None:
                        shadow_of[v] = out_shadows[i]
        self.shadows = [shadow(v) for v in jaxpr.outvars]
        return [read(v) for v in jaxpr.outvars]

    def _eqn(self, eqn, invals, site_of, shadows=None):
        """The outputs of one equation, the site whose held boolean they carry (or None), and
        (recording, with the inputs' `shadows`) the outputs' shadows (or None)."""
        name, params = eqn.primitive.name, eqn.params
        shape = eqn.outvars[0].aval.shape
        if name in _MINMAX and _float(eqn.outvars[0]):
            sign = _MINMAX[name]
            x, y = (jnp.broadcast_to(v, shape) for v in invals)
            ties = None
            if shadows is not None:
                ties = tuple(
                    jnp.broadcast_to(s.of(v, sign), shape)
                    for s, v in zip(shadows, invals, strict=True)
                )
            out, shadow = self._pair(sign, x, y, ties)
            return [out], None, [shadow]
        if name in _REDUCE and _float(eqn.outvars[0]):
            sign = _MINMAX[_REDUCE[name]]
            given = None if shadows is None else shadows[0].of(invals[0], sign)
            out, shadow = self._reduce(sign, invals[0], params["axes"], shape, given)
            return [out], None, [shadow]
        if name == "clamp" and _float(eqn.outvars[0]):  # clamp(lo, x, hi) = min(max(x, lo), hi)
            lo, x, hi = (jnp.broadcast_to(v, shape) for v in invals)
            s_lo = s_x = s_hi = None
            if shadows is not None:
                s_lo, s_x, s_hi = (
                    jnp.broadcast_to(s.of(v, sign), shape)
                    for s, v, sign in zip(shadows, invals, (1, 1, -1), strict=True)
                )
            low, s_low = self._pair(1, x, lo, None if shadows is None else (s_x, s_lo))
            out, shadow = self._pair(-1, low, hi, None if shadows is None else (s_low, s_hi))
            return [out], None, [shadow]
        if name in _WINDOW and _float(eqn.outvars[0]):
            sign = _MINMAX[_WINDOW[name]]
            given = None if shadows is None else shadows[0].of(invals[0], sign)
            out, shadow = self._window(sign, invals[0], params, shape, given)
            return [out], None, [shadow]
        if name == "abs" and _float(eqn.outvars[0]):
            (x,) = invals
            pattern, weight, _ = self._site(x >= 0, x)
            out = jnp.where(pattern, x, -x)
            if weight is not None:
                out = _blend(out, weight, -out)
            return [out], None, None
        if name in _COMPARE and _float(eqn.invars[0]):
            x, y = (jnp.broadcast_to(v, shape) for v in invals)
            z = _COMPARE[name] * (x - y)
            held = eqn.primitive.bind(x, y, **params)
            pattern, _, index = self._site(held, z)
            return [pattern], index, None
        if name == "select_n" and len(invals) == 3 and _tag(site_of, eqn.invars[0]) is not None:
            pred, *cases = invals
            index = _tag(site_of, eqn.invars[0])
            out = jax.lax.select_n(pred, *cases)
            if self.weights is not None:
                weight = jnp.broadcast_to(self.weights[index], jnp.shape(pred))
                out = _blend(out, weight, jax.lax.select_n(~pred, *cases))
            return [out], None, None
        if name == "convert_element_type" and _tag(site_of, eqn.invars[0]) is not None:
            (pred,) = invals
            index = _tag(site_of, eqn.invars[0])
            out = eqn.primitive.bind(pred, **params)
            if self.weights is not None and _float(eqn.outvars[0]):
                out = _blend(out, self.weights[index], eqn.primitive.bind(~pred, **params))
            return [out], None, None
        key = _CALL.get(name)
        if key is None and _inlined(name, params):
            key = _CUSTOM[name]
        if key is not None and key in params:
            inner, consts = _closed(params[key])
            skip = params.get("num_consts", 0) if name in _CUSTOM else 0
            tags = [_tag(site_of, v) for v in eqn.invars[skip:]]
            inner_shadows = inner_varies = None
            if shadows is not None:
                inner_shadows = [s.shadow for s in shadows[skip:]]
                inner_varies = [s.varies for s in shadows[skip:]]
            outs = self.eval(inner, consts, invals[skip:], tags, inner_shadows, inner_varies)
            return outs, None, (None if shadows is None else self.shadows)
        varies = shadows is not None and any(s.varies for s in shadows)
        # (a custom rule kept is the user's, or smooth: logaddexp's max is for its rounding)
        inside = name not in _CUSTOM and any(_has_site(j) for j in _inner_jaxprs(params))
        if varies and (name in _UNHELD or inside):
            self.unheld.add(name)
        out = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(params))
        outs = out if eqn.primitive.multiple_results else [out]
        if name not in _STRUCTURAL or shadows is None:
            return outs, None, None
        if all(s.shadow is None for s in shadows):
            return outs, None, None
        # an operand without a shadow moves its value (a constant: NaN, never a tie's winner);
        # integer ones (indices, predicates) as they are
        moved = [
            v if not s.floating else s.shadow if s.shadow is not None else s.moved(v)
            for s, v in zip(shadows, invals, strict=True)
        ]
        shadow = eqn.primitive.bind(*moved, **eqn.primitive.get_bind_params(params))
        return outs, None, (shadow if eqn.primitive.multiple_results else [shadow])


class KinkedFunction:
    """A scalar function of array leaves, traced once, that can be evaluated with its kink
    sites recorded (`record`) or held (`held`); see the module docstring.

    >>> f = KinkedFunction(lambda x: jnp.sum(jax.nn.relu(x)), jnp.zeros(3))
    >>> pattern, z = f.record(jnp.array([1.0, -1.0, 2.0]))
    >>> f.num_sites, pattern[0].tolist()
    (1, [True, False, True])
    >>> float(f.held(pattern, None, jnp.array([-1.0, 5.0, 2.0])))  # held: -1 + 0 + 2
    1.0
    """

    def __init__(self, fn, *example):
        closed = jax.make_jaxpr(fn)(*example)
        self.jaxpr, self.consts = closed.jaxpr, closed.consts
        run = _Run()
        jax.eval_shape(lambda *a: run.eval(self.jaxpr, self.consts, _leaves(a)), *example)
        self.num_sites = len(run.patterns)
        # nonsmooth primitives evaluated as written (sort, argmax...), and control flow with
        # sites inside (scan, while, cond): their kinks are not held
        self.unheld = tuple(sorted(run.unheld))

    def record(self, *args):
        """The pattern (a list of booleans, one per site) and switching variables z at args."""
        run = _Run()
        run.eval(self.jaxpr, self.consts, _leaves(args))
        return run.patterns, run.switches

    def held(self, pattern, weights, *args):
        """The function's value with every site on its `pattern` (blended by `weights`)."""
        return _Run(pattern, weights).eval(self.jaxpr, self.consts, _leaves(args))[0]

    def held_switches(self, pattern, weights, *args):
        """The switching variables z of every site, evaluated with the sites held."""
        run = _Run(pattern, weights)
        run.eval(self.jaxpr, self.consts, _leaves(args))
        return run.switches


def _leaves(args):
    return jax.tree_util.tree_leaves(args)
