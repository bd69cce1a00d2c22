"""The nonsmooth layer's shared vocabulary: the rules both kinked flows apply to an entry at a
kink, written once (the design: `docs/numerics.md`, "One nonsmooth layer").

An *entry* is one pre-activation at one sample (a site entry of `gradient_flow`'s jaxpr sites,
an entry z_ji of `two_layer_flow`'s pattern). Each is in one of three modes: on its positive
side (`ACTIVE`, the branch taken where z > 0), on its other side (`INACTIVE`), or `SLIDING` on
its kink with a Filippov weight w in [0, 1] blending the two branches. Both flows decide with
the same rules:

- how far an entry is from changing mode: `kink_gap` (its switching variable, signed so that it
  is > 0 on the held side) off the kink, `box_gap` (min(w, 1 - w)) on it;
- whether an entry off its kink moves into it: `toward_kink`;
- whether a sliding weight has left its box, and by how much: `box_violation` (> 0 outside
  [0, 1]; the entry leaves to the side it crossed, `ACTIVE` / bound 1 above, `INACTIVE` /
  bound 0 below);
- a weight that has no value in the numbers is put outside the box (`finite_or`), so that the
  flow's next decision takes the entry off the kink (`two_layer_flow`) or forms its sliding
  system afresh (`gradient_flow`);
- the linear algebra of a sliding set runs on the smallest of a ladder of sizes that holds it
  (`smallest_holding`): the compiled program has one branch per size, not one per count.

What stays with each flow is its engine (`docs/numerics.md`): `gradient_flow` holds every
entry's side for a step and charges the crossings to the error estimate, entering sliding by
chatter and solving one box problem per step on a Jacobian formed by forward-mode autodiff;
`two_layer_flow` locates each kink event in time and classifies the entries there by their
one-sided velocities, which its Gram structure gives in closed form.

>>> z = jnp.array([0.5, -0.25])
>>> kink_gap(jnp.array([True, False]), z).tolist()  # both on their held side
[0.5, 0.25]
>>> toward_kink(jnp.array([True, False]), jnp.array([-1.0, -1.0])).tolist()
[True, False]
>>> box_gap(jnp.array([0.25, 0.9])).tolist(), box_violation(jnp.array([1.5, -0.5])).tolist()
([0.25, 0.09999999999999998], [0.5, 0.5])
"""

import jax.numpy as jnp

INACTIVE, ACTIVE, SLIDING = 0, 1, 2  # an entry's mode (module docstring)


def kink_gap(positive, z):
    """How far switching variable `z` is inside its held side (> 0 inside, < 0 past its kink):
    z where the held side is the positive one (`positive`), -z where it is the other."""
    return jnp.where(positive, z, -z)


def toward_kink(positive, velocity):
    """Whether an entry held on its positive side (`positive`) or its other side moves into
    its kink: dz/dt < 0 on the positive side, > 0 on the other."""
    return jnp.where(positive, velocity < 0, velocity > 0)


def box_gap(w):
    """How far a sliding weight is inside [0, 1]: min(w, 1 - w)."""
    return jnp.minimum(w, 1.0 - w)


def box_violation(w):
    """How far a sliding weight is outside [0, 1]: max(w - 1, -w), > 0 outside (NaN stays
    NaN: no comparison makes it leave)."""
    return jnp.maximum(w - 1.0, -w)


def finite_or(w, outside):
    """`w` where finite, else `outside` (a value outside [0, 1]: module docstring)."""
    return jnp.where(jnp.isfinite(w), w, outside)


def smallest_holding(sizes, count):
    """The index of the smallest of the increasing `sizes` that holds `count` entries
    (len(sizes) where none does)."""
    return jnp.searchsorted(jnp.asarray(sizes), count)
