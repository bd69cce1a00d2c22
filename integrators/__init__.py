"""How it moves in time: gradient flows (diffrax), gradient descent (optax), seed sweeps.

Every flow and descent returns a solution with `result` (a `theory.RESULTS` item), an `ok`
property and a `stats` dict, and takes `throw=False`. The solver machinery they share
(`HoldArgs`, the Rosenbrock solvers, the default controller) is in `theory.numerics`.
"""

from ._chain import saddle_chain as saddle_chain
from ._critical import (
    CriticalPointSolution as CriticalPointSolution,
    critical_point as critical_point,
    escape_saddle as escape_saddle,
)
from ._density import (
    SpectralDensitySolution as SpectralDensitySolution,
    spectral_density as spectral_density,
    wasserstein1 as wasserstein1,
)
from ._diagonal import (
    DiagonalFlowSolution as DiagonalFlowSolution,
    diagonal_flow as diagonal_flow,
)
from ._flow import (
    OrthogonalFlowSolution as OrthogonalFlowSolution,
    orthogonal_flow as orthogonal_flow,
)
from ._gd import (
    GradientDescentSolution as GradientDescentSolution,
    checkpoint_steps as checkpoint_steps,
    gradient_descent as gradient_descent,
    stable_gradient_descent as stable_gradient_descent,
)
from ._generic import (
    GradientFlowSolution as GradientFlowSolution,
    gradient_flow as gradient_flow,
)
from ._margin_gd import (
    MarginGradientDescentSolution as MarginGradientDescentSolution,
    margin_gradient_descent as margin_gradient_descent,
)
from ._mean_field import (
    MeanFieldFlowSolution as MeanFieldFlowSolution,
    check_memory as check_memory,
    mean_field_flow as mean_field_flow,
)
from ._online_sgd import OnlineSGDSolution as OnlineSGDSolution, online_sgd as online_sgd
from ._spectrum import (
    HessianSpectrumSolution as HessianSpectrumSolution,
    certify_morse as certify_morse,
    hessian_spectrum as hessian_spectrum,
)
from ._sweep import (
    SweepConfigError as SweepConfigError,
    SweepSolution as SweepSolution,
    load_sweep as load_sweep,
    pick_batch_size as pick_batch_size,
    sweep as sweep,
)
from ._two_layer import (
    TwoLayerFlowSolution as TwoLayerFlowSolution,
    two_layer_flow as two_layer_flow,
)
from ._units import neuron_units as neuron_units
from ._vanishing import (
    VanishingFlowSolution as VanishingFlowSolution,
    vanishing_flow as vanishing_flow,
)

__all__ = [
    "CriticalPointSolution",
    "DiagonalFlowSolution",
    "GradientDescentSolution",
    "GradientFlowSolution",
    "HessianSpectrumSolution",
    "OnlineSGDSolution",
    "MarginGradientDescentSolution",
    "MeanFieldFlowSolution",
    "OrthogonalFlowSolution",
    "SpectralDensitySolution",
    "SweepConfigError",
    "SweepSolution",
    "TwoLayerFlowSolution",
    "VanishingFlowSolution",
    "certify_morse",
    "check_memory",
    "checkpoint_steps",
    "critical_point",
    "diagonal_flow",
    "escape_saddle",
    "gradient_descent",
    "gradient_flow",
    "hessian_spectrum",
    "load_sweep",
    "margin_gradient_descent",
    "mean_field_flow",
    "neuron_units",
    "online_sgd",
    "orthogonal_flow",
    "pick_batch_size",
    "saddle_chain",
    "stable_gradient_descent",
    "spectral_density",
    "sweep",
    "two_layer_flow",
    "vanishing_flow",
    "wasserstein1",
]
