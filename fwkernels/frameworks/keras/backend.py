"""Keras 3 backend: the models of keras_models.py trained the Keras way, on JAX, PyTorch or TensorFlow.

One module serves keras-jax, keras-torch and keras-tensorflow: the registry's
``FrameworkInfo.options`` names the Keras backend, and ``KERAS_BACKEND`` is set
from it before Keras is first imported in the process (every measurement runs
in fresh worker processes; Keras cannot switch backends once imported).

What is measured is Keras' own path:

* training: ``model.compile(optimizer=keras.optimizers.SGD(...), loss=..., jit_compile=...)``
  and ``model.train_on_batch`` on a batch resident on the device.  It returns the
  loss as a Python float, so every step ends with a host sync (Keras' design).
* forward only: ``model.predict_on_batch``, which returns NumPy arrays (a device
  to host copy of the outputs on GPUs).
* forward + backward: Keras has no gradients-only call, so the backend's own
  autodiff runs on the same model and loss (``jax.value_and_grad`` over
  ``model.stateless_call``; ``loss.backward()``; ``tf.GradientTape``), compiled
  like the training step.

jit_compile per mode: keras-jax "jit" (XLA), keras-torch "eager" (no
``torch.compile``), keras-tensorflow "function" (``tf.function`` without XLA;
Keras' "auto" would choose XLA on a GPU).

Weight decay differs from PyTorch's by construction: ``keras.optimizers.SGD(
weight_decay=1e-4)`` decays the weights directly, ``p -= lr * wd * p``, outside the
momentum, whereas ``torch.optim.SGD`` adds ``wd * p`` to the gradient, which then
accumulates in the momentum buffer (about 1 / (1 - 0.9) = 10 times the decay at
a steady state).  The first step is the same; the work per step is one
elementwise multiply-add per weight either way.  docs/keras.md says more.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from fwkernels.frameworks import base
from fwkernels.frameworks.base import RunConfig
from fwkernels.models import ModelSpec

KERAS_POLICIES = {"fp32": "float32", "tf32": "float32", "bf16": "mixed_bfloat16"}
JIT_COMPILE = {"jit": True, "eager": False, "function": False}  # per mode


def import_keras(backend: str):
    """Keras on ``backend``: KERAS_BACKEND must be set before the first ``import keras``."""
    if "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = backend
        if backend == "tensorflow":  # TensorFlow's C++ INFO/WARNING lines, as tensorflow_backend
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras

    return keras


# ---- what differs per Keras backend: the underlying framework's own switches ----

class JaxNative:
    # XLA's CPU client sizes its thread pool from this variable when it is created.
    THREADS_VARIABLE = "PJRT_NPROC"
    # float32 dots and convolutions: "highest" is strict float32, XLA's GPU default is TF32.
    MATMUL_PRECISION = {"fp32": "highest", "tf32": "tensorfloat32", "bf16": "highest"}

    def __init__(self) -> None:
        import jax

        self.jax = jax

    def version(self) -> str:
        return f"jax {self.jax.__version__}"

    def device_available(self, device: str) -> bool:
        try:
            return bool(self.jax.devices({"cpu": "cpu", "cuda": "gpu"}[device]))
        except RuntimeError:  # no backend for that platform
            return False

    def set_threads(self, threads: int) -> None:
        from jax._src import xla_bridge

        if xla_bridge.backends_are_initialized():
            if os.environ.get(self.THREADS_VARIABLE) != str(threads):
                raise RuntimeError(f"XLA's CPU client already runs; set {self.THREADS_VARIABLE}"
                                   " before the first computation")
            return
        os.environ[self.THREADS_VARIABLE] = str(threads)

    def apply_precision(self, precision: str) -> None:
        self.jax.config.update("jax_default_matmul_precision", self.MATMUL_PRECISION[precision])

    def precision_flags(self) -> Dict[str, object]:
        value = self.jax.config.jax_default_matmul_precision
        # Unset (XLA's default), "high" or "tensorfloat32" let float32 matmuls use TF32 on GPUs.
        return {"tf32_enabled": value not in ("highest", "float32"),
                "jax_default_matmul_precision": value}

    def gradients(self, model, loss_fn: Callable, jit: bool) -> Callable:
        """(inputs, labels) -> (loss, gradients) by jax.value_and_grad over Keras' stateless call."""
        def loss_of(trainable, non_trainable, inputs, labels):
            logits, _ = model.stateless_call(trainable, non_trainable, inputs, training=True)
            return loss_fn(logits, labels)

        value_and_grad = self.jax.value_and_grad(loss_of)
        if jit:
            value_and_grad = self.jax.jit(value_and_grad)
        return lambda inputs, labels: value_and_grad(
            [v.value for v in model.trainable_variables],
            [v.value for v in model.non_trainable_variables], inputs, labels)

    def sync(self, pending: Any) -> None:
        self.jax.block_until_ready(pending)

    def peak_memory_bytes(self, device: str) -> Optional[int]:
        if device != "cuda":
            return None
        stats = self.jax.devices("gpu")[0].memory_stats() or {}
        return stats.get("peak_bytes_in_use")

    def runtime_info(self, device: str) -> Dict[str, Optional[str]]:
        if device != "cuda":
            return {}
        gpu = self.jax.devices("gpu")[0]
        return {"device_name": gpu.device_kind, "platform_version": gpu.client.platform_version,
                "driver_version": base.nvidia_driver_version()}


class TorchNative:
    def __init__(self) -> None:
        import torch

        from fwkernels.frameworks import torch_backend

        self.torch = torch
        self.torch_backend = torch_backend

    def version(self) -> str:
        return f"torch {self.torch.__version__}"

    def device_available(self, device: str) -> bool:
        return device == "cpu" or (device == "cuda" and self.torch.cuda.is_available())

    def set_threads(self, threads: int) -> None:
        self.torch.set_num_threads(threads)
        with contextlib.suppress(RuntimeError):  # settable once per process only
            self.torch.set_num_interop_threads(threads)

    def apply_precision(self, precision: str) -> None:
        self.torch_backend.apply_precision(precision)
        # As torch_backend: a fixed batch drives gradients into denormals, slow on x86 CPUs.
        self.flush_denormal = self.torch.set_flush_denormal(True)

    def precision_flags(self) -> Dict[str, object]:
        return {**self.torch_backend.precision_flags(), "flush_denormal": self.flush_denormal}

    def gradients(self, model, loss_fn: Callable, jit: bool) -> Callable:
        """(inputs, labels) -> loss, with the gradients left in each weight's ``.grad``.

        As Keras' own torch trainer does it; keras-torch runs eagerly only (jit False).
        """
        def forward_backward(inputs, labels):
            model.zero_grad(set_to_none=True)
            loss = loss_fn(model(inputs, training=True), labels)
            loss.backward()
            return loss.detach()

        return forward_backward

    def sync(self, pending: Any) -> None:
        if self.torch.cuda.is_available() and self.torch.cuda.is_initialized():
            self.torch.cuda.synchronize()

    def peak_memory_bytes(self, device: str) -> Optional[int]:
        return self.torch.cuda.max_memory_allocated() if device == "cuda" else None

    def runtime_info(self, device: str) -> Dict[str, Optional[str]]:
        if device != "cuda":
            return {}
        torch = self.torch
        return {"cuda_version": torch.version.cuda,
                "cudnn_version": str(torch.backends.cudnn.version()),
                "device_name": torch.cuda.get_device_name(),
                "driver_version": base.nvidia_driver_version()}


class TensorFlowNative:
    def __init__(self) -> None:
        from fwkernels.frameworks import tensorflow_backend  # TensorFlow's runtime settings

        self.tf, self.runtime = tensorflow_backend.tf, tensorflow_backend

    def version(self) -> str:
        return f"tensorflow {self.tf.__version__}"

    def device_available(self, device: str) -> bool:
        return device == "cpu" or (device == "cuda" and self.runtime.gpu_available())

    def set_threads(self, threads: int) -> None:
        self.runtime.set_threads(threads)

    def apply_precision(self, precision: str) -> None:
        self.runtime.apply_precision(precision)

    def precision_flags(self) -> Dict[str, object]:
        return {"tf32_enabled": self.tf.config.experimental.tensor_float_32_execution_enabled()}

    def gradients(self, model, loss_fn: Callable, jit: bool) -> Callable:
        """(inputs, labels) -> (loss, gradients) by tf.GradientTape in one tf.function."""
        def forward_backward(inputs, labels):
            with self.tf.GradientTape() as tape:
                loss = loss_fn(model(inputs, training=True), labels)
            return loss, tape.gradient(loss, model.trainable_variables)

        return self.tf.function(forward_backward, jit_compile=jit)

    def sync(self, pending: Any) -> None:
        self.tf.test.experimental.sync_devices()

    def peak_memory_bytes(self, device: str) -> Optional[int]:
        return self.runtime.gpu_peak_memory_bytes() if device == "cuda" else None

    def runtime_info(self, device: str) -> Dict[str, Optional[str]]:
        return self.runtime.gpu_runtime_info() if device == "cuda" else {}


NATIVES = {"jax": JaxNative, "torch": TorchNative, "tensorflow": TensorFlowNative}


# ---- the Keras path, the same on every backend ----

class KerasWorkload(base.Workload):
    def __init__(self, config: RunConfig, keras, native) -> None:
        from fwkernels.frameworks import keras_models

        self.config, self.keras, self.native = config, keras, native
        # No device index: Keras' torch backend copies variables created under "cpu:0" to
        # "cpu" in every call, which detaches them from autograd (no gradients).
        self.device_name = "gpu" if config.device == "cuda" else "cpu"
        keras.backend.clear_session()  # drops earlier models' global state and the dtype policy
        native.apply_precision(config.precision)
        keras.mixed_precision.set_global_policy(KERAS_POLICIES[config.precision])
        keras.utils.set_random_seed(config.seed)
        spec = config.model
        self.jit_compile = JIT_COMPILE[config.mode]

        def loss_fn(logits, labels):
            return keras_models.loss(spec, logits, labels)

        with self.on_device():
            self.model = keras_models.build(spec.name, small=config.small)
            self.model.compile(
                optimizer=keras.optimizers.SGD(config.learning_rate, momentum=base.MOMENTUM,
                                               weight_decay=base.WEIGHT_DECAY),
                loss=lambda y_true, y_pred: loss_fn(y_pred, y_true), jit_compile=self.jit_compile)
            inputs, labels = keras_models.synthetic_batch(config)
            tensors = [keras.ops.convert_to_tensor(array) for array in inputs]
            self.inputs = tensors[0] if len(tensors) == 1 else tensors
            self.labels = keras.ops.convert_to_tensor(labels)
        self.params = keras_models.trainable_params(self.model)
        self._gradients = native.gradients(self.model, loss_fn, self.jit_compile)
        self._loss: Any = float("nan")
        self._pending: Any = None

    def on_device(self):
        return self.keras.device(self.device_name)

    def train_step(self) -> None:
        with self.on_device():
            self._loss = self.model.train_on_batch(self.inputs, self.labels)

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

    def output_shape(self) -> Tuple[int, ...]:
        return tuple(self.forward().shape)

    def param_fingerprint(self) -> List[float]:
        to_numpy = self.keras.ops.convert_to_numpy
        return [float(np.sum(to_numpy(v.value), dtype=np.float64))
                for v in self.model.trainable_variables]

    def precision_settings(self) -> Dict[str, object]:
        policy = self.model.dtype_policy
        return {"policy": self.config.precision, **self.native.precision_flags(),
                "compute_dtype": policy.compute_dtype, "variable_dtype": policy.variable_dtype,
                "keras_policy": policy.name, "keras_backend": self.keras.backend.backend(),
                "jit_compile": self.model.jit_compile}

    def peak_memory_bytes(self) -> Optional[int]:
        return self.native.peak_memory_bytes(self.config.device)


class Backend(base.Backend):
    def __init__(self, info) -> None:
        super().__init__(info)
        self.keras_backend = dict(info.options)["backend"]
        self.keras = import_keras(self.keras_backend)
        self.native = NATIVES[self.keras_backend]()

    def version(self) -> str:
        return f"{self.keras.__version__} ({self.native.version()})"

    def device_available(self, device: str) -> bool:
        return self.native.device_available(device)

    def set_threads(self, threads: int) -> None:
        self.native.set_threads(threads)

    def unsupported_reason(self, config: RunConfig) -> Optional[str]:
        running = self.keras.backend.backend()
        if running != self.keras_backend:
            return (f"Keras was imported with the {running!r} backend in this process; "
                    f"{self.name} needs KERAS_BACKEND={self.keras_backend} in a fresh process")
        return None

    def count_params(self, model: ModelSpec) -> int:
        from fwkernels.frameworks import keras_models

        return keras_models.count_trainable_params(model.name)

    def build(self, config: RunConfig) -> base.Workload:
        if not config.mode:
            config = dataclasses.replace(config, mode=self.info.default_mode)
        return KerasWorkload(config, self.keras, self.native)

    def runtime_info(self, device: str) -> Dict[str, Optional[str]]:
        return {"keras_backend": self.keras_backend, **self.native.runtime_info(device)}
