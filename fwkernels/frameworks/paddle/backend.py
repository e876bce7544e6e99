"""PaddlePaddle backend: dynamic graph (default) or ``paddle.jit.to_static``; NCHW layout.

Mode "static" converts forward + loss with the default ``paddle.jit.to_static``
(backward and the optimizer update stay outside: ``to_static(full_graph=True)``
around a step that calls ``loss.backward()`` fails on Paddle 3.3.1).
"""
from __future__ import annotations

import contextlib
import ctypes
import math
import os
from typing import Dict, List, Optional, Tuple

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle.base import core

from fwkernels.frameworks import base
from fwkernels.frameworks.base import RunConfig
from fwkernels.frameworks.paddle_models import build as build_layer
from fwkernels.models import NCF_ITEMS, NCF_USERS, ModelSpec

LABEL_SMOOTHING = 0.1


def has_tf32_switches() -> bool:
    """Paddle 3 has the TF32 switches in every build; Paddle 2.6 only in its CUDA builds."""
    return hasattr(core, "set_cublas_switch") and hasattr(core, "set_cudnn_switch")


def apply_precision(precision: str) -> None:
    """Set TF32 for cuBLAS (matmul) and cuDNN (convolution, RNN) explicitly: Paddle has no FLAGS_ for it."""
    if has_tf32_switches():
        core.set_cublas_switch(precision == "tf32")
        core.set_cudnn_switch(precision == "tf32")


def precision_flags() -> Dict[str, object]:
    """The TF32 switches as Paddle reports them now, and whether TF32 is on for both."""
    if not has_tf32_switches():
        return {"tf32_enabled": False, "tf32_switches": "absent in this build"}
    flags = {"cublas_tf32": bool(core.get_cublas_switch()),
             "cudnn_tf32": bool(core.get_cudnn_switch())}
    states = list(flags.values())
    tf32 = all(states) if all(states) or not any(states) else "mixed"
    return {"tf32_enabled": tf32, **flags}


def blas_threads() -> Optional[int]:
    """Threads MKL will use, read from the MKL library that Paddle's CPU wheel bundles."""
    path = os.path.join(os.path.dirname(paddle.__file__), "libs", "libmklml_intel.so")
    if not os.path.exists(path):
        return None
    return int(ctypes.CDLL(path).MKL_Get_Max_Threads())


def synthetic_batch(config: RunConfig) -> Tuple[tuple, paddle.Tensor]:
    """Random inputs and labels for the model's task, resident on the current device."""
    rng = np.random.default_rng(config.seed)
    spec, shapes = config.model, config.input_shapes()
    if spec.name == "ncf":
        user = rng.integers(0, NCF_USERS, shapes["user"])
        item = rng.integers(0, NCF_ITEMS, shapes["item"])
        labels = rng.integers(0, 2, shapes["user"]).astype(np.float32)
        inputs: tuple = (user, item)
    elif spec.unit == "tokens":
        src = rng.integers(0, spec.num_classes, shapes["src"])
        tgt = rng.integers(0, spec.num_classes, shapes["tgt"])
        labels = rng.integers(0, spec.num_classes, shapes["tgt"])
        inputs = (src, tgt)
    else:
        inputs = (rng.standard_normal(shapes["image"], dtype=np.float32),)
        labels = rng.integers(0, spec.num_classes, shapes["image"][:1])
    return tuple(paddle.to_tensor(a) for a in inputs), paddle.to_tensor(labels)


def loss_function(spec: ModelSpec):
    if spec.loss == "binary_cross_entropy":
        return F.binary_cross_entropy_with_logits
    if spec.loss == "label_smoothed_cross_entropy":
        return lambda logits, labels: F.cross_entropy(
            logits.reshape([-1, spec.num_classes]).astype("float32"), labels.reshape([-1]),
            label_smoothing=LABEL_SMOOTHING)
    return lambda logits, labels: F.cross_entropy(logits.astype("float32"), labels)


def trainable(layer: paddle.nn.Layer) -> List[paddle.Tensor]:
    return [p for p in layer.parameters() if not p.stop_gradient]


class PaddleWorkload(base.Workload):
    def __init__(self, config: RunConfig) -> None:
        self.config = config
        paddle.set_device("gpu" if config.device == "cuda" else "cpu")
        paddle.seed(config.seed)
        apply_precision(config.precision)
        self.model = build_layer(config.model.name)
        self.model.train()
        self.params = sum(int(p.numel()) for p in trainable(self.model))
        self.inputs, self.labels = synthetic_batch(config)
        loss_fn = loss_function(config.model)

        def compute_loss(inputs: tuple, labels: paddle.Tensor) -> paddle.Tensor:
            return loss_fn(self.model(*inputs), labels)  # to_static rejects *args signatures

        if config.mode == "static":
            self.compute_loss = paddle.jit.to_static(compute_loss)
            self.run_forward = paddle.jit.to_static(self.model.forward)
        else:
            self.compute_loss, self.run_forward = compute_loss, self.model
        # Momentum with L2Decay adds 1e-4 * weight to the gradient before the
        # momentum update, as torch.optim.SGD(weight_decay=1e-4) does.
        self.optimizer = paddle.optimizer.Momentum(
            learning_rate=config.learning_rate, momentum=base.MOMENTUM,
            parameters=trainable(self.model),
            weight_decay=paddle.regularizer.L2Decay(base.WEIGHT_DECAY))
        self._loss = paddle.zeros([])

    def autocast(self):
        if self.config.precision == "bf16":
            return paddle.amp.auto_cast(dtype="bfloat16")
        return contextlib.nullcontext()

    def _loss_and_backward(self) -> None:
        self.optimizer.clear_grad(set_to_zero=False)
        with self.autocast():
            loss = self.compute_loss(self.inputs, self.labels)
        loss.backward()
        self._loss = loss.detach()

    def train_step(self) -> None:
        self._loss_and_backward()
        self.optimizer.step()

    def forward_backward(self) -> None:
        self._loss_and_backward()

    def forward(self) -> paddle.Tensor:
        self.model.eval()
        with paddle.no_grad(), self.autocast():
            out = self.run_forward(*self.inputs)
        self.model.train()
        return out

    def sync(self) -> None:
        if self.config.device == "cuda":
            paddle.device.cuda.synchronize()

    def loss(self) -> float:
        return float(self._loss)

    def output_shape(self) -> Tuple[int, ...]:
        return tuple(self.forward().shape)

    def param_fingerprint(self) -> List[float]:
        return [float(p.astype("float64").sum()) for p in trainable(self.model)]

    def compute_dtype(self) -> str:
        """The dtype a float32 matmul produces under this workload's autocast (read back)."""
        with self.autocast():
            probe = paddle.matmul(paddle.ones([2, 2]), paddle.ones([2, 2]))
        return str(probe.dtype).replace("paddle.", "")

    def precision_settings(self) -> Dict[str, object]:
        return {"policy": self.config.precision, **precision_flags(),
                "compute_dtype": self.compute_dtype(), "flush_denormal": False}

    def peak_memory_bytes(self) -> Optional[int]:
        if self.config.device == "cuda":
            return int(paddle.device.cuda.max_memory_allocated())
        return None


class Backend(base.Backend):
    def version(self) -> str:
        return paddle.__version__

    def device_available(self, device: str) -> bool:
        if device == "cpu":
            return True
        return device == "cuda" and paddle.device.is_compiled_with_cuda() \
            and paddle.device.cuda.device_count() > 0

    def set_threads(self, threads: int) -> None:
        # Paddle sets MKL and OpenMP to FLAGS_paddle_num_threads (1) at import
        # unless OMP_NUM_THREADS is set; this call sets both to ``threads``.
        core.set_num_threads(threads)

    def unsupported_reason(self, config: RunConfig) -> Optional[str]:
        if config.precision == "bf16" and config.device == "cpu":
            return ("paddle.amp.auto_cast takes effect only on CUDA, XPU and custom devices; "
                    "on CPU it leaves float32 (Paddle warns 'it makes no effect')")
        if config.precision == "tf32" and not has_tf32_switches():
            return f"this Paddle {paddle.__version__} build has no TF32 switches (CPU-only build)"
        return None

    def count_params(self, model: ModelSpec) -> int:
        # LazyGuard builds shapes without initialising them; paddle.nn.LSTM fails
        # under it (flatten_parameters coalesces real memory), so GNMT is built for real.
        guard = contextlib.nullcontext() if model.name == "gnmt_v2" else paddle.LazyGuard()
        with guard:
            layer = build_layer(model.name)
        return sum(math.prod(p.shape) for p in trainable(layer))

    def build(self, config: RunConfig) -> base.Workload:
        return PaddleWorkload(config)

    def runtime_info(self, device: str) -> Dict[str, Optional[str]]:
        threads = blas_threads()
        info = {"blas_threads": None if threads is None else str(threads),
                # oneDNN kernels are off in the dynamic graph unless this flag is set;
                # the static mode compiles with CINN where the build has it (CUDA only).
                "use_mkldnn": str(paddle.get_flags(["FLAGS_use_mkldnn"])["FLAGS_use_mkldnn"]),
                "compiled_with_cinn": str(paddle.is_compiled_with_cinn())}
        if device == "cuda":
            info.update(cuda_version=paddle.version.cuda(), cudnn_version=paddle.version.cudnn(),
                        device_name=paddle.device.cuda.get_device_name(),
                        driver_version=base.nvidia_driver_version())
        return info
