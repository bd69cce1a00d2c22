"""Held kinks for any loss: the piecewise-linear sites of a jaxpr, evaluated on a held pattern.

A ReLU network's gradient field jumps wherever a pre-activation crosses a kink. To hold each step's
activation pattern fixed (as `theory.numerics.HoldArgs` does for the two-layer flows), for *any*
model, the loss is traced once to a jaxpr and re-evaluated by a small interpreter that treats every
kink site by its held side. The sites are the primitives where a smooth function of the parameters
switches branch:

- `max(x, y)` and `min(x, y)` (`jax.nn.relu`, `jnp.maximum(x, 0)`, `jnp.clip`, relu6): held
  out = where(p, x, y), with p = (x > y) (resp. x < y) at the step's start;
- `jnp.max` / `jnp.min` over axes (`reduce_max`, `reduce_min`: max-pooling): a tree of the
  pairwise max / min above, one site per level (`_Run._reduce`);
- `abs(x)`: held out = where(p, x, -x), p = (x >= 0);
- a float comparison `gt`, `ge`, `lt`, `le` (`jax.nn.leaky_relu`, `jnp.where(x > 0, ...)`):
  its boolean is held; where it selects between two branches (`select_n`) or becomes a float
  (`convert_element_type`), that use is the site's kink.

Each site has a *switching variable* z (x - y, or x) whose sign is its pattern p. Why a jaxpr
interpreter rather than an activation wrapper: the models researchers bring are written with
`jax.nn.relu`, `jnp.abs` and `jnp.where`, and `eqx.nn.MLP` takes any activation; rewriting
the traced loss finds every such site without asking the model to change. Sites inside
control flow (`scan`, `while`, `cond`) and inside custom-derivative functions other than
`jax.nn.relu` (whose rule a held evaluation would drop) are evaluated as written, not held.
Integer max/min/abs are no kinks. Smooth functions written with max or abs (softplus,
logsumexp) count as sites: held, exactly, at some cost in steps.

Blend weights w (one per site entry, 0 normally) give out = held + w (other - held), the
direction in which the true (switched) branch differs from the held one: their
Jacobian-vector product is the error of integrating a crossed kink as if it were smooth.
"""

import jax
import jax.extend.core as jex
import jax.numpy as jnp

_COMPARE = {"gt": 1, "ge": 1, "lt": -1, "le": -1}  # z = sign * (x - y)
_MINMAX = {"max": 1, "min": -1}
_REDUCE = {"reduce_max": "max", "reduce_min": "min"}  # held as trees of pairwise max / min
_CALL = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr"}
_CUSTOM = {"custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr"}
# custom-derivative functions whose rule is the derivative of their held branches (relu's
# relu'(0) = 0): inlined. Any other custom rule is kept, its call bound as it is (a site
# inside it is then not held: interpreting its primal would drop a surrogate gradient).
_INLINED_CUSTOM = {"relu"}


def _inlined(name, params) -> bool:
    """A custom-derivative call that is interpreted (its held branches give its rule)."""
    if name not in _CUSTOM or _CUSTOM[name] not in params:
        return False
    info = getattr(_closed(params[_CUSTOM[name]])[0], "debug_info", None)
    return getattr(info, "func_name", None) in _INLINED_CUSTOM


def _float(var) -> bool:
    return jnp.issubdtype(var.aval.dtype, jnp.floating)


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


def _has_site(jaxpr) -> bool:
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        kinked = name in _MINMAX or name in _REDUCE or name == "abs" or name in _COMPARE
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

    def _site(self, pattern, z):
        """Register a site; returns its held pattern and its blend weight (or None)."""
        index = len(self.patterns)
        if self.held is not None:
            pattern = self.held[index]
        self.patterns.append(pattern)
        self.switches.append(z)
        weight = None if self.weights is None else self.weights[index]
        return pattern, weight, index

    def _pair(self, sign, x, y):
        """max(x, y) (sign 1) or min(x, y) (sign -1) as a site: z = sign (x - y)."""
        z = sign * (x - y)
        pattern, weight, _ = self._site(z > 0, z)
        out = jnp.where(pattern, x, y)
        if weight is not None:
            out = _blend(out, weight, jnp.where(pattern, y, x))
        return out

    def _reduce(self, sign, x, axes, shape):
        """A max / min over `axes` (max-pooling, `jnp.max`) as a tree of pairwise ones: the
        reduced axes flattened to one of length L, its halves compared entry by entry, one site
        per level (ceil(log2 L) sites, L - 1 entries per output). The same value, each argmax
        change a kink of one site entry, held and slid like any other."""
        keep = [a for a in range(x.ndim) if a not in axes]
        x = jnp.transpose(x, tuple(axes) + tuple(keep))
        x = x.reshape((-1,) + tuple(x.shape[len(axes) :]))
        while x.shape[0] > 1:
            half = x.shape[0] // 2
            paired = self._pair(sign, x[:half], x[half : 2 * half])
            x = jnp.concatenate([paired, x[2 * half :]]) if x.shape[0] % 2 else paired
        return x[0].reshape(shape)

    def eval(self, jaxpr, consts, args, tags=None):
        env, site_of = {}, {}

        def read(v):
            return v.val if isinstance(v, jex.Literal) else env[v]

        for v, x in zip(jaxpr.constvars, consts, strict=True):
            env[v] = x
        for i, (v, x) in enumerate(zip(jaxpr.invars, args, strict=True)):
            env[v] = x
            if tags is not None and tags[i] is not None:
                site_of[v] = tags[i]
        for eqn in jaxpr.eqns:
            outs, out_tag = self._eqn(eqn, [read(v) for v in eqn.invars], site_of)
            if eqn.primitive.name == "not" and _tag(site_of, eqn.invars[0]) is not None:
                out_tag = site_of[eqn.invars[0]]
            for v, x in zip(eqn.outvars, outs, strict=True):
                if not isinstance(v, jex.DropVar):
                    env[v] = x
                    if out_tag is not None:
                        site_of[v] = out_tag
        return [read(v) for v in jaxpr.outvars]

    def _eqn(self, eqn, invals, site_of):
        """The outputs of one equation, and the site whose held boolean they carry (or None)."""
        name, params = eqn.primitive.name, eqn.params
        shape = eqn.outvars[0].aval.shape
        if name in _MINMAX and _float(eqn.outvars[0]):
            x, y = (jnp.broadcast_to(v, shape) for v in invals)
            return [self._pair(_MINMAX[name], x, y)], None
        if name in _REDUCE and _float(eqn.outvars[0]):
            return [self._reduce(_MINMAX[_REDUCE[name]], invals[0], params["axes"], shape)], None
        if name == "abs" and _float(eqn.outvars[0]):
            (x,) = invals
            pattern, weight, _ = self._site(x >= 0, x)
            out = jnp.where(pattern, x, -x)
            if weight is not None:
                out = _blend(out, weight, -out)
            return [out], None
        if name in _COMPARE and _float(eqn.invars[0]):
            x, y = (jnp.broadcast_to(v, shape) for v in invals)
            z = _COMPARE[name] * (x - y)
            held = eqn.primitive.bind(x, y, **params)
            pattern, _, index = self._site(held, z)
            return [pattern], index
        if name == "select_n" and len(invals) == 3 and _tag(site_of, eqn.invars[0]) is not None:
            pred, *cases = invals
            index = _tag(site_of, eqn.invars[0])
            out = jax.lax.select_n(pred, *cases)
            if self.weights is not None:
                weight = jnp.broadcast_to(self.weights[index], jnp.shape(pred))
                out = _blend(out, weight, jax.lax.select_n(~pred, *cases))
            return [out], None
        if name == "convert_element_type" and _tag(site_of, eqn.invars[0]) is not None:
            (pred,) = invals
            index = _tag(site_of, eqn.invars[0])
            out = eqn.primitive.bind(pred, **params)
            if self.weights is not None and _float(eqn.outvars[0]):
                out = _blend(out, self.weights[index], eqn.primitive.bind(~pred, **params))
            return [out], None
        key = _CALL.get(name)
        if key is None and _inlined(name, params):
            key = _CUSTOM[name]
        if key is not None and key in params:
            inner, consts = _closed(params[key])
            skip = params.get("num_consts", 0) if name in _CUSTOM else 0
            tags = [_tag(site_of, v) for v in eqn.invars[skip:]]
            return self.eval(inner, consts, invals[skip:], tags), None
        out = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(params))
        return (out if eqn.primitive.multiple_results else [out]), None


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
