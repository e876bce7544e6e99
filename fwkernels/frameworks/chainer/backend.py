"""Chainer 7.8.1 backend: define-by-run (Chainer's only execution), NCHW, numpy on the CPU.

The graph is recorded as the forward pass runs; ``backward`` walks it and
``MomentumSGD`` with a ``WeightDecay`` hook updates every parameter.  CUDA goes
through CuPy when it is installed.  docs/chainer.md describes the threads, precisions and quirks.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from fwkernels.frameworks.chainer import runtime  # first: FTZ/DAZ before numpy's threads

import chainer  # noqa: E402
import chainer.functions as F  # noqa: E402
import numpy  # noqa: E402

from fwkernels.frameworks import base  # noqa: E402
from fwkernels.frameworks.base import LABEL_SMOOTHING, RunConfig  # noqa: E402
from fwkernels.frameworks.chainer.models import build as build_model  # noqa: E402
from fwkernels.frameworks.chainer.models import count_trainable  # noqa: E402
from fwkernels.models import ModelSpec  # noqa: E402


def loss_function(spec: ModelSpec):
    """The PyTorch backend's losses: batch means, computed in float32."""
    def cross_entropy(logits: chainer.Variable, labels: chainer.Variable) -> chainer.Variable:
        logits = F.reshape(logits, (-1, logits.shape[-1]))
        labels = F.reshape(labels, (-1,))
        if spec.loss != "label_smoothed_cross_entropy":
            return F.softmax_cross_entropy(logits, labels)
        log_p = F.log_softmax(logits)
        nll = -F.select_item(log_p, labels)
        return F.mean((1 - LABEL_SMOOTHING) * nll - LABEL_SMOOTHING * F.mean(log_p, axis=1))

    def binary_cross_entropy_with_logits(logits: chainer.Variable,
                                         labels: chainer.Variable) -> chainer.Variable:
        # F.sigmoid_cross_entropy wants int32 labels; this is its formula on 0/1 floats
        return F.mean(F.relu(logits) - logits * labels + F.log1p(F.exp(-F.absolute(logits))))

    if spec.loss == "binary_cross_entropy":
        return binary_cross_entropy_with_logits
    return cross_entropy


class ChainerWorkload(base.Workload):
    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.device = runtime.chainer_device(config.device)
        # cuDNN times its convolution algorithms per shape (docs/fairness.md); Chainer's default
        # is off, kept by mode "untuned".
        runtime.set_cudnn_autotune(config.mode != base.UNTUNED)
        numpy.random.seed(config.seed)  # Chainer's initialisers draw from numpy's global generator
        self.model = build_model(config.model.name)
        self.model.to_device(self.device)
        self.params = count_trainable(self.model)
        self.inputs, self.labels = base.synthetic_batch(config, convert=self.device.send)
        self.loss_fn = loss_function(config.model)
        self.optimizer = chainer.optimizers.MomentumSGD(lr=config.learning_rate,
                                                        momentum=base.MOMENTUM)
        self.optimizer.setup(self.model)
        # adds 1e-4 * weight to the gradient before the momentum update, as
        # torch.optim.SGD(weight_decay=1e-4) does
        self.optimizer.add_hook(chainer.optimizer_hooks.WeightDecay(base.WEIGHT_DECAY))
        self._loss: Optional[object] = None

    def _loss_and_backward(self) -> None:
        self.model.cleargrads()
        loss = self.loss_fn(self.model(*self.inputs), self.labels)
        loss.backward()
        self._loss = loss.array  # the graph goes with the Variable

    def train_step(self) -> None:
        self._loss_and_backward()
        self.optimizer.update()

    def forward_backward(self) -> None:
        self._loss_and_backward()

    def forward(self) -> chainer.Variable:
        with chainer.using_config("train", False), chainer.no_backprop_mode():
            return self.model(*self.inputs)

    def sync(self) -> None:
        runtime.sync(self.config.device)

    def loss(self) -> float:
        return float(self._loss) if self._loss is not None else float("nan")

    def param_fingerprint(self) -> List[float]:
        return [float(p.array.sum(dtype="float64")) for p in self.model.params()]

    def precision_settings(self) -> Dict[str, object]:
        dtypes = {str(p.dtype) for p in self.model.params()}
        return {"policy": self.config.precision,
                "compute_dtype": dtypes.pop() if len(dtypes) == 1 else "mixed",
                **runtime.precision_flags()}

    def policy_settings(self) -> Dict[str, object]:
        return base.policy_fields(self.config, *runtime.conv_autotune(), "NCHW")

    def peak_memory_bytes(self) -> Optional[int]:
        return runtime.peak_memory_bytes(self.config.device)


class Backend(base.Backend):
    runtime = runtime

    def unsupported_reason(self, config: RunConfig) -> Optional[str]:
        if reason := base.untuned_reason(config):
            return reason
        if config.precision == "tf32":
            return ("Chainer 7.8.1 and CuPy 7 have no TF32 switch (cuDNN 8 may pick TF32 for "
                    "float32 convolutions, nothing selects it elsewhere); fp32 runs strict float32")
        if config.precision == "bf16":
            return ("Chainer 7.8.1 has no bfloat16: numpy has no such dtype, and Chainer's mixed "
                    "precision (chainer.config.dtype = mixed16) is float16")
        return None

    def count_params(self, model: ModelSpec) -> int:
        return count_trainable(build_model(model.name))

    def build(self, config: RunConfig) -> base.Workload:
        return ChainerWorkload(config)

    def is_out_of_memory(self, error: BaseException) -> bool:
        return runtime.is_out_of_memory(error) or super().is_out_of_memory(error)
