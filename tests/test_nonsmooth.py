"""The nonsmooth layer's shared rules (`integrators._nonsmooth`), held against the expressions
each flow wrote before they were shared: bit for bit, at the values where a rewrite could
differ (both zeros, the box's ends and their neighbours, infinities, NaN)."""

import jax.numpy as jnp
import numpy as np

from integrators import _nonsmooth as N

VALUES = jnp.array(
    [0.0, -0.0, 1.0, -1.0, 0.5, np.nextafter(1.0, 2.0), np.nextafter(1.0, 0.0), 5e-324,
     -5e-324, 2.0, -3.5, 1e300, -1e300, np.inf, -np.inf, np.nan],
    dtype=jnp.float64,
)  # fmt: skip


def _same_bits(a, b):
    """Equal to the bit (-0.0 is not 0.0; NaN is NaN): float64 compared as int64."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype
    if a.dtype == np.float64:
        a, b = a.view(np.int64), b.view(np.int64)
    np.testing.assert_array_equal(a, b)


def _pairs():
    """Every (side, value) combination: a held side for each value, both ways."""
    side = jnp.concatenate([jnp.ones(VALUES.size, bool), jnp.zeros(VALUES.size, bool)])
    return side, jnp.concatenate([VALUES, VALUES])


def test_the_gap_and_the_direction_are_the_flows_former_expressions():
    side, z = _pairs()
    # `gradient_flow`'s u = where(pattern, -z, z) (how far past the kink) is -kink_gap
    _same_bits(-N.kink_gap(side, z), jnp.where(side, -z, z))
    mode = jnp.where(side, N.ACTIVE, N.INACTIVE)
    # `two_layer_flow`'s distance of an entry off its kink and its "moves towards it"
    old = ((mode == N.ACTIVE) & (z < 0)) | ((mode == N.INACTIVE) & (z > 0))
    np.testing.assert_array_equal(N.toward_kink(mode == N.ACTIVE, z), old)


def test_two_layer_flows_distance_in_every_mode_is_its_former_expression():
    from integrators._two_layer_field import _distance_of

    z = jnp.concatenate([VALUES] * 3)
    mode = jnp.repeat(jnp.array([N.ACTIVE, N.INACTIVE, N.SLIDING]), VALUES.size)
    sigma = jnp.roll(z, 5)  # any weights, the box's ends and NaN among them
    old = jnp.where(
        mode == N.ACTIVE, z, jnp.where(mode == N.INACTIVE, -z, jnp.minimum(sigma, 1.0 - sigma))
    )
    _same_bits(_distance_of(mode, z, sigma), old)
    moving = (mode != N.SLIDING) & N.toward_kink(mode == N.ACTIVE, sigma)
    old = ((mode == N.ACTIVE) & (sigma < 0)) | ((mode == N.INACTIVE) & (sigma > 0))
    np.testing.assert_array_equal(moving, old)


def test_the_box_rules_are_the_flows_former_expressions():
    w = VALUES
    _same_bits(N.box_gap(w), jnp.minimum(w, 1.0 - w))
    _same_bits(N.box_violation(w), jnp.maximum(w - 1.0, -w))
    # `gradient_flow`'s pin test and its reuse test, `two_layer_flow`'s release test
    np.testing.assert_array_equal(N.box_violation(w) > 0, (w < 0) | (w > 1))
    np.testing.assert_array_equal(N.box_gap(w) >= 0, (w >= 0) & (w <= 1))
    assert not bool(N.box_violation(jnp.array(jnp.nan)) > 0)  # NaN never leaves by itself
    _same_bits(N.finite_or(w, 2.0), jnp.where(jnp.isfinite(w), w, 2.0))


def test_the_smallest_size_that_holds_a_set():
    sizes = (8, 16, 32)
    got = [int(N.smallest_holding(sizes, c)) for c in (0, 8, 9, 16, 17, 32, 33)]
    assert got == [0, 0, 1, 1, 2, 2, 3]  # len(sizes): none holds it (callers clamp)
