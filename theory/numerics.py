"""The numerics that the predictions and the flows share: one import path for each.

- `HoldArgs`: any adaptive diffrax solver with a discrete state of the field (a ReLU live
  set) held fixed per step, its kinks charged to the error estimate.
- `Rodas4`, `Rodas5P`: L-stable Rosenbrock solvers for diffrax with a pluggable linear solve
  (`dense_shifted_solve` is the dense default).
- `default_controller`: the flows' PI step-size controller; `LandingController` retries a
  rejected step to just past the first switch it crossed.
- `diffeqsolve`: `diffrax.diffeqsolve` whose own checks add no host callback (so JAX's
  persistent cache stores the flows' programs).
- `nnqp`: the active-set solver of nonnegative quadratic programs (`max_margin`'s dual);
  `lu_solve`: a pivoted LU solve in plain XLA operations, for small systems inside sweeps
  (jaxlib's batched LAPACK kernels can deadlock on XLA:CPU with several host devices), and
  `spd_inverse`: a positive definite matrix's inverse by blocks (mostly matrix products).
- `binary_exponent`, `times_power_of_two`: exact rescaling, for homogeneous quantities that
  would over- or underflow.

They live in `theory` because its finite-alpha predictor integrates the fast phases with
`HoldArgs` and `max_margin` solves its dual with `nnqp`; `integrators` builds on them.

>>> import theory.numerics as tn
>>> all(hasattr(tn, name) for name in ("HoldArgs", "Rodas5P", "nnqp", "diffeqsolve"))
True
"""

from ._controller import (
    LandingController as LandingController,
    default_controller as default_controller,
)
from ._diffeqsolve import diffeqsolve as diffeqsolve
from ._hold import HoldArgs as HoldArgs
from ._nnqp import (
    NNQPSolution as NNQPSolution,
    lu_solve as lu_solve,
    nnqp as nnqp,
    spd_inverse as spd_inverse,
)
from ._rosenbrock import (
    Rodas4 as Rodas4,
    Rodas5P as Rodas5P,
    dense_shifted_solve as dense_shifted_solve,
)
from ._scaling import (
    binary_exponent as binary_exponent,
    times_power_of_two as times_power_of_two,
)

__all__ = [
    "HoldArgs",
    "LandingController",
    "NNQPSolution",
    "Rodas4",
    "Rodas5P",
    "binary_exponent",
    "default_controller",
    "dense_shifted_solve",
    "diffeqsolve",
    "lu_solve",
    "nnqp",
    "spd_inverse",
    "times_power_of_two",
]
