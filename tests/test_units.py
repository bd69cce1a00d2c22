"""Per-unit log scales (`integrators._units`): neuron labels of the engine's nets."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from integrators import gradient_flow


def test_neuron_units_of_the_teacher_student_and_leaky_nets():
    # the engine's own teacher-student TwoLayerNet was refused
    from dynamics import LeakyReLUNet, TwoLayerNet
    from integrators import neuron_units

    W = 1e-6 * jax.random.normal(jax.random.PRNGKey(0), (3, 2))
    student = TwoLayerNet(W, 1e-6 * jnp.ones(3), b=1e-6 * jnp.ones(3))
    units = neuron_units(student)
    assert units.b.tolist() == units.a.tolist() == [0, 1, 2]
    assert units.W.tolist() == [[0, 0], [1, 1], [2, 2]]
    assert neuron_units(LeakyReLUNet(W, jnp.ones(3), gamma=0.5)).W.tolist() == units.W.tolist()


@pytest.mark.slow
def test_neuron_units_flow_of_a_teacher_student_net_at_small_init():
    from dynamics import TwoLayerNet
    from dynamics.unchecked import teacher_student_loss
    from integrators import neuron_units

    teacher = TwoLayerNet(jnp.eye(2), jnp.ones(2), b=jnp.array([0.1, -0.2]))
    W = 1e-6 * jax.random.normal(jax.random.PRNGKey(0), (3, 2))
    student = TwoLayerNet(W, 1e-6 * jnp.ones(3), b=1e-6 * jnp.ones(3))
    units = neuron_units(student)
    ts = jnp.linspace(0.0, 40.0, 5)
    kw = dict(args=teacher, hold_kinks=False, time_scale=jnp.log(1e6))
    sol = gradient_flow(student, teacher_student_loss, ts, units=units, **kw)
    ref = gradient_flow(student, teacher_student_loss, ts, atol=1e-14, rtol=1e-11, **kw)
    assert sol.ok and ref.ok
    np.testing.assert_allclose(sol.loss, ref.loss, rtol=1e-5)
