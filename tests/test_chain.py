"""The saddle chain of a trajectory (`integrators._chain`): a flow's plateaus polished to
certified saddles, and the angle at which the flow leaves them."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from integrators import gradient_flow, neuron_units, saddle_chain


def test_the_first_plateau_of_a_small_tanh_net_is_the_origin_saddle_left_along_u():
    # from init 1e-4 a 3-3-1 tanh net (no biases) lingers at the origin: a critical point
    # whose index is its number of hidden units (one negative curvature per unit's (a, w)
    # pair); the flow leaves it within 1e-3 rad of its unstable subspace (measured 8.3e-4)
    k = jax.random.split(jax.random.PRNGKey(1), 2)
    X = jax.random.normal(k[0], (64, 3))
    y = jnp.tanh(X @ jnp.array([1.0, -0.5, 0.3])) + 0.5 * jnp.tanh(X @ jnp.array([-0.2, 0.8, 0.6]))
    mlp = eqx.nn.MLP(3, 1, 3, 1, activation=jnp.tanh, use_bias=False, use_final_bias=False,
                     key=k[1])  # fmt: skip
    mlp = jax.tree_util.tree_map(lambda x: 1e-4 * x if eqx.is_inexact_array(x) else x, mlp)

    def loss(m, data):
        return 0.5 * jnp.mean((jax.vmap(m)(data[0])[:, 0] - data[1]) ** 2)

    ts = jnp.linspace(0.0, 40.0, 401)
    sol = gradient_flow(mlp, loss, ts, args=(X, y), save_trajectory=True,
                        units=neuron_units(mlp))  # fmt: skip
    chain = saddle_chain(sol, loss, args=(X, y))
    first = chain[0]
    assert first["ok"] and first["grad_norm"] <= 1e-12
    assert first["morse_index"] == 3 and first["unstable"].shape == (3, 12)
    assert first["escape_angle"] < 1e-2
    np.testing.assert_allclose(first["loss"], 0.5 * float(jnp.mean(y**2)), rtol=1e-12)
    # the flow's own gradient where the plateau was read, from the saved trajectory
    i = int(np.argmin(np.abs(np.asarray(sol.ts) - first["time"])))
    at = jax.tree_util.tree_map(lambda x: x[i] if eqx.is_array(x) else x, sol.trajectory)
    g = jax.flatten_util.ravel_pytree(eqx.filter_grad(loss)(at, (X, y)))[0]
    np.testing.assert_allclose(first["flow_grad_norm"], float(jnp.linalg.norm(g)), rtol=1e-12)
    with pytest.raises(ValueError, match="save_trajectory"):
        saddle_chain(gradient_flow(mlp, loss, ts, args=(X, y)), loss, args=(X, y))


@pytest.mark.slow
def test_orthonormal_saddles_are_algorithm_ones_polished_on_their_piece():
    # a two-layer ReLU net's plateau on orthonormal data rests on kinks; Newton on the smooth
    # loss crossed them to another critical point (0.025 from Algorithm 1's saddle at any
    # alpha). Polished on the plateau's activation piece, each saddle is Algorithm 1's: the
    # distance falls with alpha (4.3e-7 at 1e-8, 5e-13 at 1e-16); the index counts the
    # neurons not yet fired whose support holds an unfitted sample (5 at the origin, 2 after
    # two jumps: one neuron's support was fitted by the others)
    from benchmarks.saddle_chain import orthonormal_chain

    rows, _ = orthonormal_chain(1e-16, 1)
    assert all(r["ok"] and r["grad_norm"] < 1e-12 and r["morse_exact"] for r in rows)
    assert [r["jumps_before"] for r in rows] == [0, 2]
    assert [r["morse_index"] for r in rows] == [5, 2]
    assert all(r["distance_to_prediction"] < 1e-6 for r in rows)
    coarse, _ = orthonormal_chain(1e-8, 1)
    assert coarse[-1]["distance_to_prediction"] > rows[-1]["distance_to_prediction"]


@pytest.mark.slow
def test_a_relu_chain_takes_the_librarys_square_loss():
    # the piece model is a TwoLayerReLU: dynamics.square_loss, which checks for one, refused
    # it ("model must be a TwoLayerReLU, got _OnPiece")
    import numpy as np

    from dynamics import TwoLayerReLU, square_loss
    from integrators import orthogonal_flow

    X, y = jnp.eye(4), jnp.array([1.0, 0.5, -0.7, 0.3])
    U = jax.random.normal(jax.random.PRNGKey(0), (3, 4))
    U = U / jnp.linalg.norm(U, axis=1, keepdims=True)
    s, alpha = jnp.array([1.0, -1.0, 1.0]), 1e-12
    sol = orthogonal_flow(X, y, TwoLayerReLU(alpha * s, alpha * U), jnp.linspace(0, 10.0, 201),
                          time_scale=np.log(1 / alpha), save_trajectory=True)  # fmt: skip
    rows = saddle_chain(sol, square_loss, args=(X, y))
    assert rows and all(r["ok"] for r in rows) and rows[0]["morse_index"] >= 1
