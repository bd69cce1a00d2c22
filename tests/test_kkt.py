"""KKT residuals (`theory._kkt`): a certificate of GD's limit direction, refused where it does not
separate."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics import gaussian_mixture


@pytest.mark.slow
def test_kkt_residual_certifies_gd_limit_and_refuses_non_separating():
    from dynamics import small_leaky_init
    from integrators import margin_gradient_descent
    from theory import kkt_residual

    X, y, _, _ = gaussian_mixture(12, 20, signal=3.0, key=jax.random.PRNGKey(0), dtype=jnp.float64)
    net = small_leaky_init(6, 20, 0.1, scale=1e-8, key=jax.random.PRNGKey(1), dtype=jnp.float64)
    sol = margin_gradient_descent(
        X, y, net, learning_rate=0.05, max_steps=20_000, normalized=True, num_checkpoints=8
    )
    res = jax.vmap(lambda W: kkt_residual(W, net.a, X, y, 0.1))(sol.trajectory.W)
    late = np.asarray(res.residual)[-4:]
    assert np.all(np.diff(late) < 0) and late[-1] < 1e-3  # GD approaches a KKT point
    assert np.all(np.asarray(res.multipliers) >= 0)
    # a W that does not separate the data has no KKT residual, and says so
    bad = kkt_residual(-sol.trajectory.W[-1], net.a, X, y, 0.1)
    assert not bool(bad.ok) and bool(jnp.isinf(bad.residual))
