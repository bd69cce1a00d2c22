"""Bad input to every public function of `theory` (`theory.numerics`: test_bad_inputs_numerics):
(call, exception, message fragment)."""

import jax
import jax.numpy as jnp
import numpy as np
from helpers import bad_input_test, public_functions, table_rows

import theory as T

Y, S, D = jnp.array([1.0, -2.0]), jnp.array([1.0, -1.0]), jnp.ones((2, 2))
PRED = T.saddle_jumps(Y, S, D)
X2, A2 = jnp.eye(2), jnp.array([1.0, -1.0])
ONE1 = jnp.array([1.0])
NAN = float("nan")

CASES = {
    "kkt_residual": [
        (lambda: T.kkt_residual(jnp.eye(2), A2, jnp.eye(3), A2, 0.5), ValueError, "`X`"),
        (lambda: T.kkt_residual(jnp.eye(2), A2, X2, A2[:, None], 0.5), ValueError, "`y`"),
        (lambda: T.kkt_residual(jnp.eye(2), A2, X2, jnp.array([1.0, 0.0]), 0.5), ValueError, "`y`"),
        (lambda: T.kkt_residual(jnp.eye(2), jnp.ones(3), X2, A2, 0.5), ValueError, "`a`"),
        (lambda: T.kkt_residual(jnp.eye(2), A2, X2, A2, 1.5), ValueError, "gamma"),
        (lambda: T.kkt_residual(jnp.full((2, 2), NAN), A2, X2, A2, 0.5), ValueError, "`W`"),
        (lambda: T.kkt_residual(jnp.eye(2), A2, X2, A2, 0.5, kink_tol=-1.0), ValueError, "kink"),
        (lambda: T.kkt_residual(jnp.eye(2), A2, X2, A2, 0.5, rounds=0), ValueError, "rounds"),
    ],
    "activation_function": [(lambda: T.activation_function("tanh"), ValueError, "activation")],
    "hermite_coefficients": [
        (lambda: T.hermite_coefficients("abs", -1), ValueError, "degree"),
        (lambda: T.hermite_coefficients("abs", 2.5), ValueError, "degree"),
        (lambda: T.hermite_coefficients("gelu", 400), ValueError, "<= 300"),
    ],
    "hermite_energies": [
        (lambda: T.hermite_energies(activation="tanh", r=2), ValueError, "activation"),
        (lambda: T.hermite_energies(activation="abs", r=-2), ValueError, "`r`"),
        (lambda: T.hermite_energies(activation="abs", r=2.5), ValueError, "`r`"),
    ],
    "arccos_kernel": [
        (lambda: T.arccos_kernel(1.5), ValueError, "`rho`"),
        (lambda: T.arccos_kernel(NAN), ValueError, "`rho`"),
    ],
    "second_moment": [(lambda: T.second_moment("sigmoid"), ValueError, "activation")],
    "dual_kernel": [
        (lambda: T.dual_kernel("tanh"), ValueError, "activation"),
        (lambda: T.dual_kernel("abs")(2.0), ValueError, "`rho`"),
    ],
    "kernel_truncation_error": [
        (lambda: T.kernel_truncation_error("tanh"), ValueError, "activation")
    ],
    "activation_pattern": [
        (lambda: T.activation_pattern(jnp.ones((2, 3)), jnp.ones((4, 2))), ValueError, "`X`")
    ],
    "all_activated": [
        (lambda: T.all_activated(jnp.ones((2, 2)), jnp.ones(3), X2, A2), ValueError, "`a`"),
        (lambda: T.all_activated(jnp.ones((2, 2)), A2, X2, A2[:, None]), ValueError, "`y`"),
    ],
    "bayes_error": [
        (lambda: T.bayes_error(1.0, label_noise=np.float32(0.7)), ValueError, "label_noise"),
        (lambda: T.bayes_error(1.0, noise_scale=-1.0), ValueError, "noise_scale"),
        (lambda: jax.jit(lambda d: T.bayes_error(1.0, dof=d))(5.0), ValueError, "known outside"),
    ],
    "effective_direction": [
        (lambda: T.effective_direction(jnp.ones((2, 3)), jnp.ones(3)), ValueError, "`a`")
    ],
    "max_margin": [
        (lambda: T.max_margin(X2, A2, A2, 1.5), ValueError, "gamma"),
        (lambda: T.max_margin(X2, A2, A2, np.float32(1.5)), ValueError, "gamma"),
        (lambda: T.max_margin(X2, A2, A2, jnp.array([0.5])), ValueError, "gamma"),
        (lambda: jax.jit(lambda g: T.max_margin(X2, A2, A2, g).W)(1.5), Exception, "gamma"),
        (lambda: T.max_margin(X2, A2, A2, 0.5, tol=-1.0), ValueError, "tol"),
        (lambda: T.max_margin(X2, 2 * A2, A2, 0.5), ValueError, "`y` must take"),
        (lambda: T.max_margin(X2, A2[:, None], A2, 0.5), ValueError, "`y`"),
        (
            lambda: T.max_margin(X2, A2, A2, 0.5, pattern=jnp.ones((3, 2), bool)),
            ValueError,
            "pattern",
        ),
    ],
    "mixture_test_error": [
        (lambda: T.mixture_test_error(X2, A2, jnp.ones(3)), ValueError, "`mu`"),
        (
            lambda: T.mixture_test_error(X2, A2, jnp.ones(2), label_noise=0.6),
            ValueError,
            "label_noise",
        ),
    ],
    "one_minus_cos": [
        (lambda: T.one_minus_cos(jnp.ones((2, 3)), jnp.ones((3, 2))), ValueError, "`W`"),
        (lambda: T.one_minus_cos(jnp.zeros((2, 2)), X2), ValueError, "nonzero"),
    ],
    "signal_regime": [
        (lambda: T.signal_regime(0, 1.0, 10), ValueError, "`n`"),
        (lambda: T.signal_regime(5, 1.0, 10, noise_scale=0.0), ValueError, "noise_scale"),
    ],
    "diagonal_jumps": [
        (lambda: T.diagonal_jumps(jnp.ones(3), jnp.ones(3)), ValueError, "`X`"),
        (lambda: T.diagonal_jumps(jnp.ones((3, 2)), jnp.ones(2)), ValueError, "`y`"),
        (lambda: T.diagonal_jumps(jnp.ones((0, 2)), jnp.ones(0)), ValueError, "`X`"),
        (lambda: T.diagonal_jumps(jnp.full((2, 2), NAN), jnp.ones(2)), ValueError, "`X`"),
        (lambda: T.diagonal_jumps(jnp.eye(2), jnp.array([1.0, jnp.inf])), ValueError, "`y`"),
        (lambda: T.diagonal_jumps(jnp.eye(2), jnp.ones(2), max_jumps=0), ValueError, "max_jumps"),
        (lambda: T.diagonal_jumps(jnp.eye(2), jnp.ones(2), tol=-1.0), ValueError, "tol"),
        (
            lambda: T.diagonal_jumps(jnp.eye(2), jnp.ones(2)).first_time_finite_alpha(0.0),
            ValueError,
            "alpha",
        ),
    ],
    "coverage_width": [
        (lambda: T.coverage_width(np.int64(0)), ValueError, "`n`"),
        (lambda: T.coverage_width(10, 1.5), ValueError, "delta"),
    ],
    "crossing_times": [
        (lambda: T.crossing_times(jnp.arange(3.0), jnp.ones(4), PRED), ValueError, "`loss`"),
        (
            lambda: T.crossing_times(jnp.array([0.0, 2.0, 1.0]), jnp.ones(3), PRED),
            ValueError,
            "nondecreasing",
        ),
        (lambda: T.crossing_times(jnp.array([0.0, NAN]), jnp.ones(2), PRED), ValueError, "finite"),
    ],
    "jump_time_grid": [
        (lambda: T.jump_time_grid(PRED, 1.0, time_scale=0.0), ValueError, "time_scale"),
        (lambda: T.jump_time_grid(PRED, -1.0, time_scale=10.0), ValueError, "t1"),
        (lambda: T.jump_time_grid(PRED, 1.0, time_scale=10.0, num=0), ValueError, "num"),
        (lambda: T.jump_time_grid(PRED, 1.0, time_scale=10.0, window=NAN), ValueError, "window"),
        (lambda: PRED.gd_epochs(time_scale=10.0, learning_rate=0.0), ValueError, "learning"),
    ],
    "min_norm_cost": [
        (lambda: T.min_norm_cost(jnp.ones((2, 1))), ValueError, "`y`"),
        (lambda: T.min_norm_cost(jnp.array([1.0, NAN])), ValueError, "finite"),
    ],
    "predicted_exponents": [
        (lambda: T.predicted_exponents(PRED, jnp.array([1.0, 0.0])), ValueError, "nondecreasing")
    ],
    "saddle_jumps": [
        (lambda: T.saddle_jumps(Y, jnp.array([1.0, 0.5]), D), ValueError, "signs"),
        (lambda: T.saddle_jumps(Y, S, jnp.ones((2, 3))), ValueError, "directions"),
        (lambda: T.saddle_jumps(Y[:, None], S, D), ValueError, "`y`"),
        (lambda: T.saddle_jumps(jnp.array([1.0, NAN]), S, D), ValueError, "finite"),
    ],
    "lotka_volterra": [
        (
            lambda: T.lotka_volterra(
                jnp.ones(3), jnp.arange(3.0), c0=1.0, c2=1.0, r=1, d=2, weight_decay=0.0
            ),
            ValueError,
            "beta0",
        ),
        (
            lambda: T.lotka_volterra(
                jnp.ones(2), jnp.array([0.0, NAN]), c0=1.0, c2=1.0, r=1, d=2, weight_decay=0.0
            ),
            ValueError,
            "`ts`",
        ),
    ],
    "mass_equilibrium": [
        (lambda: T.mass_equilibrium(c0=0.0, r=2, weight_decay=1.0), ValueError, "c0"),
        (lambda: T.mass_equilibrium(c0=1.0, r=-4, weight_decay=0.0), ValueError, "`r`"),
        # the weight decay outweighs the target: no positive fixed point (was -46.0, silent)
        (lambda: T.mass_equilibrium(c0=1, r=4, weight_decay=100), ValueError, "must be > 0"),
    ],
    "mass_ode": [
        (
            lambda: T.mass_ode(-1.0, jnp.arange(2.0), c0=1.0, r=2, weight_decay=0.0),
            ValueError,
            "alpha0",
        ),
        (
            lambda: T.mass_ode(1.0, jnp.array([0.0, NAN]), c0=1.0, r=2, weight_decay=0.0),
            ValueError,
            "`ts`",
        ),
    ],
    "mass_ratio": [
        (lambda: T.mass_ratio(jnp.ones(3), c0=1.0, c2=1.0, r=1, d=2), ValueError, "beta"),
        (
            lambda: T.mass_ratio(jnp.array([1.0, -0.5]), c0=1.0, c2=1.0, r=1, d=3),
            ValueError,
            "beta",
        ),
        (lambda: T.mass_ratio(jnp.ones(2), c0=1.0, c2=1.0, r=3, d=2), ValueError, "`d`"),
    ],
    "measured_stage_times": [
        (
            lambda: T.measured_stage_times(
                np.arange(3.0), np.ones(2), np.ones(3), np.ones(3), equilibrium=1.0
            ),
            ValueError,
            "alpha",
        )
    ],
    "stage_times": [
        (
            lambda: T.stage_times(activation="relu", r=2, d=4, m=4, weight_decay=0.1),
            ValueError,
            "relu_even",
        ),
        (
            lambda: T.stage_times(activation="abs", r=5, d=4, m=4, weight_decay=0.1),
            ValueError,
            "`d`",
        ),
    ],
    "tensor_power": [
        (lambda: T.tensor_power(1.5, jnp.arange(2.0), activation="abs"), ValueError, "p0"),
        (lambda: T.tensor_power(0.5, jnp.arange(2.0), activation="gelu"), ValueError, "gelu_even"),
    ],
    "weight_decay_plateaus": [
        (
            lambda: T.weight_decay_plateaus(activation="swish", r=2, weight_decay=0.1),
            ValueError,
            "swish_even",
        )
    ],
    "stage_equilibria": [
        (
            lambda: T.stage_equilibria(activation="abs", r=4, d=20, weight_decay=100.0),
            ValueError,
            "mass equilibrium",
        ),
        (
            lambda: T.stage_equilibria(activation="abs", r=4, d=2, weight_decay=1.0),
            ValueError,
            "`d`",
        ),
        (
            lambda: T.stage_equilibria(activation="relu", r=4, d=20, weight_decay=1.0),
            ValueError,
            "relu_even",
        ),
    ],
    "initial_alignment": [
        (lambda: T.initial_alignment(jnp.ones(3), jnp.eye(3)), ValueError, "`W`"),
        (lambda: T.initial_alignment(jnp.ones((2, 3)), jnp.eye(2)), ValueError, "directions"),
        (lambda: T.initial_alignment(jnp.full((2, 3), NAN), jnp.eye(3)), ValueError, "W"),
        (
            lambda: T.initial_alignment(jnp.ones((2, 3)), jnp.eye(3).at[0, 0].set(NAN)),
            ValueError,
            "directions",
        ),
        (lambda: T.initial_alignment(jnp.ones((2, 3)), 2 * jnp.eye(3)), ValueError, "orthonormal"),
    ],
    "typical_alignment": [(lambda: T.typical_alignment(r=0, m=4), ValueError, "`r`")],
    "loss_plateaus": [
        (lambda: T.loss_plateaus(np.arange(4.0), np.ones(3)), ValueError, "`loss`"),
        (lambda: T.loss_plateaus(np.arange(4.0), np.zeros(4)), ValueError, "positive somewhere"),
        (
            lambda: T.loss_plateaus(np.arange(4.0), np.array([1.0, -0.5, 0.3, 0.2])),
            ValueError,
            ">= 0",
        ),
        (lambda: T.loss_plateaus(np.arange(4.0), np.ones(4), min_drop=2.0), ValueError, "min_drop"),
        (lambda: T.loss_plateaus(np.arange(2.0), np.ones(2)), ValueError, "3 save times"),
    ],
}

_LV = dict(c0=1.0, c2=1.0, r=1, d=2, weight_decay=0.0)
_ST = dict(activation="abs", r=2, d=4, m=4, weight_decay=0.1)
CASES["lotka_volterra"] += [
    (
        lambda: T.lotka_volterra(
            jnp.ones(2), jnp.arange(2.0), **_LV | {"weight_decay": jnp.array(-1.0)}
        ),
        ValueError,
        "weight_decay",
    ),
    (
        lambda: T.lotka_volterra(jnp.ones(2), jnp.arange(2.0), **_LV | {"r": 5, "d": 4}),
        ValueError,
        "`d`",
    ),
]
CASES["mass_ode"] += [
    (
        lambda: T.mass_ode(1.0, jnp.arange(2.0), c0=1.0, r=1, weight_decay=2.0),
        ValueError,
        "equilibrium",
    )
]
CASES["stage_times"] += [
    (lambda: T.stage_times(**_ST, alpha0=5.0), ValueError, "alpha0"),
    (lambda: T.stage_times(**_ST | {"weight_decay": 100.0}), ValueError, "equilibrium"),
    (lambda: T.stage_times(**_ST, threshold=1.5), ValueError, "threshold"),
    (lambda: T.stage_times(**_ST, threshold=0.5 + 1j), ValueError, "`threshold` must be real"),
    (lambda: T.stage_times(**_ST, eps=jnp.array([0.1, 0.2])), ValueError, "`eps`"),
    (lambda: T.stage_times(**_ST, initial_alignment=1.5), ValueError, "initial_alignment"),
    (lambda: T.stage_times(**_ST, initial_alignment=jnp.ones(3)), ValueError, "initial_alignment"),
]
CASES["coverage_width"] += [
    (lambda: T.coverage_width(2.5), ValueError, "`n` must be an integer"),
    (lambda: jax.jit(T.coverage_width)(2.5), Exception, "`n` must be an integer"),
]


CASES["mixture_test_error"] += [
    (lambda: T.mixture_test_error(jnp.zeros((2, 2)), A2, jnp.ones(2)), ValueError, "nonzero")
]
CASES["bayes_error"] += [
    (lambda: T.bayes_error(-1.0), ValueError, "signal"),
    (lambda: T.bayes_error(1.0, dof=2.0), ValueError, "dof"),
    (lambda: T.bayes_error(1.0, dof=jnp.array([3.0, 4.0])), ValueError, "dof"),
]
CASES["margin_conditions"] = [
    (lambda: T.margin_conditions(X2, A2[:, None], 0.1), ValueError, "`y`"),
    (lambda: T.margin_conditions(X2, jnp.array([1.0, 0.5]), 0.1), ValueError, "`y`"),
    (lambda: T.margin_conditions(X2, A2, 0.0), ValueError, "gamma"),
    (lambda: T.margin_conditions(jnp.full((2, 2), NAN), A2, 0.1), ValueError, "`X`"),
    (lambda: T.margin_conditions(jnp.zeros((0, 2)), jnp.zeros(0), 0.1), ValueError, "at least"),
]
CASES["span_error_bound"] = [
    (lambda: T.span_error_bound(X2, jnp.ones(3)), ValueError, "`mu`"),
    (lambda: T.span_error_bound(X2, jnp.array([NAN, 1.0])), ValueError, "`mu`"),
    (lambda: T.span_error_bound(X2, jnp.ones(2), noise_scale=0.0), ValueError, "noise_scale"),
    (lambda: T.span_error_bound(X2, jnp.ones(2), label_noise=0.5), ValueError, "label_noise"),
]
CASES["transition_lower_bound"] = [
    (lambda: T.transition_lower_bound(0, 1.0, 10), ValueError, "`n`"),
    (lambda: T.transition_lower_bound(5, -1.0, 10), ValueError, "signal"),
    (lambda: T.transition_lower_bound(5, 1.0, 10, noise_scale=-1.0), ValueError, "noise_scale"),
    (lambda: T.transition_lower_bound(5, 1.0, 2.5), ValueError, "`d`"),
]


CASES["saddle_jumps"] += [
    (lambda: T.saddle_jumps(Y, S, D, time_scale=-1.0), ValueError, "time_scale"),
    (lambda: T.saddle_jumps(Y, S, D, time_scale=jnp.ones(2)), ValueError, "time_scale"),
    (lambda: T.saddle_jumps(Y, S, D, time_scale=8.0), ValueError, ">= 20"),
    (
        lambda: T.saddle_jumps(jnp.zeros(0), jnp.zeros(0), jnp.zeros((0, 0))),
        ValueError,
        "at least one",
    ),
]

# trust round 2: inputs that gave silent answers (NaN, broadcasting, complex read as real)
TS4 = np.array([0.0, 1.0, 1.0, 2.0])
CASES["loss_plateaus"] += [
    (
        lambda: T.loss_plateaus(np.arange(4.0), np.array([1.0, 0.9, 0.5, 0.4]) + 0j),
        ValueError,
        "real",
    ),
    (lambda: T.loss_plateaus(TS4, np.array([1.0, 0.9, 0.5, 0.4])), ValueError, "equal save"),
]
CASES["measured_stage_times"] += [
    (
        lambda: T.measured_stage_times(
            TS4, np.array([1.0, NAN, 2.0, 2.0]), np.ones(4), np.ones(4), equilibrium=2.0
        ),
        ValueError,
        "`alpha`",
    ),
    (
        lambda: T.measured_stage_times(TS4, np.ones(4), np.ones(4), np.ones(4), equilibrium=NAN),
        ValueError,
        "equilibrium",
    ),
]
CASES["activation_pattern"] += [
    (lambda: T.activation_pattern(jnp.ones(2), X2), ValueError, "`W`"),
    (lambda: T.activation_pattern(jnp.full((1, 2), NAN), X2), ValueError, "`W`"),
]
CASES["effective_direction"] += [
    (lambda: T.effective_direction(jnp.ones(2), jnp.ones(2)), ValueError, "`W`"),
    (lambda: T.effective_direction(X2, jnp.array([NAN, 1.0])), ValueError, "`a`"),
]
CASES["mixture_test_error"] += [
    (lambda: T.mixture_test_error(X2, A2, jnp.array([NAN, 1.0])), ValueError, "`mu`"),
]
CASES["signal_regime"] += [
    (lambda: T.signal_regime(5, -1.0, 10), ValueError, "signal"),
    (lambda: T.signal_regime(5, NAN, 10), ValueError, "signal"),
]
CASES["crossing_times"] += [
    (
        lambda: T.crossing_times(jnp.arange(3.0), jnp.array([0.5, NAN, 0.1]), PRED),
        ValueError,
        "NaN",
    ),
]
CASES["one_minus_cos"] += [
    (lambda: T.one_minus_cos(jnp.full((1, 2), NAN), jnp.ones((1, 2))), ValueError, "finite"),
]

CASES["lotka_volterra"] += [
    (
        lambda: T.lotka_volterra(
            jnp.array([0.01, 0.01]), jnp.array([0.0, 1.0]), c0=NAN, c2=0.5, r=2, d=4,
            weight_decay=0.0,
        ),
        ValueError,
        "c0",
    ),
]  # fmt: skip

# the second sweep: complex input, non-bool flags, kernels past |rho| = 1, negative losses
CASES["min_norm_cost"] += [
    (lambda: T.min_norm_cost(jnp.array([1.0 + 1j, 2.0])), ValueError, "real")
]
CASES["dual_kernel"] += [(lambda: T.dual_kernel("gelu")(1.5), ValueError, "rho")]
CASES["crossing_times"] += [
    (
        lambda: T.crossing_times(jnp.arange(3.0), jnp.array([0.5, -1.0, 0.1]), PRED),
        ValueError,
        ">= 0",
    )
]

CASES["kkt_residual"] += [
    (lambda: T.kkt_residual(jnp.eye(2), A2, X2, A2, 0.5, rounds=2.5), ValueError, "rounds")
]

CASES["result_names"] = [(lambda: T.result_names("successful"), ValueError, "`result`")]
CASES["name_nonfinite"] = [(lambda: T.name_nonfinite(0, jnp.ones(2)), ValueError, "`result`")]


# trust round 3 (a 1,326-case sweep): silent answers now refused
_JUMPS = T.diagonal_jumps(jnp.eye(2), jnp.array([2.0, -1.0]))
CASES["diagonal_jumps"] += [
    # X^T X, X^T y out of float's range: the process ended at once, no jump, ok
    (lambda: T.diagonal_jumps(X2 * 1e160, A2 * 1e160), ValueError, "leaves float's range"),
    (lambda: T.diagonal_jumps(X2 * 1e-160, A2 * 1e-160), ValueError, "leaves float's range"),
    # the finite-alpha correction beyond its validity (alpha = 1 - 1e-16 gave -4.2e14)
    (lambda: _JUMPS.first_time_finite_alpha(1 - 1e-16), ValueError, "too close to 1"),
    (
        lambda: jax.vmap(lambda y: T.diagonal_jumps(X2, y))(
            jnp.ones((3, 2))
        ).first_time_finite_alpha(0.1),
        ValueError,
        "inside the vmap",
    ),
]
CASES["mass_ode"] += [
    (lambda: T.mass_ode(1.0, jnp.arange(3.0), c0=A2, r=4, weight_decay=2.0), ValueError, "c0")
]
CASES["mass_ode"] += [
    # backwards past the pole of the curve from above its equilibrium (was nan)
    (
        lambda: T.mass_ode(5.0, jnp.array([-1.0]), c0=1.0, r=4, weight_decay=2.0),
        ValueError,
        "past the pole",
    ),
    # a subnormal alpha0 (was [0, 0, 0]) and an array alpha0 (paired with ts silently)
    (lambda: T.mass_ode(5e-324, X2[0], c0=1.0, r=4, weight_decay=2.0), ValueError, "alpha0"),
    (lambda: T.mass_ode(A2 + 2, X2[0], c0=1.0, r=4, weight_decay=2.0), ValueError, "alpha0"),
]

# trust round 2, clear messages: None reaches no ufunc
CASES["arccos_kernel"] += [(lambda: T.arccos_kernel(None), ValueError, "`rho` must be real")]
CASES["coverage_width"] += [(lambda: T.coverage_width(32, None), ValueError, "`delta`")]
CASES["max_margin"] += [
    (lambda: T.max_margin(jnp.eye(2), A2, A2, None), ValueError, "`gamma` must be real"),
]


# the solver machinery (theory.numerics)


_CMP = dict(activation="abs", r=2, d=10, m=8, weight_decay=0.1)
TS5, ONES5 = np.linspace(0.0, 4.0, 5), np.ones(5)
CASES["compare_stages"] = [
    (lambda: T.compare_stages(TS5, ONES5[:4], ONES5, ONES5, ONES5, **_CMP), ValueError, "`loss`"),
    (lambda: T.compare_stages(TS5, ONES5 * NAN, ONES5, ONES5, ONES5, **_CMP), ValueError, "loss"),
    (lambda: T.compare_stages(TS5, ONES5, ONES5, ONES5[:3], ONES5, **_CMP), ValueError, "`q`"),
    (lambda: T.compare_stages(TS5[::-1], ONES5, ONES5, ONES5, ONES5, **_CMP), ValueError, "`ts`"),
]

_OP = dict(Q=jnp.eye(2), R=jnp.zeros((2, 1)), T=jnp.eye(1), a=jnp.ones(2), c=jnp.ones(1))
_STATE = T.OrderParameters(**_OP)
CASES["online_sgd_ode"] = [
    (
        lambda: T.online_sgd_ode(T.OrderParameters(**_OP | {"R": jnp.zeros((2, 2))}), TS5),
        ValueError,
        "`state.R`",
    ),  # fmt: skip
    (
        lambda: T.online_sgd_ode(T.OrderParameters(**_OP | {"Q": jnp.eye(2) * NAN}), TS5),
        ValueError,
        "`state.Q`",
    ),  # fmt: skip
    (lambda: T.online_sgd_ode(_STATE, TS5, lr=0.0), ValueError, "`lr`"),
    (lambda: T.online_sgd_ode(_STATE, TS5, activation="softsign"), ValueError, "`activation`"),
    (lambda: T.online_sgd_ode(_STATE, TS5[::-1]), ValueError, "`ts`"),
    (lambda: T.online_sgd_ode(_STATE, TS5, rtol=-1.0), ValueError, "`rtol`"),
]
CASES["online_field"] = [
    (lambda: T.online_field(_STATE, lr_second=-1.0), ValueError, "`lr_second`"),
    (
        lambda: T.online_field(T.OrderParameters(**_OP | {"c": jnp.ones(3)})),
        ValueError,
        "`state.c`",
    ),
]
CASES["online_fixed_point"] = [
    (lambda: T.online_fixed_point(_STATE, max_steps=0), ValueError, "`max_steps`"),
    (lambda: T.online_fixed_point(_STATE, noise=NAN), ValueError, "`noise`"),
]
# under jit the checks live in the data flow of the values used (they were dropped before)
CASES["online_field"] += [
    (lambda: jax.jit(lambda lr: T.online_field(_STATE, lr=lr))(-1.0), Exception, "`lr`")
]
CASES["stage_times"] += [
    (lambda: jax.jit(lambda t: T.stage_times(**_ST, threshold=t).t_0)(1.5), Exception, "threshold")
]
CASES["generalization_error"] = [
    (
        lambda: T.generalization_error(T.OrderParameters(**_OP | {"a": jnp.ones(1)})),
        ValueError,
        "`state.a`",
    ),  # fmt: skip
    (lambda: T.generalization_error(_STATE, nodes=2), ValueError, "`nodes`"),
]


test_bad_input_is_refused_with_a_message_naming_it = bad_input_test(table_rows(CASES))


def test_every_public_function_has_a_bad_input_case():
    public = public_functions(T) - {"diffrax_stats"}  # a diffrax adaptor
    assert public <= set(CASES), sorted(public - set(CASES))
