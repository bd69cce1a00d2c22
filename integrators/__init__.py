"""How it moves in time: gradient flow (diffrax), gradient descent (optax)."""

from ._flow import (
    FlowSolution as FlowSolution,
    ScaledState as ScaledState,
    gradient_flow as gradient_flow,
)
from ._gd import (
    GDSolution as GDSolution,
    checkpoint_steps as checkpoint_steps,
    gradient_descent as gradient_descent,
)
