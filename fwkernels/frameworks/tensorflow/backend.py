"""TensorFlow 2 backend: the Keras 3 models of keras_models.py, trained by a native tf.function.

Modes: "function" compiles the training step with ``tf.function`` (TensorFlow's
graph executor, no XLA); "xla" adds ``jit_compile=True``.  Layout is NHWC.

The optimizer is written out here rather than taken from Keras: PyTorch's SGD
adds weight decay to the gradient before momentum (``g += wd * p``, then
``v = 0.9 v + g``, ``p -= lr v``), whereas ``keras.optimizers.SGD(weight_decay=...)``
decays the weights directly (decoupled, outside the momentum), which is a
different update.

Log noise: ``TF_CPP_MIN_LOG_LEVEL=2`` (unless already set) is put in the
environment before TensorFlow is imported, which hides TensorFlow's C++ INFO and
WARNING lines; TensorFlow's and absl's Python loggers are set to ERROR.  Set
TF_CPP_MIN_LOG_LEVEL=0 to see everything.  docs/tensorflow.md lists the lines
that remain (TensorFlow 2.21 prints the oneDNN banner before its log level applies).
"""
from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional, Tuple

# Both must be in the environment before the first import of TensorFlow / Keras.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if "keras" not in sys.modules:
    os.environ["KERAS_BACKEND"] = "tensorflow"

import absl.logging  # noqa: E402
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from fwkernels.frameworks import base, keras_models  # noqa: E402
from fwkernels.frameworks.base import RunConfig  # noqa: E402
from fwkernels.frameworks.keras_backend import KERAS_POLICIES  # noqa: E402
from fwkernels.models import ModelSpec  # noqa: E402

absl.logging.set_verbosity(absl.logging.ERROR)
tf.get_logger().setLevel("ERROR")


# ---- TensorFlow runtime settings, shared with Keras 3 on its TensorFlow backend ----

def gpu_available() -> bool:
    return bool(tf.config.list_physical_devices("GPU"))


def set_threads(threads: int) -> None:
    threading = tf.config.threading
    for setter, getter in ((threading.set_intra_op_parallelism_threads,
                            threading.get_intra_op_parallelism_threads),
                           (threading.set_inter_op_parallelism_threads,
                            threading.get_inter_op_parallelism_threads)):
        try:
            setter(threads)
        except RuntimeError:  # settable only until TensorFlow's runtime starts
            if getter() != threads:
                raise


def gpu_peak_memory_bytes() -> int:
    return tf.config.experimental.get_memory_info("GPU:0")["peak"]


def gpu_runtime_info() -> Dict[str, Optional[str]]:
    build = tf.sysconfig.get_build_info()
    details = tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0])
    return {"cuda_version": build.get("cuda_version"), "cudnn_version": build.get("cudnn_version"),
            "device_name": details.get("device_name"),
            "driver_version": base.nvidia_driver_version()}


def apply_precision(precision: str) -> None:
    """TF32 only for "tf32" (TensorFlow enables it by default); bf16 is Keras mixed precision."""
    tf.config.experimental.enable_tensor_float_32_execution(precision == "tf32")
    keras.mixed_precision.set_global_policy(KERAS_POLICIES[precision])


class TensorFlowWorkload(base.Workload):
    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.device = "/GPU:0" if config.device == "cuda" else "/CPU:0"
        keras.backend.clear_session()  # drops earlier models' global state (and the dtype policy)
        apply_precision(config.precision)
        keras.utils.set_random_seed(config.seed)
        inputs, labels = keras_models.synthetic_batch(config)
        with tf.device(self.device):
            self.model = keras_models.build(config.model.name, small=config.small)
            self.variables = self.model.trainable_variables
            self.velocities = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False)
                               for v in self.variables]
            self.inputs = [tf.constant(array) for array in inputs]
            self.labels = tf.constant(labels)
        self.params = keras_models.trainable_params(self.model)
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
            loss = keras_models.loss(self.config.model, logits, self.labels)
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
        tf.test.experimental.sync_devices()

    def loss(self) -> float:
        return float(self._loss)

    def output_shape(self) -> Tuple[int, ...]:
        return tuple(self.forward().shape)

    def param_fingerprint(self) -> List[float]:
        return [float(tf.reduce_sum(tf.cast(v.value, tf.float64))) for v in self.variables]

    def precision_settings(self) -> Dict[str, object]:
        policy = self.model.dtype_policy
        return {"policy": self.config.precision,
                "tf32_enabled": tf.config.experimental.tensor_float_32_execution_enabled(),
                "compute_dtype": policy.compute_dtype, "variable_dtype": policy.variable_dtype,
                "keras_policy": policy.name, "jit_compile": self.config.mode == "xla"}

    def peak_memory_bytes(self) -> Optional[int]:
        return gpu_peak_memory_bytes() if self.config.device == "cuda" else None

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
    def version(self) -> str:
        return tf.__version__

    def device_available(self, device: str) -> bool:
        return device == "cpu" or (device == "cuda" and gpu_available())

    def set_threads(self, threads: int) -> None:
        set_threads(threads)

    def unsupported_reason(self, config: RunConfig) -> Optional[str]:
        if keras.backend.backend() != "tensorflow":
            return (f"Keras was imported with the {keras.backend.backend()!r} backend in this "
                    "process; the TensorFlow backend needs KERAS_BACKEND=tensorflow")
        return None

    def count_params(self, model: ModelSpec) -> int:
        return keras_models.count_trainable_params(model.name)

    def build(self, config: RunConfig) -> base.Workload:
        return TensorFlowWorkload(config)

    def runtime_info(self, device: str) -> Dict[str, Optional[str]]:
        return {"keras_version": keras.__version__,
                **(gpu_runtime_info() if device == "cuda" else {})}

    def is_out_of_memory(self, error: BaseException) -> bool:
        return (isinstance(error, tf.errors.ResourceExhaustedError)
                or super().is_out_of_memory(error))
