"""What the papers predict, and the numerics the predictions need. Depends on nothing but
jax/numpy/diffrax/equinox.

`theory` is the floor of the engine: it imports no other package of ours. Besides the
predictions it holds the base that every package shares, each object under one name:

- `RESULTS` and `AbstractSolution`: the solution convention of everything that integrates or
  iterates (`Readable`, `result_names`, `name_nonfinite`, `diffrax_stats` go with it);
- `theory.checks`: the argument checks;
- `theory.numerics`: the solver machinery (`HoldArgs`, `Rodas4`, `Rodas5P`,
  `default_controller`, `nnqp`), here because the finite-alpha predictor integrates its fast
  phases with `HoldArgs` and `max_margin` solves its dual with `nnqp`;
- `theory.rescaled`: the rescaled two-layer field, written once for the predictor and for
  every two-layer flow in `integrators`.
"""

from . import checks as checks, numerics as numerics, rescaled as rescaled
from ._diagonal import (
    DiagonalJumpsSolution as DiagonalJumpsSolution,
    diagonal_jumps as diagonal_jumps,
)
from ._equilibria import (
    StageEquilibria as StageEquilibria,
    mass_equilibrium as mass_equilibrium,
    stage_equilibria as stage_equilibria,
    weight_decay_plateaus as weight_decay_plateaus,
)
from ._hermite import (
    HermiteEnergies as HermiteEnergies,
    activation_function as activation_function,
    hermite_coefficients as hermite_coefficients,
    hermite_energies as hermite_energies,
    second_moment as second_moment,
)
from ._jump_tools import (
    coverage_width as coverage_width,
    crossing_times as crossing_times,
    jump_time_grid as jump_time_grid,
    min_norm_cost as min_norm_cost,
    predicted_exponents as predicted_exponents,
)
from ._kernels import (
    arccos_kernel as arccos_kernel,
    dual_kernel as dual_kernel,
    kernel_truncation_error as kernel_truncation_error,
)
from ._kkt import KKTResidualSolution as KKTResidualSolution, kkt_residual as kkt_residual
from ._margin import (
    MaxMarginSolution as MaxMarginSolution,
    activation_pattern as activation_pattern,
    all_activated as all_activated,
    bayes_error as bayes_error,
    effective_direction as effective_direction,
    max_margin as max_margin,
    mixture_test_error as mixture_test_error,
    one_minus_cos as one_minus_cos,
    signal_regime as signal_regime,
)
from ._online import (
    ONLINE_EXACT as ONLINE_EXACT,
    OnlineFixedPoint as OnlineFixedPoint,
    OnlineODESolution as OnlineODESolution,
    OrderParameters as OrderParameters,
    generalization_error as generalization_error,
    online_field as online_field,
    online_fixed_point as online_fixed_point,
    online_sgd_ode as online_sgd_ode,
)
from ._plateaus import loss_plateaus as loss_plateaus
from ._regimes import (
    MarginConditions as MarginConditions,
    margin_conditions as margin_conditions,
    span_error_bound as span_error_bound,
    transition_lower_bound as transition_lower_bound,
)
from ._saddle import saddle_jumps as saddle_jumps
from ._saddle_solution import SaddleJumpsSolution as SaddleJumpsSolution
from ._solution import (
    RESULTS as RESULTS,
    AbstractSolution as AbstractSolution,
    Readable as Readable,
    diffrax_stats as diffrax_stats,
    name_nonfinite as name_nonfinite,
    result_names as result_names,
)
from ._stages import (
    StageComparison as StageComparison,
    StageTimesSolution as StageTimesSolution,
    compare_stages as compare_stages,
    measured_stage_times as measured_stage_times,
    stage_times as stage_times,
)
from ._staircase import (
    ODESolution as ODESolution,
    initial_alignment as initial_alignment,
    lotka_volterra as lotka_volterra,
    mass_ode as mass_ode,
    mass_ratio as mass_ratio,
    tensor_power as tensor_power,
    typical_alignment as typical_alignment,
)
from .checks import ACTIVATIONS as ACTIVATIONS, EVEN_ACTIVATIONS as EVEN_ACTIVATIONS

__all__ = [
    "ACTIVATIONS",
    "AbstractSolution",
    "DiagonalJumpsSolution",
    "EVEN_ACTIVATIONS",
    "HermiteEnergies",
    "KKTResidualSolution",
    "MarginConditions",
    "MaxMarginSolution",
    "ODESolution",
    "ONLINE_EXACT",
    "OnlineFixedPoint",
    "OnlineODESolution",
    "OrderParameters",
    "RESULTS",
    "Readable",
    "SaddleJumpsSolution",
    "StageComparison",
    "StageEquilibria",
    "StageTimesSolution",
    "activation_function",
    "activation_pattern",
    "all_activated",
    "arccos_kernel",
    "bayes_error",
    "checks",
    "compare_stages",
    "coverage_width",
    "crossing_times",
    "diagonal_jumps",
    "diffrax_stats",
    "dual_kernel",
    "effective_direction",
    "generalization_error",
    "hermite_coefficients",
    "hermite_energies",
    "initial_alignment",
    "jump_time_grid",
    "kernel_truncation_error",
    "kkt_residual",
    "loss_plateaus",
    "lotka_volterra",
    "margin_conditions",
    "mass_equilibrium",
    "mass_ode",
    "mass_ratio",
    "max_margin",
    "measured_stage_times",
    "min_norm_cost",
    "mixture_test_error",
    "name_nonfinite",
    "numerics",
    "online_field",
    "online_fixed_point",
    "online_sgd_ode",
    "one_minus_cos",
    "predicted_exponents",
    "rescaled",
    "result_names",
    "saddle_jumps",
    "second_moment",
    "signal_regime",
    "span_error_bound",
    "stage_equilibria",
    "stage_times",
    "tensor_power",
    "transition_lower_bound",
    "typical_alignment",
    "weight_decay_plateaus",
]
