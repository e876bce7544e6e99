"""PyTorch backend: torchvision models where it defines them, eager or compiled."""
from __future__ import annotations

import contextlib
import os
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F

from fwkernels.frameworks import base, get_framework
from fwkernels.frameworks.base import LABEL_SMOOTHING, RunConfig
from fwkernels.frameworks.torch import runtime
from fwkernels.frameworks.torch.models import TORCHVISION_MODELS, build as build_module
from fwkernels.models import ModelSpec

CUDA_GRAPH_MODES = ("cudagraphs", "cudagraphs_tuned")  # torch.compile(mode="reduce-overhead")
COMPILED_MODES = ("compile",) + CUDA_GRAPH_MODES
CHANNELS_LAST_MODES = ("channels_last",) + COMPILED_MODES


def torchvision_missing() -> Optional[str]:
    try:
        import torchvision  # noqa: F401
    except Exception as error:  # e.g. an operator mismatch with this torch build
        return f"torchvision does not import here ({type(error).__name__}: {error})"
    return None


def loss_function(spec: ModelSpec):
    if spec.loss == "binary_cross_entropy":
        return F.binary_cross_entropy_with_logits
    if spec.loss == "label_smoothed_cross_entropy":
        return lambda logits, labels: F.cross_entropy(
            logits.flatten(0, 1).float(), labels.flatten(), label_smoothing=LABEL_SMOOTHING)
    return lambda logits, labels: F.cross_entropy(logits.float(), labels)


class TorchSource:
    """The synthetic batch's numbers from PyTorch's own seeded generator (int64 ids): PyTorch
    keeps the batch its figures and tests were made with (base.synthetic_batch)."""

    def __init__(self, seed: int) -> None:
        self.generator = torch.Generator().manual_seed(seed)

    def ids(self, high: int, shape: Tuple[int, ...]) -> torch.Tensor:
        return torch.randint(0, high, shape, generator=self.generator)

    def binary(self, shape: Tuple[int, ...]) -> torch.Tensor:
        return self.ids(2, shape).float()

    def normal(self, shape: Tuple[int, ...]) -> torch.Tensor:
        return torch.randn(*shape, generator=self.generator)


def conv_backward_flops(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation,
                        transposed, _output_padding, _groups, output_mask, out_shape=None) -> int:
    """A convolution's backward: each gradient asked for (input, weight) costs the forward's
    multiply-adds.  torch.utils.flop_counter's own formula drops the division by ``groups`` in
    the weight gradient (MobileNet v2's depthwise convolutions: ~7x its training step's FLOPs)."""
    from torch.utils.flop_counter import conv_flop_count

    forward = conv_flop_count(x_shape, w_shape, grad_out_shape, transposed)
    return forward * (bool(output_mask[0]) + bool(output_mask[1]))


def channels_last(config: RunConfig) -> bool:
    """Whether the image tensors and the model use the channels-last memory format: in the
    channels-last modes, and in the default mode for a convolutional network at tf32 or bf16 on
    a GPU, where Tensor Cores take NHWC (docs/fairness.md, *Layout*)."""
    if "image" not in config.model.inputs:
        return False
    default = config.mode == get_framework("torch").default_mode
    return config.mode in CHANNELS_LAST_MODES or (default and base.tensor_cores_take_nhwc(config))


class TorchWorkload(base.Workload):
    def __init__(self, config: RunConfig) -> None:
        torch.manual_seed(config.seed)
        self.config = config
        self.device = torch.device(config.device)
        runtime.apply_precision(config.precision)
        runtime.set_conv_autotune(config.mode != base.UNTUNED)
        self.flush_denormal = runtime.flush_denormals()
        module = build_module(config.model.name).to(self.device)
        self.params = sum(p.numel() for p in module.parameters() if p.requires_grad)
        self.inputs, self.labels = base.synthetic_batch(
            config, source=TorchSource(config.seed), convert=lambda t: t.to(self.device))
        self.channels_last = channels_last(config)
        if self.channels_last:
            module = module.to(memory_format=torch.channels_last)
            self.inputs = tuple(t.contiguous(memory_format=torch.channels_last) for t in self.inputs)
        self.module = module  # eager module: FLOP counting and parameter access
        if config.mode == "cudagraphs_tuned":
            # Inductor tunes the launch configuration of each Triton kernel it generates
            # (block sizes, warps) by coordinate descent: minutes of warm-up on ResNet-50.
            from torch._inductor import config as inductor_config

            inductor_config.coordinate_descent_tuning = True
        if config.mode == "compile":
            self.model = torch.compile(module)
        elif config.mode in CUDA_GRAPH_MODES:
            self.model = torch.compile(module, mode="reduce-overhead")
        else:
            self.model = module
        self.loss_fn = loss_function(config.model)
        # The compiled modes also take the fused (single-kernel) CUDA implementation of SGD.
        fused = config.mode in COMPILED_MODES and self.device.type == "cuda"
        self.optimizer = torch.optim.SGD(module.parameters(), lr=config.learning_rate,
                                         momentum=base.MOMENTUM, weight_decay=base.WEIGHT_DECAY,
                                         fused=fused or None)
        self._loss = torch.zeros((), device=self.device)

    def autocast(self):
        if self.config.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _loss_and_backward(self, model) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            loss = self.loss_fn(model(*self.inputs), self.labels)
        loss.backward()
        self._loss = loss.detach()

    def train_step(self) -> None:
        self._loss_and_backward(self.model)
        self.optimizer.step()

    def forward_backward(self) -> None:
        self._loss_and_backward(self.model)

    def forward(self) -> torch.Tensor:
        self.model.eval()
        with torch.inference_mode(), self.autocast():
            out = self.model(*self.inputs)
        self.model.train()
        return out

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def loss(self) -> float:
        return float(self._loss)

    def param_fingerprint(self) -> List[float]:
        return [float(p.detach().double().sum()) for p in self.module.parameters()]

    def precision_settings(self) -> Dict[str, object]:
        return {"policy": self.config.precision, **runtime.precision_flags(),
                "compute_dtype": "bfloat16" if self.config.precision == "bf16" else "float32",
                "flush_denormal": self.flush_denormal,
                "cudnn_benchmark": torch.backends.cudnn.benchmark,
                **self._inductor_settings()}

    def policy_settings(self) -> Dict[str, object]:
        return base.policy_fields(self.config, *runtime.conv_autotune(),
                                  "NHWC" if self.channels_last else "NCHW")

    def _inductor_settings(self) -> Dict[str, object]:
        if self.config.mode not in COMPILED_MODES:
            return {}
        from torch._inductor import config as inductor_config

        return {"inductor_coordinate_descent_tuning": inductor_config.coordinate_descent_tuning}

    def peak_memory_bytes(self) -> Optional[int]:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device)
        return None

    def flops_per_step(self) -> Optional[float]:
        from torch.utils.flop_counter import FlopCounterMode

        counter = FlopCounterMode(display=False, custom_mapping={
            torch.ops.aten.convolution_backward: conv_backward_flops})
        with counter:
            self._loss_and_backward(self.module)
        return float(counter.get_total_flops())


class Backend(base.Backend):
    runtime = runtime

    def unsupported_reason(self, config: RunConfig) -> Optional[str]:
        missing = torchvision_missing() if config.model.name in TORCHVISION_MODELS else None
        if missing:
            return missing
        if reason := base.untuned_reason(config):
            return reason
        if config.mode in CUDA_GRAPH_MODES and config.device != "cuda":
            return "CUDA graphs need a CUDA device"
        if config.mode == "channels_last" and "image" not in config.model.inputs:
            return (f"channels_last applies to image tensors; {config.model.name} has none "
                    "(same as eager)")
        return None

    def count_params(self, model: ModelSpec) -> int:
        with torch.device("meta"):  # shapes only: no memory, no initialisation cost
            module = build_module(model.name)
        return sum(p.numel() for p in module.parameters() if p.requires_grad)

    def build(self, config: RunConfig) -> base.Workload:
        return TorchWorkload(config)

    def runtime_info(self, device: str) -> Dict[str, Optional[str]]:
        # TorchInductor reads TORCHINDUCTOR_* variables (max_autotune, ...) for the compiled modes;
        # the record's compile_cache says where its cache was.
        inductor = {k: v for k, v in os.environ.items()
                    if k.startswith("TORCHINDUCTOR_") and k != "TORCHINDUCTOR_CACHE_DIR"}
        return {**({"inductor_env": inductor} if inductor else {}), **runtime.runtime_info(device)}

    def is_out_of_memory(self, error: BaseException) -> bool:
        return runtime.is_out_of_memory(error) or super().is_out_of_memory(error)
