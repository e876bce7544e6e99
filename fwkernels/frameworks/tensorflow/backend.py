"""TensorFlow 2 backend: the Keras 3 models of keras/models.py, trained by a native tf.function.

Modes: "function" compiles the training step with ``tf.function`` (TensorFlow's
graph executor, no XLA); "xla" adds ``jit_compile=True``.  Layout is NHWC.

The optimizer is written out here rather than taken from Keras: PyTorch's SGD
adds weight decay to the gradient before momentum (``g += wd * p``, then
``v = 0.9 v + g``, ``p -= lr v``), whereas ``keras.optimizers.SGD(weight_decay=...)``
decays the weights directly (decoupled, outside the momentum), which is a
different update.

The log settings and the TF32 switch are TensorFlow's runtime module
(fwkernels/frameworks/tensorflow/runtime.py).
"""
from __future__ import annotations

from typing import Dict, List, Optional

from fwkernels.frameworks import base
from fwkernels.frameworks.base import RunConfig
from fwkernels.frameworks.keras import runtime as keras_runtime
from fwkernels.models import ModelSpec

keras = keras_runtime.import_keras("tensorflow")  # before TensorFlow imports Keras itself

from fwkernels.frameworks.tensorflow import models, runtime  # noqa: E402

tf = runtime.tf


class TensorFlowWorkload(base.Workload):
    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.device = "/GPU:0" if config.device == "cuda" else "/CPU:0"
        keras.backend.clear_session()  # drops earlier models' global state (and the dtype policy)
        runtime.apply_precision(config.precision)
        keras_runtime.set_policy(keras, config.precision)
        keras.utils.set_random_seed(config.seed)
        inputs, labels = base.synthetic_batch(config, layout="NHWC")
        with tf.device(self.device):
            self.model = models.build(config.model.name, small=config.small)
            self.variables = self.model.trainable_variables
            self.velocities = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False)
                               for v in self.variables]
            self.inputs = [tf.constant(array) for array in inputs]
            self.labels = tf.constant(labels)
        self.params = models.trainable_params(self.model)
        jit_compile = config.mode == "xla"
        self._train = tf.function(self._train_step, jit_compile=jit_compile)
        self._forward_backward = tf.function(self._loss_and_gradients, jit_compile=jit_compile)
        self._forward = tf.function(self._predict, jit_compile=jit_compile)
        self._loss = tf.constant(float("nan"))

    def _model_inputs(self):
        return self.inputs[0] if len(self.inputs) == 1 else self.inputs

    def _loss_and_gradients(self):
        with tf.GradientTape() as tape:
            logits = self.model(self._model_inputs(), training=True)
            loss = models.loss(self.config.model, logits, self.labels)
        return loss, tape.gradient(loss, self.variables)

    def _train_step(self):
        loss, gradients = self._loss_and_gradients()
        lr = self.config.learning_rate
        for variable, gradient, velocity in zip(self.variables, gradients, self.velocities):
            # Embedding gradients arrive as IndexedSlices; weight decay makes them dense,
            # as PyTorch's (dense) embedding gradient is.
            gradient = tf.convert_to_tensor(gradient) + base.WEIGHT_DECAY * variable.value
            velocity.assign(base.MOMENTUM * velocity + gradient)
            variable.assign_sub(lr * velocity)
        return loss

    def _predict(self):
        return self.model(self._model_inputs(), training=False)

    def train_step(self) -> None:
        with tf.device(self.device):
            self._loss = self._train()

    def forward_backward(self) -> None:
        with tf.device(self.device):
            self._loss, self._gradients = self._forward_backward()

    def forward(self) -> tf.Tensor:
        with tf.device(self.device):
            return self._forward()

    def sync(self) -> None:
        runtime.sync()

    def loss(self) -> float:
        return float(self._loss)

    def param_fingerprint(self) -> List[float]:
        return [float(tf.reduce_sum(tf.cast(v.value, tf.float64))) for v in self.variables]

    def precision_settings(self) -> Dict[str, object]:
        policy = self.model.dtype_policy
        return {"policy": self.config.precision, **runtime.precision_flags(),
                "compute_dtype": policy.compute_dtype, "variable_dtype": policy.variable_dtype,
                "keras_policy": policy.name, "jit_compile": self.config.mode == "xla"}

    def policy_settings(self) -> Dict[str, object]:
        return base.policy_fields(self.config, *runtime.conv_autotune(), "NHWC")

    def peak_memory_bytes(self) -> Optional[int]:
        return runtime.peak_memory_bytes(self.config.device)

    def flops_per_step(self) -> Optional[float]:
        """Forward + backward FLOPs by TensorFlow's static graph profiler; None for LSTM graphs.

        The profiler counts each op of the traced graph once (convolutions, matmuls
        and their gradients at 2 FLOPs per multiply-add, plus elementwise ops), so a
        loop body (the LSTMs' while loops) would count once instead of once per step.
        """
        graph = self._forward_backward.get_concrete_function().graph
        if any("While" in op.type for op in graph.get_operations()):
            return None
        builder = tf.compat.v1.profiler.ProfileOptionBuilder
        options = builder(builder.float_operation()).with_empty_output().build()
        return float(tf.compat.v1.profiler.profile(graph, options=options).total_float_ops)


class Backend(base.Backend):
    runtime = runtime

    def unsupported_reason(self, config: RunConfig) -> Optional[str]:
        if keras.backend.backend() != "tensorflow":
            return (f"Keras was imported with the {keras.backend.backend()!r} backend in this "
                    "process; the TensorFlow backend needs KERAS_BACKEND=tensorflow")
        return None

    def count_params(self, model: ModelSpec) -> int:
        return models.count_trainable_params(model.name)

    def build(self, config: RunConfig) -> base.Workload:
        return TensorFlowWorkload(config)

    def runtime_info(self, device: str) -> Dict[str, Optional[str]]:
        return {"keras_version": keras.__version__, **runtime.runtime_info(device)}

    def is_out_of_memory(self, error: BaseException) -> bool:
        return runtime.is_out_of_memory(error) or super().is_out_of_memory(error)
