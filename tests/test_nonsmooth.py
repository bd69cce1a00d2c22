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


def _pairs():
    """Every (side, value) combination: a held side for each value, both ways."""
    side = jnp.concatenate([jnp.ones(VALUES.size, bool), jnp.zeros(VALUES.size, bool)])
    return side, jnp.concatenate([VALUES, VALUES])


def test_the_gap_and_the_direction_are_the_flows_former_expressions():
    side, z = _pairs()
    # `gradient_flow`'s u = where(pattern, -z, z) (how far past the kink) is -kink_gap
    np.testing.assert_array_equal(-N.kink_gap(side, z), jnp.where(side, -z, z))
    mode = jnp.where(side, N.ACTIVE, N.INACTIVE)
    # `two_layer_flow`'s distance of an entry off its kink and its "moves towards it"
    np.testing.assert_array_equal(
        N.kink_gap(mode == N.ACTIVE, z), jnp.where(mode == N.ACTIVE, z, -z)
    )
    old = ((mode == N.ACTIVE) & (z < 0)) | ((mode == N.INACTIVE) & (z > 0))
    np.testing.assert_array_equal(N.toward_kink(mode == N.ACTIVE, z), old)


def test_the_box_rules_are_the_flows_former_expressions():
    w = VALUES
    np.testing.assert_array_equal(N.box_gap(w), jnp.minimum(w, 1.0 - w))
    np.testing.assert_array_equal(N.box_violation(w), jnp.maximum(w - 1.0, -w))
    # `gradient_flow`'s pin test and its reuse test, `two_layer_flow`'s release test
    np.testing.assert_array_equal(N.box_violation(w) > 0, (w < 0) | (w > 1))
    np.testing.assert_array_equal(N.box_gap(w) >= 0, (w >= 0) & (w <= 1))
    assert not bool(N.box_violation(jnp.array(jnp.nan)) > 0)  # NaN never leaves by itself
    np.testing.assert_array_equal(N.finite_or(w, 2.0), jnp.where(jnp.isfinite(w), w, 2.0))


def test_the_smallest_size_that_holds_a_set():
    sizes = (8, 16, 32)
    got = [int(N.smallest_holding(sizes, c)) for c in (0, 8, 9, 16, 17, 32, 33)]
    assert got == [0, 0, 1, 1, 2, 2, 3]  # len(sizes): none holds it (callers clamp)
