"""The losses' kernels without their argument checks, for the vector fields and loops of
`integrators` (a check there would run at every step, and a traced one is a host callback).
The caller has checked the arguments once, outside the loop; each function here computes what
its checked twin in `dynamics` does (named in its docstring) and assumes valid input.

>>> import jax.numpy as jnp
>>> from dynamics import unchecked
>>> round(float(unchecked.margin_loss(jnp.array([0.0, 1.0]), "exponential")), 6)
0.68394
"""

from ._diagonal import _diagonal_loss as diagonal_loss
from ._leaky import _log_margin_loss as log_margin_loss, _margin_loss as margin_loss
from ._multi_index import (
    _population_loss as population_loss,
    _sample_loss as sample_loss,
    _sample_loss_gradient as sample_loss_gradient,
)
from ._teacher_student import _unchecked_loss as teacher_student_loss

__all__ = [
    "diagonal_loss",
    "log_margin_loss",
    "margin_loss",
    "population_loss",
    "sample_loss",
    "sample_loss_gradient",
    "teacher_student_loss",
]
