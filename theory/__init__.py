"""What the papers predict, in closed form. Depends on nothing but jax/numpy/diffrax."""

from ._hermite import (
    ACTIVATIONS as ACTIVATIONS,
    activation as activation,
    hermite_coefficients as hermite_coefficients,
    hermite_energies as hermite_energies,
    second_moment as second_moment,
)
from ._margin import (
    MaxMargin as MaxMargin,
    activation_pattern as activation_pattern,
    all_activated as all_activated,
    effective_direction as effective_direction,
    max_margin as max_margin,
    mixture_test_error as mixture_test_error,
    signal_regime as signal_regime,
)
from ._saddle import (
    SaddleJumps as SaddleJumps,
    coverage_width as coverage_width,
    crossing_times as crossing_times,
    jump_time_grid as jump_time_grid,
    min_norm_cost as min_norm_cost,
    predicted_exponents as predicted_exponents,
    saddle_jumps as saddle_jumps,
)
from ._staircase import (
    lotka_volterra as lotka_volterra,
    mass_equilibrium as mass_equilibrium,
    mass_ode as mass_ode,
    mass_ratio as mass_ratio,
    stage_times as stage_times,
    tensor_power as tensor_power,
)
