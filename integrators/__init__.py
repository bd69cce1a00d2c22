"""How it moves in time: gradient flow (diffrax), gradient descent (optax), seed sweeps."""

from ._flow import (
    FlowSolution as FlowSolution,
    gradient_flow as gradient_flow,
)
from ._gd import (
    GDSolution as GDSolution,
    checkpoint_steps as checkpoint_steps,
    gradient_descent as gradient_descent,
)
from ._margin_gd import (
    MarginGDSolution as MarginGDSolution,
    margin_gradient_descent as margin_gradient_descent,
    one_minus_cos as one_minus_cos,
)
from ._mean_field import (
    MeanFieldSolution as MeanFieldSolution,
    check_memory as check_memory,
    mean_field_flow as mean_field_flow,
    observables as observables,
)
from ._sweep import (
    SweepConfigError as SweepConfigError,
    SweepResult as SweepResult,
    pick_batch_size as pick_batch_size,
    sweep as sweep,
)
from ._vanishing import (
    VanishingSolution as VanishingSolution,
    vanishing_flow as vanishing_flow,
)
