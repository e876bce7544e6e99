"""PaddlePaddle backend: dynamic graph (default) or ``paddle.jit.to_static``.

cuDNN's exhaustive algorithm search is on in both, and convolutional networks at tf32 and bf16
on a GPU run in the NHWC layout (docs/fairness.md); mode "untuned" is the dynamic graph with
Paddle's out-of-the-box heuristics and layout (NCHW).

Mode "static" converts forward + loss with the default ``paddle.jit.to_static``
(backward and the optimizer update stay outside: ``to_static(full_graph=True)``
around a step that calls ``loss.backward()`` fails on Paddle 3.3.1).
"""
from __future__ import annotations

import contextlib
import math
from typing import Dict, List, Optional

import paddle
import paddle.nn.functional as F

from fwkernels.frameworks import base
from fwkernels.frameworks.base import LABEL_SMOOTHING, RunConfig
from fwkernels.frameworks.paddle import runtime
from fwkernels.frameworks.paddle.models import build as build_layer
from fwkernels.models import ModelSpec


def loss_function(spec: ModelSpec):
    if spec.loss == "binary_cross_entropy":
        return F.binary_cross_entropy_with_logits
    if spec.loss == "label_smoothed_cross_entropy":
        return lambda logits, labels: F.cross_entropy(
            logits.reshape([-1, spec.num_classes]).astype("float32"), labels.reshape([-1]),
            label_smoothing=LABEL_SMOOTHING)
    return lambda logits, labels: F.cross_entropy(logits.astype("float32"), labels)


def layout(config: RunConfig) -> str:
    """NHWC where the fairness policy asks for channels-last, except in mode "untuned"."""
    return "NHWC" if config.mode != base.UNTUNED and base.tensor_cores_take_nhwc(config) else "NCHW"


def trainable(layer: paddle.nn.Layer) -> List[paddle.Tensor]:
    return [p for p in layer.parameters() if not p.stop_gradient]


class PaddleWorkload(base.Workload):
    def __init__(self, config: RunConfig) -> None:
        self.config = config
        paddle.set_device("gpu" if config.device == "cuda" else "cpu")
        paddle.seed(config.seed)
        runtime.apply_precision(config.precision)
        self.autotune = runtime.set_cudnn_autotune(config.mode != base.UNTUNED)
        self.layout = layout(config)
        self.model = build_layer(config.model.name, self.layout)
        self.model.train()
        self.params = sum(int(p.numel()) for p in trainable(self.model))
        self.inputs, self.labels = base.synthetic_batch(
            config, layout=self.layout, convert=lambda a: paddle.to_tensor(base.int64_ids(a)))
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
            runtime.sync()

    def loss(self) -> float:
        return float(self._loss)

    def param_fingerprint(self) -> List[float]:
        return [float(p.astype("float64").sum()) for p in trainable(self.model)]

    def compute_dtype(self) -> str:
        """The dtype a float32 matmul produces under this workload's autocast (read back)."""
        with self.autocast():
            probe = paddle.matmul(paddle.ones([2, 2]), paddle.ones([2, 2]))
        return str(probe.dtype).replace("paddle.", "")

    def precision_settings(self) -> Dict[str, object]:
        return {"policy": self.config.precision, **runtime.precision_flags(),
                "compute_dtype": self.compute_dtype(), "flush_denormal": False}

    def policy_settings(self) -> Dict[str, object]:
        setting = (f"{runtime.AUTOTUNE_FLAG}={self.autotune}" if self.autotune is not None
                   else f"{runtime.AUTOTUNE_FLAG} absent (a build without cuDNN)")
        return base.policy_fields(self.config, bool(self.autotune), setting, self.layout)

    def peak_memory_bytes(self) -> Optional[int]:
        return runtime.peak_memory_bytes(self.config.device)


class Backend(base.Backend):
    runtime = runtime

    def unsupported_reason(self, config: RunConfig) -> Optional[str]:
        if reason := base.untuned_reason(config):
            return reason
        if config.precision == "bf16" and config.device == "cpu":
            return ("paddle.amp.auto_cast takes effect only on CUDA, XPU and custom devices; "
                    "on CPU it leaves float32 (Paddle warns 'it makes no effect')")
        if config.precision == "tf32" and not runtime.has_tf32_switches():
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
