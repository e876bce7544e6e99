"""TensorFlow trains the models written once in Keras 3: fwkernels/frameworks/keras/models.py."""
from fwkernels.frameworks.keras.models import (build, count_trainable_params, loss,  # noqa: F401
                                               trainable_params)

__all__ = ["build", "count_trainable_params", "loss", "trainable_params"]
