"""Keras 3 backend: the models of keras/models.py trained the Keras way, on JAX, PyTorch or TensorFlow.

One module serves keras-jax, keras-torch and keras-tensorflow: the registry's
``FrameworkInfo.options`` names the Keras backend, and ``KERAS_BACKEND`` is set
from it before Keras is first imported in the process (every measurement runs
in fresh worker processes; Keras cannot switch backends once imported).

What is measured is Keras' own path:

* training: ``model.compile(optimizer=keras.optimizers.SGD(...), loss=...,
  jit_compile=..., steps_per_execution=...)`` and ``model.fit`` over the batch resident on
  the device, one ``fit`` call per timing window, as Keras' performance guidance has it
  (``steps_per_execution`` runs several steps per call of the compiled function; the loss is
  read back once per call, not after every step as ``train_on_batch`` does).  On PyTorch,
  Keras refuses ``steps_per_execution`` above 1 (its torch trainer raises a ValueError), so
  there it is 1.
* forward only: ``model.predict_on_batch``, which returns NumPy arrays (a device
  to host copy of the outputs on GPUs).
* forward + backward: Keras has no gradients-only call, so the backend's own
  autodiff runs on the same model and loss (``jax.value_and_grad`` over
  ``model.stateless_call``; ``loss.backward()``; ``tf.GradientTape``), compiled
  like the training step.

jit_compile per mode: keras-jax "jit" (XLA); keras-torch "eager" (no ``torch.compile``) and
"jit" (``torch.compile``); keras-tensorflow "function" (``tf.function`` without XLA; Keras'
"auto" would choose XLA on a GPU) and "xla".  keras-torch turns cuDNN autotuning on as the
PyTorch backend does (docs/fairness.md); its mode "untuned" keeps PyTorch's default.

Weight decay differs from PyTorch's by construction: ``keras.optimizers.SGD(
weight_decay=1e-4)`` decays the weights directly, ``p -= lr * wd * p``, outside the
momentum, whereas ``torch.optim.SGD`` adds ``wd * p`` to the gradient, which then
accumulates in the momentum buffer (about 1 / (1 - 0.9) = 10 times the decay at
a steady state).  The first step is the same; the work per step is one
elementwise multiply-add per weight either way.  docs/keras.md says more.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from fwkernels.frameworks import base
from fwkernels.frameworks.base import RunConfig
from fwkernels.frameworks.keras import runtime as keras_runtime
from fwkernels.models import ModelSpec

JIT_COMPILE = {"jit": True, "xla": True, "eager": False, "function": False,  # per mode
               base.UNTUNED: False}
# Training steps per call of Keras' compiled train function; Keras on PyTorch allows only 1.
STEPS_PER_EXECUTION = {"jax": 32, "tensorflow": 32, "torch": 1}
TF_DATA_AUTOTUNE = False


# ---- what differs per Keras backend: a forward-backward pass in the framework's own autodiff ----

def jax_gradients(model, loss_fn: Callable, jit: bool) -> Callable:
    """(inputs, labels) -> (loss, gradients) by jax.value_and_grad over Keras' stateless call."""
    import jax

    def loss_of(trainable, non_trainable, inputs, labels):
        logits, _ = model.stateless_call(trainable, non_trainable, inputs, training=True)
        return loss_fn(logits, labels)

    value_and_grad = jax.value_and_grad(loss_of)
    if jit:
        value_and_grad = jax.jit(value_and_grad)
    return lambda inputs, labels: value_and_grad(
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables], inputs, labels)


def torch_gradients(model, loss_fn: Callable, jit: bool) -> Callable:
    """(inputs, labels) -> loss, with the gradients left in each weight's ``.grad``.

    As Keras' own torch trainer does it, under ``torch.compile`` where jit is True (the
    trainer's ``jit_compile=True``).
    """
    import torch

    def forward_backward(inputs, labels):
        model.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs, training=True), labels)
        loss.backward()
        return loss.detach()

    return torch.compile(forward_backward) if jit else forward_backward


def tensorflow_gradients(model, loss_fn: Callable, jit: bool) -> Callable:
    """(inputs, labels) -> (loss, gradients) by tf.GradientTape in one tf.function."""
    import tensorflow as tf

    def forward_backward(inputs, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(model(inputs, training=True), labels)
        return loss, tape.gradient(loss, model.trainable_variables)

    return tf.function(forward_backward, jit_compile=jit)


GRADIENTS = {"jax": jax_gradients, "torch": torch_gradients, "tensorflow": tensorflow_gradients}


# ---- the Keras path, the same on every backend ----

class KerasWorkload(base.Workload):
    def __init__(self, config: RunConfig, keras: ModuleType, backend: str) -> None:
        from fwkernels.frameworks.keras import models

        self.config, self.keras, self.backend = config, keras, backend
        self.native = keras_runtime.framework_runtime(backend)
        # No device index: Keras' torch backend copies variables created under "cpu:0" to
        # "cpu" in every call, which detaches them from autograd (no gradients).
        self.device_name = "gpu" if config.device == "cuda" else "cpu"
        keras.backend.clear_session()  # drops earlier models' global state and the dtype policy
        self.native.apply_precision(config.precision)
        self.flush = {}
        if backend == "torch":
            # as the PyTorch backend: denormals flushed (XLA and TensorFlow do anyway), cuDNN
            # autotuning on but in mode untuned
            self.flush = {"flush_denormal": self.native.flush_denormals()}
            self.native.set_conv_autotune(config.mode != base.UNTUNED)
        keras_runtime.set_policy(keras, config.precision)
        keras.utils.set_random_seed(config.seed)
        spec = config.model
        self.jit_compile = JIT_COMPILE[config.mode]

        def loss_fn(logits, labels):
            return models.loss(spec, logits, labels)

        with self.on_device():
            self.model = models.build(spec.name, small=config.small)
            self.model.compile(
                optimizer=keras.optimizers.SGD(config.learning_rate, momentum=base.MOMENTUM,
                                               weight_decay=base.WEIGHT_DECAY),
                loss=lambda y_true, y_pred: loss_fn(y_pred, y_true), jit_compile=self.jit_compile,
                steps_per_execution=STEPS_PER_EXECUTION[backend])
            inputs, labels = base.synthetic_batch(config, layout="NHWC")
            tensors = [keras.ops.convert_to_tensor(array) for array in inputs]
            self.inputs = tensors[0] if len(tensors) == 1 else tensors
            self.labels = keras.ops.convert_to_tensor(labels)
        self.params = models.trainable_params(self.model)
        self._gradients = GRADIENTS[backend](self.model, loss_fn, self.jit_compile)
        self._loss: Any = float("nan")
        self._pending: Any = None

    def on_device(self):
        return self.keras.device(self.device_name)

    def train_step(self) -> None:
        self.train_steps(1)

    def train_steps(self, count: int) -> None:
        """One ``fit`` epoch of ``count`` steps on the resident batch; the loss kept is the
        epoch's (Keras' running mean over its steps)."""
        if count == 0:  # fit reads steps_per_epoch=0 as "until the data runs out"
            return
        with self.on_device():
            history = self.model.fit(self._batches(count), steps_per_epoch=count, epochs=1,
                                     shuffle=False, verbose=0)
        self._loss = history.history["loss"][-1]

    def _batches(self, count: int):
        """The resident batch ``count`` times, as fit takes it without copying: a tf.data
        dataset on TensorFlow (a Python generator would pass through the host there), a
        generator of the device tensors on JAX and PyTorch."""
        if self.backend == "tensorflow":
            import tensorflow as tf

            # tf.data stacks a Python list into one tensor: several inputs go as a tuple
            inputs = tuple(self.inputs) if isinstance(self.inputs, list) else self.inputs
            # Autotuning has nothing to tune in one resident batch repeated, and with it on the
            # CPU windows jump between two speeds in one process (docs/keras.md, *Threads*)
            options = tf.data.Options()
            options.autotune.enabled = TF_DATA_AUTOTUNE
            return (tf.data.Dataset.from_tensors((inputs, self.labels)).repeat(count)
                    .with_options(options))
        return ((self.inputs, self.labels) for _ in range(count))

    def forward_backward(self) -> None:
        with self.on_device():
            self._pending = self._gradients(self.inputs, self.labels)
        self._loss = self._pending[0] if isinstance(self._pending, tuple) else self._pending

    def forward(self) -> np.ndarray:
        with self.on_device():
            return self.model.predict_on_batch(self.inputs)

    def sync(self) -> None:
        self.native.sync(self._pending)

    def loss(self) -> float:
        return float(self.keras.ops.convert_to_numpy(self._loss))

    def param_fingerprint(self) -> List[float]:
        to_numpy = self.keras.ops.convert_to_numpy
        return [float(np.sum(to_numpy(v.value), dtype=np.float64))
                for v in self.model.trainable_variables]

    def precision_settings(self) -> Dict[str, object]:
        policy = self.model.dtype_policy
        return {"policy": self.config.precision, **self.native.precision_flags(), **self.flush,
                "compute_dtype": policy.compute_dtype, "variable_dtype": policy.variable_dtype,
                "keras_policy": policy.name, "keras_backend": self.keras.backend.backend(),
                "jit_compile": self.model.jit_compile,
                "training_loop": f"fit, steps_per_execution={self.model.steps_per_execution}",
                **({"tf_data_autotune": TF_DATA_AUTOTUNE} if self.backend == "tensorflow" else {})}

    def policy_settings(self) -> Dict[str, object]:
        # Keras feeds NHWC (its image_data_format); on PyTorch it transposes around each convolution
        return base.policy_fields(self.config, *self.native.conv_autotune(), "NHWC")

    def peak_memory_bytes(self) -> Optional[int]:
        return self.native.peak_memory_bytes(self.config.device)


class Backend(base.Backend):
    def __init__(self, info) -> None:
        super().__init__(info)
        self.keras_backend = dict(info.options)["backend"]
        self.keras = keras_runtime.import_keras(self.keras_backend)
        self.runtime = keras_runtime.framework_runtime(self.keras_backend)

    def version(self) -> str:
        return f"{self.keras.__version__} ({self.keras_backend} {self.runtime.version()})"

    def unsupported_reason(self, config: RunConfig) -> Optional[str]:
        if reason := base.untuned_reason(config):
            return reason
        running = self.keras.backend.backend()
        if running != self.keras_backend:
            return (f"Keras was imported with the {running!r} backend in this process; "
                    f"{self.name} needs KERAS_BACKEND={self.keras_backend} in a fresh process")
        return None

    def count_params(self, model: ModelSpec) -> int:
        from fwkernels.frameworks.keras import models

        return models.count_trainable_params(model.name)

    def build(self, config: RunConfig) -> base.Workload:
        return KerasWorkload(config, self.keras, self.keras_backend)

    def runtime_info(self, device: str) -> Dict[str, Optional[str]]:
        return {"keras_backend": self.keras_backend, **self.runtime.runtime_info(device)}
