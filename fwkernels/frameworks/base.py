"""What every framework backend implements: the names are the same in each module.

A ``Backend`` knows its framework (version, devices, threads) and builds a
``Workload``: one model with its optimizer and a synthetic batch resident on the
device, ready to run training steps.  The measurement protocol
(``fwkernels.protocol``) only ever talks to these two classes.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from fwkernels.models import ModelSpec

PRECISIONS = ("fp32", "tf32", "bf16")
DEVICES = ("cpu", "cuda")
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-4


@dataclass(frozen=True)
class RunConfig:
    model: ModelSpec
    batch: int
    device: str = "cpu"
    precision: str = "fp32"  # fp32: strict float32 (TF32 off); tf32; bf16: mixed precision
    mode: str = ""  # "" means the framework's default mode
    small: bool = False  # use the model's small_inputs (tests)
    seed: int = 0
    lr: Optional[float] = None  # None: the model's, scaled linearly to this batch

    @property
    def learning_rate(self) -> float:
        """SGD learning rate: ``ModelSpec.lr`` is for ``batch_gpu``, scaled by batch / batch_gpu.

        Linear scaling (Goyal et al. 2017) keeps small CPU batches from diverging
        over the many steps on one fixed synthetic batch.
        """
        if self.lr is not None:
            return self.lr
        return self.model.lr * self.batch / self.model.batch_gpu

    def input_shapes(self) -> Dict[str, Tuple[int, ...]]:
        """Per-sample input shapes with the batch dimension in front."""
        shapes = self.model.small_inputs if self.small else self.model.inputs
        return {k: (self.batch,) + tuple(v) for k, v in shapes.items()}

    @property
    def samples_per_step(self) -> int:
        return self.model.samples_per_step(self.batch, self.small)


class Workload(ABC):
    """A built model, optimizer (SGD, momentum 0.9, weight decay 1e-4) and resident batch."""

    params: int  # trainable parameters of the built model

    @abstractmethod
    def train_step(self) -> None:
        """Forward, backward and optimizer update on the resident batch (may run async)."""

    @abstractmethod
    def forward_backward(self) -> None:
        """Forward and backward without the optimizer update (convnet-benchmarks' figure)."""

    @abstractmethod
    def forward(self) -> None:
        """Forward only, no gradients (inference mode)."""

    @abstractmethod
    def sync(self) -> None:
        """Block until all queued device work is done."""

    @abstractmethod
    def loss(self) -> float:
        """Loss of the latest training step, as a Python float (synchronises)."""

    @abstractmethod
    def output_shape(self) -> Tuple[int, ...]:
        """Shape of the forward output for the resident batch."""

    @abstractmethod
    def param_fingerprint(self) -> List[float]:
        """One float per trainable tensor (e.g. its sum), to see that a step changes them."""

    @abstractmethod
    def precision_settings(self) -> Dict[str, object]:
        """The precision policy as the framework reports it now (read back, not echoed).

        Keys every backend gives: "policy" (the config's), "tf32_enabled" (bool:
        TF32 allowed for float32 matmul/convolution), "compute_dtype" ("float32" or
        "bfloat16"), plus the framework's own flags.
        """

    def peak_memory_bytes(self) -> Optional[int]:
        """Device-allocator peak of this process; None means use the process RSS figure."""
        return None

    def flops_per_step(self) -> Optional[float]:
        """Model FLOPs of one training step (forward + backward), where countable."""
        return None

    def extra_figures(self, phase: str) -> Dict[str, object]:
        """Framework-specific figures for the record, called after a phase ("train" or "forward")
        and after its memory figure was taken; keys must not clash with the common ones."""
        return {}


class Backend(ABC):
    def __init__(self, info) -> None:
        self.info = info

    @property
    def name(self) -> str:
        return self.info.name

    @abstractmethod
    def version(self) -> str:
        """The framework's version string."""

    @abstractmethod
    def device_available(self, device: str) -> bool:
        """Whether ``device`` ("cpu" or "cuda") can run this framework here."""

    @abstractmethod
    def set_threads(self, threads: int) -> None:
        """Use ``threads`` CPU threads for intra-op work (called before any build)."""

    @abstractmethod
    def count_params(self, model: ModelSpec) -> int:
        """Trainable parameter count of the model as this framework builds it (no forward pass)."""

    @abstractmethod
    def build(self, config: RunConfig) -> Workload:
        """Build model, optimizer and synthetic resident batch under the precision policy."""

    def unsupported_reason(self, config: RunConfig) -> Optional[str]:
        """Why this framework cannot run ``config`` (an N/A with its reason), or None."""
        return None

    def runtime_info(self, device: str) -> Dict[str, Optional[str]]:
        """CUDA, cuDNN and driver versions and the device name, where present."""
        return {}

    def is_out_of_memory(self, error: BaseException) -> bool:
        text = f"{type(error).__name__}: {error}".lower()
        return any(s in text for s in ("out of memory", "outofmemory", "resource_exhausted",
                                      "resourceexhausted", "cannot allocate memory"))


def nvidia_driver_version() -> Optional[str]:
    """The NVIDIA driver version from nvidia-smi, or None where there is none."""
    import shutil
    import subprocess

    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
