import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from integrators import gradient_flow
from integrators._kinks import KinkedFunction


def _activations(x):
    return (
        jnp.sum(jax.nn.relu(x))
        + jnp.sum(jax.nn.leaky_relu(x, 0.1))
        + jnp.sum(jnp.abs(x))
        + jnp.sum(jnp.where(x > 0, x * x, 0.0))
        + jnp.sum(jnp.clip(x, -0.5, 0.5))
    )


def test_held_pattern_is_exact_at_the_recording_point_and_linear_past_it():
    f = KinkedFunction(_activations, jnp.zeros(3))
    assert f.num_sites == 6  # relu, leaky (ge), abs, where (gt), clip (max and min)
    x = jnp.array([1.0, -1.0, 0.25])
    pattern, _ = f.record(x)
    np.testing.assert_allclose(f.held(pattern, None, x), _activations(x))
    np.testing.assert_allclose(
        jax.grad(lambda v: f.held(pattern, None, v))(x), jax.grad(_activations)(x)
    )
    # past the kinks the held function continues each branch: relu(-0.5) held live is -0.5
    moved = jnp.array([-0.5, 0.5, 0.25])
    by_hand = (-0.5 + 0.25) + (-0.5 + 0.05 + 0.25) + (-0.5 - 0.5 + 0.25)
    by_hand += 0.25 + 0.0 + 0.0625 + (-0.5 + 0.5 + 0.25)
    np.testing.assert_allclose(f.held(pattern, None, moved), by_hand)


def test_blend_weights_move_each_site_to_its_other_branch():
    f = KinkedFunction(lambda x: jnp.sum(jax.nn.relu(x)) + jnp.sum(jnp.abs(x)), jnp.zeros(2))
    x = jnp.array([2.0, -3.0])
    pattern, z = f.record(x)
    ones = [jnp.ones_like(s) for s in z]
    # at weight 1 every site takes its other branch: relu -> 0 or x, abs -> -|x|
    np.testing.assert_allclose(f.held(pattern, ones, x), (0.0 - 3.0) + (-2.0 - 3.0))


def test_sites_inside_an_equinox_mlp_and_under_jit():
    mlp = eqx.nn.MLP(3, 1, 4, 2, activation=jax.nn.relu, key=jax.random.PRNGKey(0))
    X = jax.random.normal(jax.random.PRNGKey(1), (5, 3))

    def loss(params, X):
        model = eqx.combine(params, eqx.filter(mlp, eqx.is_inexact_array, inverse=True))
        return jnp.mean(jax.vmap(model)(X) ** 2)

    params = eqx.filter(mlp, eqx.is_inexact_array)
    f = KinkedFunction(loss, params, X)
    assert f.num_sites == 2  # one relu per hidden layer, batched by vmap
    pattern, z = jax.jit(f.record)(params, X)
    assert pattern[0].shape == (5, 4) and z[1].shape == (5, 4)
    np.testing.assert_allclose(jax.jit(f.held)(pattern, None, params, X), loss(params, X))


def test_review_cases_infinite_branches_integer_sites_and_custom_rules():
    x = jnp.array([1.0, -2.0, 0.5])
    # log_softmax holds max(-inf, max x): a zero blend weight must not make it NaN
    f = KinkedFunction(lambda v: jnp.sum(jax.nn.log_softmax(v)), x)
    pattern, z = f.record(x)
    zeros = [jnp.zeros_like(s) for s in z]
    np.testing.assert_allclose(f.held(pattern, zeros, x), jnp.sum(jax.nn.log_softmax(x)))
    # integer max is no kink
    g = KinkedFunction(lambda v: jnp.sum(v * jnp.maximum(jnp.arange(3) - 1, 1)), x)
    assert g.num_sites == 0

    # a custom derivative rule (a surrogate gradient) is kept, not interpreted away
    @jax.custom_jvp
    def spike(u):
        return jnp.where(u > 0, 1.0, 0.0)

    spike.defjvp(lambda p, t: (spike(p[0]), 0.5 * t[0]))
    h = KinkedFunction(lambda v: jnp.sum(spike(v)), x)
    pattern, _ = h.record(x)
    np.testing.assert_allclose(jax.grad(lambda v: h.held(pattern, None, v))(x), 0.5)


def test_max_pooling_is_held_as_a_tree_of_pairwise_max_sites():
    # jnp.max / jnp.min over axes (reduce_max, reduce_min): a conv net's global max-pool was
    # evaluated as written, its argmax switching inside held steps unseen (a Conv1d + max-pool
    # net ended ok 2.8% off gradient descent extrapolated)
    def pooled(x):
        return jnp.sum(jnp.max(x, axis=1)) + jnp.sum(jnp.min(x, axis=(0, 1)))

    x = jnp.array([[0.3, -1.0, 2.0, 0.5, 0.1], [1.5, 0.2, -0.4, 1.6, 0.0]])
    f = KinkedFunction(pooled, x)
    assert f.num_sites == 3 + 4  # ceil(log2 5) levels over axis 1, ceil(log2 10) over both
    pattern, z = f.record(x)
    np.testing.assert_allclose(f.held(pattern, None, x), pooled(x))
    np.testing.assert_allclose(jax.grad(lambda v: f.held(pattern, None, v))(x), jax.grad(pooled)(x))
    # held, the argmax stays where it was: row 1's max (held at 1.6) follows entry (1, 3)
    moved = x.at[1, 0].set(3.0)
    by_hand = 2.0 + 1.6 + (-1.0)
    np.testing.assert_allclose(f.held(pattern, None, moved), by_hand)


def test_an_exact_tie_of_a_max_is_broken_by_what_its_branches_clamp():
    # max over relu(h): where two entries are both clamped at 0 the pool's values tie exactly;
    # the branch taken is the one whose pre-activation is nearer its kink (the one that can
    # become the max), not the second by convention: a relu sliding at h = -1e-13 inside the
    # pool otherwise had its gradient cut (a pooled flow ended ok and wrong)
    def pooled(h):
        return jnp.max(jax.nn.relu(h).reshape(2, 2), axis=(0, 1))  # the shadow follows reshapes

    h = jnp.array([-1.0, -2.0, -0.5, -1e-13])
    f = KinkedFunction(pooled, h)
    pattern, z = f.record(h)
    relu, *levels = pattern
    assert not relu.any() and all(float(s) == 0.0 for lv in z[1:] for s in jnp.ravel(lv))
    # the relu sliding at -1e-13 (entry 3), blended halfway, is what the held pool follows
    weights = [jnp.array([0.0, 0.0, 0.0, 0.5])] + [jnp.zeros_like(s) for s in z[1:]]
    grad = jax.grad(lambda v: f.held(pattern, weights, v))(h)
    np.testing.assert_allclose(grad, [0.0, 0.0, 0.0, 0.5])
    # a constant moved into the pool (padding, a concatenated zero) never wins the tie, and a
    # relu written as jnp.clip(h, 0) breaks it by its pre-activation too
    a = jnp.array([-1e-13, -5.0])
    for fn in (
        lambda v: jnp.max(jnp.pad(jax.nn.relu(v[:1]), (1, 0))),
        lambda v: jnp.max(jnp.concatenate([jnp.zeros(1), jax.nn.relu(v[:1])])),
    ):
        pattern, _ = KinkedFunction(fn, a).record(a)
        assert not bool(pattern[-1][0])  # the second branch: the relu
    pattern, _ = KinkedFunction(lambda v: jnp.max(jnp.clip(v, 0.0)), a).record(a)
    assert bool(pattern[-1][0])  # the first entry, -1e-13 from its kink, not -5
    # saturated relu6 entries tie at 6: the pool keeps the one deepest past its kink
    g = KinkedFunction(lambda v: jnp.max(jax.nn.relu6(v)), jnp.zeros(2))
    assert g.num_sites == 3  # relu6's max and min (its custom rule is its branches'), the pool
    pattern, _ = g.record(jnp.array([7.0, 9.0]))
    assert not bool(pattern[-1][0])  # the second branch (9 > 7)
    pattern, _ = g.record(jnp.array([9.0, 7.0]))
    assert bool(pattern[-1][0])
    # a value against a constant keeps its convention at an exact 0: relu(0) is held inactive
    pattern, _ = KinkedFunction(lambda v: jnp.sum(jax.nn.relu(v)), h).record(jnp.zeros(4))
    assert not pattern[0].any()


def test_pooling_windows_are_held_as_trees_of_pairwise_max_sites():
    # eqx.nn.MaxPool2d (reduce_window_max, with stride and padding) was evaluated as written:
    # its argmax switched inside held steps unseen, as jnp.max's had
    pool = eqx.nn.MaxPool2d(kernel_size=3, stride=2, padding=1)

    def pooled(x):
        return jnp.sum(pool(jax.nn.relu(x)) ** 2) + jnp.sum(
            -jax.lax.reduce_window(
                -x, -jnp.inf, jax.lax.max, (1, 2, 1), (1, 1, 2), "VALID", base_dilation=(1, 2, 1)
            )
        )

    x = jax.random.normal(jax.random.PRNGKey(3), (2, 5, 6))
    f = KinkedFunction(pooled, x)
    assert f.num_sites == 1 + 4 + 1  # the relu, ceil(log2 9) levels, then ceil(log2 2)
    pattern, z = jax.jit(f.record)(x)  # (compiled: the interpreter op by op is slow)
    held = jax.jit(jax.value_and_grad(lambda v, p: f.held(p, None, v)))
    value, grad = held(x, pattern)
    np.testing.assert_allclose(value, pooled(x), rtol=1e-6)
    np.testing.assert_allclose(grad, jax.grad(pooled)(x), rtol=1e-6)
    # held, each window keeps its argmax: raising another entry past it changes nothing held
    # of the pool (window (0, 0, 0) is rows 0-1 and columns 0-1, after the padding)
    top = jnp.argmax(jax.nn.relu(x[0, :2, :2]))
    other = (0, 1 - top // 2, 1 - top % 2)
    moved = x.at[other].set(10.0)
    assert float(held(moved, pattern)[0]) < float(pooled(moved)) - 50.0


def test_clamp_is_held_and_kinks_that_are_not_are_named():
    x = jnp.array([-2.0, 0.3, 0.9, 1.7])

    def clamped(v):
        return jnp.sum(jax.lax.clamp(-1.0, v, 1.0) ** 2)

    f = KinkedFunction(clamped, x)
    assert f.num_sites == 2 and f.unheld == ()
    pattern, _ = f.record(x)
    moved = x.at[0].set(-0.5)  # held below its clamp: the constant -1 still
    np.testing.assert_allclose(f.held(pattern, None, moved), clamped(x))
    # sort, argmax and a relu inside a scan are evaluated as written: named, and warned of
    for fn, name in [
        (jnp.sort, "sort"),
        (lambda v: v[jnp.argmax(v)], "argmax"),
        (lambda v: jax.lax.scan(lambda c, u: (c + jax.nn.relu(u), None), 0.0, v)[0], "scan"),
    ]:
        assert KinkedFunction(lambda v, fn=fn: jnp.sum(fn(v)), x).unheld == (name,)
    # smooth ones are not: softplus's max sits in logaddexp's own rule, floor on a constant
    assert KinkedFunction(lambda v: jnp.sum(jax.nn.softplus(v)), x).unheld == ()
    assert KinkedFunction(lambda v: jnp.sum(v) * jnp.floor(2.5), x).unheld == ()

    class Sorted(eqx.Module):
        w: jax.Array

    with pytest.warns(UserWarning, match=r"not held \(sort\)"):
        gradient_flow(Sorted(x), lambda m, a: jnp.sum(jnp.sort(m.w) * jnp.arange(4.0)),
                      jnp.linspace(0.0, 0.1, 2))  # fmt: skip
