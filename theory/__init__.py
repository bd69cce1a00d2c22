"""What the papers predict, in closed form. Depends on nothing but jax/numpy/diffrax."""

from ._saddle import (
    SaddleJumps as SaddleJumps,
    coverage_width as coverage_width,
    crossing_times as crossing_times,
    jump_time_grid as jump_time_grid,
    min_norm_cost as min_norm_cost,
    predicted_exponents as predicted_exponents,
    saddle_jumps as saddle_jumps,
)
