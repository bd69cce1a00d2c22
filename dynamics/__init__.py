"""What is simulated: data models, networks (Equinox modules), initializations, losses.

`dynamics.unchecked` holds the losses' kernels without their argument checks, for the
integrators' loops.
"""

from . import unchecked as unchecked
from ._data import (
    correlated_data as correlated_data,
    loewdin as loewdin,
    orthogonal_data as orthogonal_data,
)
from ._diagonal import (
    DiagonalNet as DiagonalNet,
    diagonal_init as diagonal_init,
    diagonal_loss as diagonal_loss,
    diagonal_units as diagonal_units,
)
from ._leaky import (
    MARGIN_LOSSES as MARGIN_LOSSES,
    LeakyReLUNet as LeakyReLUNet,
    check_margin_loss as check_margin_loss,
    fixed_second_layer as fixed_second_layer,
    leaky_relu as leaky_relu,
    log_margin_loss as log_margin_loss,
    margin_loss as margin_loss,
    small_leaky_init as small_leaky_init,
)
from ._mixture import (
    gaussian_mixture as gaussian_mixture,
    projected_test_error as projected_test_error,
    sampled_test_error as sampled_test_error,
)
from ._model import (
    TwoLayerReLU as TwoLayerReLU,
    balanced_init as balanced_init,
    half_squared_norm as half_squared_norm,
    he_uniform_init as he_uniform_init,
    signs_and_directions as signs_and_directions,
    square_loss as square_loss,
    tangent_kernel as tangent_kernel,
    tangent_kernel_max as tangent_kernel_max,
)
from ._multi_index import (
    MeanFieldNet as MeanFieldNet,
    MultiIndexTarget as MultiIndexTarget,
    Observables as Observables,
    mean_field_init as mean_field_init,
    observables as observables,
    population_distance as population_distance,
    population_loss as population_loss,
    sample_loss as sample_loss,
    sample_loss_gradient as sample_loss_gradient,
    standard_target as standard_target,
)
from ._neurons import merge_neurons as merge_neurons, split_neuron as split_neuron
from ._symmetry import (
    LossDecomposition as LossDecomposition,
    loss_decomposition as loss_decomposition,
    symmetrize as symmetrize,
)
from ._teacher_student import (
    TwoLayerNet as TwoLayerNet,
    order_parameters as order_parameters,
    teacher_student_loss as teacher_student_loss,
    teacher_student_quadrature_error as teacher_student_quadrature_error,
)

__all__ = [
    "DiagonalNet",
    "LeakyReLUNet",
    "LossDecomposition",
    "MARGIN_LOSSES",
    "MeanFieldNet",
    "MultiIndexTarget",
    "Observables",
    "TwoLayerNet",
    "TwoLayerReLU",
    "balanced_init",
    "check_margin_loss",
    "correlated_data",
    "diagonal_init",
    "diagonal_loss",
    "diagonal_units",
    "fixed_second_layer",
    "gaussian_mixture",
    "half_squared_norm",
    "he_uniform_init",
    "leaky_relu",
    "loewdin",
    "log_margin_loss",
    "loss_decomposition",
    "margin_loss",
    "mean_field_init",
    "merge_neurons",
    "observables",
    "order_parameters",
    "orthogonal_data",
    "population_distance",
    "population_loss",
    "projected_test_error",
    "sample_loss",
    "sample_loss_gradient",
    "sampled_test_error",
    "signs_and_directions",
    "small_leaky_init",
    "split_neuron",
    "square_loss",
    "standard_target",
    "symmetrize",
    "tangent_kernel",
    "tangent_kernel_max",
    "teacher_student_loss",
    "teacher_student_quadrature_error",
    "unchecked",
]
