"""What the papers predict, in closed form. Depends on nothing but jax/numpy/diffrax."""

from ._saddle import (
    SaddleJumps as SaddleJumps,
    coverage_width as coverage_width,
    crossing_times as crossing_times,
    min_norm_cost as min_norm_cost,
    saddle_jumps as saddle_jumps,
)
