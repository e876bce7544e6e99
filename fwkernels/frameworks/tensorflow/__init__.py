"""TensorFlow 2: the Keras 3 definitions of the models trained by a native tf.function step
(runtime, models, backend)."""
