"""Growing sliding capacity (`integrators._capacity`): a solve regrows its slots, or max_sliding
caps them."""

import jax.numpy as jnp
import numpy as np
from test_sliding import _zero_linear

from integrators import gradient_flow


def test_sliding_entries_beyond_the_first_slots_regrow_and_max_sliding_caps_them():
    # entry i reaches its kink at t = c_i = (i + 1) / 20 and slides there: 40 entries pass
    # the first 32 slots at t ~ 1.65, and the solve goes on with more
    c = 0.05 * jnp.arange(1, 41)

    def loss(m, args):
        return jnp.sum(jnp.abs(m.weight[:, 0] - c))

    ts = jnp.linspace(0.0, 2.5, 6)
    sol = gradient_flow(_zero_linear(40), loss, ts)
    assert sol.ok and int(sol.stats["regrown"]) == 1 and int(sol.stats["max_sliding"]) == 40
    # d w_i/dt = 1 until w_i = c_i, then w_i stays there (each within 1e-7, the sum's
    # terms too): loss(t) = sum_i max(c_i - t, 0)
    np.testing.assert_allclose(sol.model.weight[:, 0], c, atol=1e-7)
    np.testing.assert_allclose(sol.loss, jnp.sum(jnp.maximum(c[None] - ts[:, None], 0), 1),
                               atol=40 * 1e-7)  # fmt: skip
