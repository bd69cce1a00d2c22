"""What the papers predict, in closed form. Depends on nothing but jax/numpy/diffrax."""

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
