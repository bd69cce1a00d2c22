"""What is simulated: data models, networks (Equinox modules), initializations, losses."""

from ._data import orthogonal_data as orthogonal_data
from ._model import (
    TwoLayerReLU as TwoLayerReLU,
    balanced_init as balanced_init,
    he_uniform_init as he_uniform_init,
    signs_and_directions as signs_and_directions,
    square_loss as square_loss,
)
