"""Bad input to every public function of `dynamics`: (call, exception, message fragment)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from helpers import bad_input_test, public_functions, table_rows

import dynamics as D

KEY = jax.random.PRNGKey(0)
NAN = float("nan")
NET2 = D.TwoLayerReLU(jnp.array([1.0, -1.0]), jnp.eye(2))
LEAKY = D.LeakyReLUNet(jnp.eye(2), jnp.array([1.0, -1.0]), 0.1)
MF = D.MeanFieldNet(jnp.eye(2, 4))
X64, Y6 = jnp.ones((6, 4)), jnp.ones(6)
TARGET = D.standard_target(2, 4)

DIAG = D.DiagonalNet(jnp.ones(2), jnp.ones(2))
TS_NET = D.TwoLayerNet(jnp.eye(2), jnp.ones(2))

CASES = {
    "diagonal_init": [
        (lambda: D.diagonal_init(0, 0.1), ValueError, "`d`"),
        (lambda: D.diagonal_init(3, 1.5), ValueError, "alpha"),
        (lambda: D.diagonal_init(3, 1e-30, dtype=jnp.float32), ValueError, "alpha"),
    ],
    "diagonal_loss": [
        (lambda: D.diagonal_loss(NET2, (jnp.eye(2), jnp.ones(2))), ValueError, "DiagonalNet"),
        (lambda: D.diagonal_loss(DIAG, (jnp.eye(3), jnp.ones(3))), ValueError, "`X`"),
        (lambda: D.diagonal_loss(DIAG, (jnp.eye(2), jnp.ones((2, 1)))), ValueError, "`y`"),
        (lambda: D.diagonal_loss(DIAG, jnp.eye(2)), ValueError, "(X, y)"),
        (
            lambda: D.diagonal_loss(
                D.DiagonalNet(jnp.ones(2), jnp.ones(3)), (jnp.eye(2), jnp.ones(2))
            ),
            ValueError,
            "model.v",
        ),
        (
            lambda: D.diagonal_loss(
                D.DiagonalNet(jnp.array([NAN, 1.0]), jnp.ones(2)), (jnp.eye(2), jnp.ones(2))
            ),
            ValueError,
            "model.u",
        ),
        (lambda: D.diagonal_loss(DIAG, (jnp.eye(2), jnp.array([1.0, NAN]))), ValueError, "`y`"),
        (lambda: D.diagonal_loss(DIAG, (jnp.zeros((0, 2)), jnp.zeros(0))), ValueError, "sample"),
    ],
    "teacher_student_loss": [
        (lambda: D.teacher_student_loss(NET2, TS_NET), ValueError, "TwoLayerNet"),
        (
            lambda: D.teacher_student_loss(TS_NET, D.TwoLayerNet(jnp.eye(3), jnp.ones(3))),
            ValueError,
            "teacher.W",
        ),
        (
            lambda: D.teacher_student_loss(D.TwoLayerNet(jnp.eye(2), jnp.ones(3)), TS_NET),
            ValueError,
            "model.a",
        ),
        (
            lambda: D.teacher_student_loss(
                D.TwoLayerNet(jnp.eye(2), jnp.ones(2), jnp.ones(3)), TS_NET
            ),
            ValueError,
            "model.b",
        ),
        (
            lambda: D.teacher_student_loss(D.TwoLayerNet(jnp.eye(2) * NAN, jnp.ones(2)), TS_NET),
            ValueError,
            "model.W",
        ),
        (
            lambda: D.teacher_student_loss(
                D.TwoLayerNet(jnp.eye(2), jnp.ones(2), activation="swish2"), TS_NET
            ),
            ValueError,
            "activation",
        ),
        (
            lambda: D.teacher_student_loss(D.TwoLayerNet(jnp.zeros((0, 2)), jnp.ones(0)), TS_NET),
            ValueError,
            "unit",
        ),
        (lambda: D.teacher_student_loss(TS_NET, TS_NET, nodes=2), ValueError, "nodes"),
        (lambda: D.teacher_student_loss(TS_NET, TS_NET, nodes=8.5), ValueError, "nodes"),
        # numpy's weights overflow from 380 nodes (the loss was nan)
        (lambda: D.teacher_student_loss(TS_NET, TS_NET, nodes=400), ValueError, "nodes"),
        # second moments past float's range (the loss was nan)
        (
            lambda: D.teacher_student_loss(D.TwoLayerNet(jnp.eye(2) * 1e200, jnp.ones(2)), TS_NET),
            ValueError,
            "overflows",
        ),
    ],
    "teacher_student_quadrature_error": [
        (lambda: D.teacher_student_quadrature_error(TS_NET, NET2), ValueError, "TwoLayerNet"),
        (lambda: D.teacher_student_quadrature_error(TS_NET, TS_NET, nodes=0), ValueError, "nodes"),
    ],
    "diagonal_units": [(lambda: D.diagonal_units(NET2), ValueError, "DiagonalNet")],
    "orthogonal_data": [
        (lambda: D.orthogonal_data(5, 4, key=KEY), ValueError, "`d`"),
        (lambda: D.orthogonal_data(5, key=KEY, labels="binary"), ValueError, "`labels`"),
        (lambda: D.orthogonal_data(0, key=KEY), ValueError, "`n`"),
        (lambda: D.orthogonal_data(2.5, key=KEY), ValueError, "`n`"),
    ],
    "check_margin_loss": [(lambda: D.check_margin_loss("hinge"), ValueError, "loss")],
    "fixed_second_layer": [(lambda: D.fixed_second_layer(1), ValueError, "`m`")],
    "leaky_relu": [(lambda: D.leaky_relu(jnp.ones(2), 1.5), ValueError, "gamma")],
    "log_margin_loss": [
        (lambda: D.log_margin_loss(jnp.ones((1, 3))), ValueError, "margins"),
        (lambda: D.log_margin_loss(jnp.ones(3), "hinge"), ValueError, "loss"),
    ],
    "margin_loss": [
        (lambda: D.margin_loss(jnp.ones((1, 3))), ValueError, "margins"),
        (lambda: D.margin_loss(jnp.ones(3), "squared"), ValueError, "loss"),
    ],
    "small_leaky_init": [
        (lambda: D.small_leaky_init(4, 10, 0.1, scale=-1.0, key=KEY), ValueError, "scale"),
        (lambda: D.small_leaky_init(4, 10, 1.0, scale=1.0, key=KEY), ValueError, "gamma"),
        (lambda: D.small_leaky_init(4, 0, 0.1, scale=1.0, key=KEY), ValueError, "`d`"),
    ],
    "gaussian_mixture": [
        (
            lambda: D.gaussian_mixture(6, 10, signal=1.0, key=KEY, noise="cauchy"),
            ValueError,
            "noise",
        ),
        (
            lambda: D.gaussian_mixture(6, 10, signal=1.0, key=KEY, label_noise=np.float32(0.7)),
            ValueError,
            "label_noise",
        ),
        (lambda: D.gaussian_mixture(6, 10, signal=NAN, key=KEY), ValueError, "signal"),
        (lambda: D.gaussian_mixture(np.int64(0), 10, signal=1.0, key=KEY), ValueError, "`n`"),
        (
            lambda: D.gaussian_mixture(6, 10, signal=1.0, key=KEY, noise="student_t", dof=2.0),
            ValueError,
            "dof",
        ),
    ],
    "projected_test_error": [
        (
            lambda: D.projected_test_error(LEAKY, key=KEY, signal=1.0, num_samples=0),
            ValueError,
            "num_samples",
        ),
        (lambda: D.projected_test_error(LEAKY, key=KEY, signal=NAN), ValueError, "signal"),
        (
            lambda: D.projected_test_error(LEAKY, key=KEY, signal=jnp.ones(2)),
            ValueError,
            "signal",
        ),
        (
            lambda: D.projected_test_error(
                D.LeakyReLUNet(jnp.eye(2), jnp.array([NAN, 1.0]), 0.1), key=KEY, signal=1.0
            ),
            ValueError,
            "model.a",
        ),
        (
            lambda: D.projected_test_error(LEAKY, key=KEY, signal=1.0, noise_scale=0.0),
            ValueError,
            "noise_scale",
        ),
    ],
    "sampled_test_error": [
        (
            lambda: D.sampled_test_error(LEAKY, key=KEY, signal=1.0, num_batches=0),
            ValueError,
            "num_batches",
        ),
        (
            lambda: D.sampled_test_error(LEAKY, key=KEY, signal=1.0, label_noise=0.5),
            ValueError,
            "label_noise",
        ),
    ],
    "balanced_init": [
        (lambda: D.balanced_init(3, 3, 0.0, key=KEY), ValueError, "alpha"),
        (lambda: D.balanced_init(3, 3, np.float64(2.0), key=KEY), ValueError, "alpha"),
        (lambda: D.balanced_init(3, 3, 1e-30, key=KEY, dtype=jnp.float32), ValueError, "float32"),
        (lambda: jax.jit(lambda a: D.balanced_init(3, 3, a, key=KEY).a)(NAN), Exception, "alpha"),
        (lambda: D.balanced_init(0, 3, 0.5, key=KEY), ValueError, "`m`"),
    ],
    "half_squared_norm": [(lambda: D.half_squared_norm({"n": 3}), ValueError, "`model`")],
    "he_uniform_init": [(lambda: D.he_uniform_init(3, -1, key=KEY), ValueError, "`d`")],
    "signs_and_directions": [
        (lambda: D.signs_and_directions(NET2, 2 * jnp.eye(2)), ValueError, "orthonormal"),
        (lambda: D.signs_and_directions(NET2, jnp.eye(3)), ValueError, "`X`"),
    ],
    "square_loss": [
        (lambda: D.square_loss(NET2, (jnp.eye(2), jnp.ones((2, 1)))), ValueError, "`y`")
    ],
    "tangent_kernel": [(lambda: D.tangent_kernel(NET2, jnp.eye(3)), ValueError, "`X`")],
    "tangent_kernel_max": [
        (lambda: D.tangent_kernel_max(NET2, jnp.ones((2, 5))), ValueError, "`X`")
    ],
    "loss_decomposition": [
        (lambda: D.loss_decomposition(MF, TARGET, key=KEY, num=0), ValueError, "num")
    ],
    "mean_field_init": [(lambda: D.mean_field_init(0, 4, key=KEY), ValueError, "`m`")],
    "observables": [
        (lambda: D.observables(D.MeanFieldNet(jnp.ones((2, 3))), TARGET), ValueError, "model.W")
    ],
    "population_distance": [
        (
            lambda: D.population_distance(MF, D.MeanFieldNet(jnp.eye(2, 4), "relu")),
            ValueError,
            "activation",
        )
    ],
    "population_loss": [
        (
            lambda: D.population_loss(D.MeanFieldNet(jnp.ones((2, 3))), TARGET),
            ValueError,
            "model.W",
        ),
        (
            lambda: D.population_loss(D.MeanFieldNet(jnp.eye(2, 4), "gelu"), TARGET),
            ValueError,
            "activation",
        ),
    ],
    "sample_loss": [
        (lambda: D.sample_loss(MF, (jnp.ones((6, 4)), jnp.ones((6, 1)))), ValueError, "`y`"),
        (
            lambda: D.sample_loss(MF, (jnp.ones((6, 4)), jnp.ones(6)), batch_size=4),
            ValueError,
            "batch_size",
        ),
    ],
    "sample_loss_gradient": [
        (lambda: D.sample_loss_gradient(MF, (jnp.ones((6, 4)), jnp.ones(5))), ValueError, "`y`"),
        (lambda: D.sample_loss_gradient(MF, (jnp.ones((6, 3)), jnp.ones(6))), ValueError, "`X`"),
        (
            lambda: D.sample_loss_gradient(MF, (jnp.ones((6, 4)) * 1j, jnp.ones(6))),
            ValueError,
            "`X`",
        ),
        (
            lambda: D.sample_loss_gradient(MF, (jnp.ones((6, 4)), jnp.full(6, NAN))),
            ValueError,
            "`y`",
        ),
        (
            lambda: D.sample_loss_gradient(
                eqx.tree_at(lambda m: m.W, MF, MF.W * (1 + 1j)), (jnp.ones((6, 4)), jnp.ones(6))
            ),
            ValueError,
            "`model.W`",
        ),
        (lambda: D.sample_loss_gradient(NET2, (jnp.ones((6, 2)), jnp.ones(6))), ValueError, "Mean"),
        (
            lambda: D.sample_loss_gradient(MF, (jnp.ones((6, 4)), jnp.ones(6)), batch_size=4),
            ValueError,
            "batch_size",
        ),
        (
            lambda: D.sample_loss_gradient(MF, (jnp.ones((6, 4)), jnp.ones(6)), batch_size=0),
            ValueError,
            "batch_size",
        ),
    ],
    "standard_target": [
        (lambda: D.standard_target(5, 3), ValueError, "`d`"),
        (lambda: D.standard_target(2, 4, "tanh"), ValueError, "activation"),
    ],
    "split_neuron": [
        (lambda: D.split_neuron(NET2, 2), ValueError, "`j`"),
        (lambda: D.split_neuron(NET2, 0, NAN), ValueError, "`fraction`"),
        (lambda: D.split_neuron(NET2, 0, 1e200), ValueError, "1 - fraction"),
        (lambda: D.split_neuron(NET2, 0, layer=1), ValueError, "`layer`"),
    ],
    "merge_neurons": [
        (lambda: D.merge_neurons(NET2, 0, 0), ValueError, "`i` and `j`"),
        (lambda: D.merge_neurons(NET2, 0, 1), ValueError, "incoming weights"),
        (lambda: D.merge_neurons(NET2, 0, 1.0), ValueError, "`j`"),
    ],
    "symmetrize": [
        (lambda: D.symmetrize(MF, 5, key=KEY, num=2), ValueError, "`r`"),
        (lambda: D.symmetrize(MF, 2, key=KEY, num=0), ValueError, "num"),
    ],
}
MODULES = {
    "TwoLayerReLU": [(lambda: D.TwoLayerReLU(jnp.ones(2), jnp.ones((3, 2))), ValueError, "`W`")],
    "LeakyReLUNet": [
        (lambda: D.LeakyReLUNet(jnp.ones((2, 3)), jnp.ones(3), 0.1), ValueError, "`a`")
    ],
    "MeanFieldNet": [
        (lambda: D.MeanFieldNet(jnp.ones(3)), ValueError, "`W`"),
        (lambda: D.MeanFieldNet(jnp.zeros((0, 2))), ValueError, "at least one neuron"),
    ],
    "MultiIndexTarget": [
        (lambda: D.MultiIndexTarget(jnp.array([[1.0, 0.0], [1.0, 1.0]])), ValueError, "orthonormal")
    ],
}

CASES["leaky_relu"] += [(lambda: jax.jit(D.leaky_relu)(jnp.ones(2), 1.5), Exception, "gamma")]


CASES["margin_loss"] += [(lambda: D.margin_loss(jnp.zeros(0)), ValueError, "at least one")]
CASES["square_loss"] += [
    (lambda: D.square_loss(NET2, (jnp.zeros((0, 2)), jnp.zeros(0))), ValueError, "at least one")
]
CASES["signs_and_directions"] += [
    (lambda: D.signs_and_directions(NET2, jnp.zeros((0, 2))), ValueError, "at least one row")
]
# the model's type before its fields; the distance checks both nets
CASES["signs_and_directions"] += [
    (lambda: D.signs_and_directions("net", jnp.eye(2)), ValueError, "TwoLayerReLU")
]
CASES["tangent_kernel"] += [
    (lambda: D.tangent_kernel("net", jnp.eye(2)), ValueError, "TwoLayerReLU")
]
CASES["population_distance"] += [
    (lambda: D.population_distance(MF, "net"), ValueError, "`model2`"),
    (lambda: D.population_distance(MF, D.MeanFieldNet(jnp.ones((2, 3)))), ValueError, "model2.W"),
    (
        lambda: D.population_distance(D.MeanFieldNet(jnp.full((2, 4), NAN)), MF),
        ValueError,
        "finite",
    ),
]
# the symmetrizing group acts on coordinates: a target on other directions is refused
CASES["loss_decomposition"] += [
    (
        lambda: D.loss_decomposition(MF, D.MultiIndexTarget(jnp.eye(4)[::-1][:2]), key=KEY, num=2),
        ValueError,
        "coordinate axes",
    )
]
# a 1-D or too-wide X is refused, not broadcast into a wrong loss
CASES["square_loss"] += [
    (lambda: D.square_loss(NET2, (jnp.ones(2), jnp.ones(2))), ValueError, "`X` must have shape"),
    (lambda: D.square_loss(NET2, (jnp.ones((3, 3)), jnp.ones(3))), ValueError, r"\(\*, 2\)"),
]
CASES["sample_loss"] += [
    (lambda: D.sample_loss(MF, (jnp.ones(4), jnp.ones(4))), ValueError, "`X` must have shape"),
]

# trust round 2: NaN through the losses, the wrong network, infinite dof
NAN_NET2 = D.TwoLayerReLU(jnp.array([NAN, -1.0]), jnp.eye(2))
CASES["square_loss"] += [
    (lambda: D.square_loss(NET2, (jnp.full((2, 2), NAN), jnp.ones(2))), ValueError, "`X`"),
    (lambda: D.square_loss(NET2, (jnp.eye(2), jnp.array([NAN, 1.0]))), ValueError, "`y`"),
    (lambda: D.square_loss(NAN_NET2, (jnp.eye(2), jnp.ones(2))), ValueError, "model.a"),
    (lambda: D.square_loss(LEAKY, (jnp.eye(2), jnp.ones(2))), ValueError, "TwoLayerReLU"),
]
CASES["margin_loss"] += [(lambda: D.margin_loss(jnp.array([NAN, 1.0])), ValueError, "margins")]
CASES["log_margin_loss"] += [
    (lambda: D.log_margin_loss(jnp.array([NAN, 1.0])), ValueError, "margins")
]
CASES["population_loss"] += [
    (lambda: D.population_loss(D.MeanFieldNet(jnp.full((2, 4), NAN)), TARGET), ValueError, "W")
]
CASES["sample_loss"] += [
    (
        lambda: D.sample_loss(MF, (jnp.ones((3, 4)), jnp.array([1.0, NAN, 0.0]))),
        ValueError,
        "`y`",
    )
]
CASES["tangent_kernel_max"] += [
    (lambda: D.tangent_kernel_max(NAN_NET2, jnp.eye(2)), ValueError, "model.a")
]
CASES["signs_and_directions"] += [
    (lambda: D.signs_and_directions(NAN_NET2, jnp.eye(2)), ValueError, "model.a"),
    (lambda: D.signs_and_directions(LEAKY, jnp.eye(2)), ValueError, "TwoLayerReLU"),
]
CASES["gaussian_mixture"] += [
    (
        lambda: D.gaussian_mixture(6, 10, signal=1.0, key=KEY, noise="student_t", dof=np.inf),
        ValueError,
        "dof",
    )
]

CASES["merge_neurons"] += [(lambda: D.merge_neurons(NET2, 0, 1, atol=np.inf), ValueError, "atol")]
CASES["observables"] += [(lambda: D.observables(NET2, TARGET), ValueError, "MeanFieldNet")]
CASES["projected_test_error"] += [
    (lambda: D.projected_test_error(NET2, key=KEY, signal=1.0), ValueError, "LeakyReLUNet")
]
MODULES["TwoLayerReLU"] += [
    (lambda: D.TwoLayerReLU(jnp.ones(2) + 0j, jnp.eye(2)), ValueError, "real")
]

CASES["balanced_init"] += [(lambda: D.balanced_init(3, 2, "0.001", key=KEY), ValueError, "alpha")]

CASES["split_neuron"] += [(lambda: D.split_neuron(NET2, 0, "0.5"), ValueError, "`fraction`")]
CASES["leaky_relu"] += [(lambda: D.leaky_relu(jnp.array([1j]), 0.1), ValueError, "`z`")]


# trust round 2, clear messages: a bad key, None and an unknown dtype are named
_PRNG = "must be a JAX PRNG key"
CASES["balanced_init"] += [
    (lambda: D.balanced_init(3, 2, 0.1, key=0), ValueError, _PRNG),
    (lambda: D.balanced_init(3, 2, 0.1, key=None), ValueError, _PRNG),
]
CASES["mean_field_init"] += [
    (lambda: D.mean_field_init(3, 2, key=jax.random.split(KEY)), ValueError, "shape \\(2, 2\\)"),
]
CASES["gaussian_mixture"] += [
    (lambda: D.gaussian_mixture(4, 3, key=jnp.zeros(2), signal=1.0), ValueError, _PRNG),
]
CASES["standard_target"] += [
    (lambda: D.standard_target(2, 4, dtype="abc"), ValueError, "`dtype` must be a floating"),
]


CASES["correlated_data"] = [
    (lambda: D.correlated_data(4, 1.0, key=KEY), ValueError, "`c` must lie in"),
    (lambda: D.correlated_data(4, jnp.ones(2), key=KEY), ValueError, "`c`"),
    (lambda: D.correlated_data(0, 0.5, key=KEY), ValueError, "`n`"),
    (lambda: D.correlated_data(4, 0.5, key=1), ValueError, "PRNG key"),
]
CASES["loewdin"] = [
    (lambda: D.loewdin(jnp.ones((2, 3))), ValueError, "linearly independent"),
    (lambda: D.loewdin(jnp.ones((3, 2))), ValueError, "n <= d"),
    (lambda: D.loewdin(jnp.ones(3)), ValueError, "`X`"),
    (lambda: D.loewdin(jnp.full((2, 2), NAN)), ValueError, "`X` must be finite"),
]

# trust round 3 (a 1,326-case sweep): silent answers now refused
CASES["diagonal_loss"] += [
    (
        lambda: D.diagonal_loss(
            D.DiagonalNet(jnp.array([1e200, 0.0]), jnp.zeros(2)), (jnp.eye(2), jnp.ones(2))
        ),
        ValueError,
        "the loss overflows",
    )
]
CASES["diagonal_units"] += [
    (lambda: D.diagonal_units(D.DiagonalNet(jnp.ones((2, 2)), jnp.ones((2, 2)))), ValueError, "u"),
    (lambda: D.diagonal_units(D.DiagonalNet(jnp.ones(2), jnp.ones(3))), ValueError, "model.v"),
]
CASES["diagonal_loss"] += [
    # an empty X was blamed on y
    (
        lambda: D.diagonal_loss(
            D.DiagonalNet(jnp.ones(2), jnp.ones(2)), (jnp.zeros((0, 2)), jnp.zeros(0))
        ),
        ValueError,
        "`X` must hold at least one sample",
    )
]
CASES["diagonal_init"] += [
    (lambda: D.diagonal_init(2, jnp.array([0.1, 0.2])), ValueError, "`alpha` must be one number")
]
CASES["teacher_student_loss"] += [
    # a non-finite callable activation was called an overflow of the weights
    (
        lambda: D.teacher_student_loss(
            D.TwoLayerNet(jnp.eye(2), jnp.ones(2), activation=lambda z: z * NAN), TS_NET
        ),
        ValueError,
        "activation returns non-finite",
    ),
    # a truthy string trained the second layer
    (
        lambda: D.TwoLayerNet(jnp.eye(2), jnp.ones(2), train_second_layer="no"),
        ValueError,
        "train_second_layer",
    ),
]

_NET2 = D.TwoLayerNet(jnp.eye(2, 4), jnp.ones(2), activation="erf")
CASES["order_parameters"] = [
    (
        lambda: D.order_parameters(
            _NET2, D.TwoLayerNet(jnp.eye(2, 5), jnp.ones(2), activation="erf")
        ),
        ValueError,
        "`teacher.W`",
    ),  # fmt: skip
    (
        lambda: D.order_parameters(_NET2, D.TwoLayerNet(jnp.eye(2, 4), jnp.ones(2))),
        ValueError,
        "one activation",
    ),  # fmt: skip
    (lambda: D.order_parameters(_NET2, jnp.eye(2)), ValueError, "teacher"),
]


test_bad_input_is_refused_with_a_message_naming_it = bad_input_test(table_rows(CASES | MODULES))


def test_every_public_function_has_a_bad_input_case():
    public = public_functions(D)
    assert public <= set(CASES), sorted(public - set(CASES))


def test_degenerate_but_valid_inputs_work():
    # a zero neuron: direction 0 and no mass, never NaN
    dead = D.TwoLayerReLU(jnp.array([0.0, 1.0]), jnp.array([[0.0, 0.0], [1.0, 0.0]]))
    signs, directions = D.signs_and_directions(dead, jnp.eye(2))
    assert np.all(np.isfinite(np.asarray(directions))) and float(directions[0, 0]) == 0.0
    zero_row = D.MeanFieldNet(jnp.array([[0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]))
    assert np.isfinite(float(D.population_loss(zero_row, TARGET)))
    obs = D.observables(zero_row, TARGET)
    assert np.all(np.isfinite(np.asarray(obs.alignment)))
    # NumPy integers, also 0-d arrays, are sizes like Python integers
    assert D.balanced_init(np.array(3), np.int64(2), 0.5, key=KEY).W.shape == (3, 2)
    # integer parameters are converted, not kept as integers
    assert D.TwoLayerReLU(jnp.array([1, -1]), jnp.eye(2, dtype=int)).a.dtype.kind == "f"
