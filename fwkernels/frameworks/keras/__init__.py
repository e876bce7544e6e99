"""Keras 3 on JAX, PyTorch or TensorFlow: the models written once, trained the Keras way
(runtime, models, backend)."""
