"""What every framework backend implements, and what they all share.

A ``Backend`` knows its framework (version, devices, threads: its ``runtime`` module) and builds
a ``Workload``: one model with its optimizer and a synthetic batch resident on the device, ready
to run training steps.  The measurement protocol (``fwkernels.protocol``) only ever talks to
these two classes.  The pieces every framework uses the same way are here once: the optimizer's
constants, the loss's label smoothing, the synthetic batch and the TF32 summary.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

from fwkernels.models import NCF_ITEMS, NCF_USERS, ModelSpec

if TYPE_CHECKING:
    import numpy as np

PRECISIONS = ("fp32", "tf32", "bf16")
DEVICES = ("cpu", "cuda")
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-4
LABEL_SMOOTHING = 0.1  # GNMT v2's label-smoothed cross entropy


@dataclass(frozen=True)
class RunConfig:
    model: ModelSpec
    batch: int
    mode: str  # one of the framework's modes (fwkernels.request resolves the default)
    device: str = "cpu"
    precision: str = "fp32"  # fp32: strict float32 (TF32 off); tf32; bf16: mixed precision
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
        return self.model.input_shapes(self.batch, self.small)

    @property
    def samples_per_step(self) -> int:
        return self.model.samples_per_step(self.batch, self.small)


class NumpySource:
    """Random numbers for the synthetic batch from numpy's seeded generator: int32 ids, 0/1
    labels as float32, float32 normal images (host arrays)."""

    def __init__(self, seed: int) -> None:
        import numpy as np

        self.np, self.rng = np, np.random.default_rng(seed)

    def ids(self, high: int, shape: Tuple[int, ...]) -> Any:
        return self.rng.integers(0, high, shape, dtype=self.np.int32)

    def binary(self, shape: Tuple[int, ...]) -> Any:
        return self.rng.integers(0, 2, shape).astype(self.np.float32)

    def normal(self, shape: Tuple[int, ...]) -> Any:
        return self.rng.standard_normal(shape, dtype=self.np.float32)


def synthetic_batch(config: RunConfig, layout: str = "NCHW", source: Optional[Any] = None,
                    convert: Optional[Callable[[Any], Any]] = None) -> Tuple[tuple, Any]:
    """Random inputs and labels for the model's task, drawn in one order from one seeded
    ``source`` (default: ``NumpySource(config.seed)``): images (in ``layout``, "NCHW" or
    "NHWC") and class ids; source and target token ids and per-token labels; user and item ids
    and 0/1 labels.  Each array passes through ``convert`` (the backend's tensor on its device)."""
    draw = source or NumpySource(config.seed)
    spec, shapes = config.model, config.input_shapes()
    if spec.name == "ncf":
        inputs = (draw.ids(NCF_USERS, shapes["user"]), draw.ids(NCF_ITEMS, shapes["item"]))
        labels = draw.binary(shapes["user"])
    elif spec.unit == "tokens":
        inputs = (draw.ids(spec.num_classes, shapes["src"]),
                  draw.ids(spec.num_classes, shapes["tgt"]))
        labels = draw.ids(spec.num_classes, shapes["tgt"])
    else:
        batch, channels, height, width = shapes["image"]
        inputs = (draw.normal((batch, height, width, channels) if layout == "NHWC"
                              else shapes["image"]),)
        labels = draw.ids(spec.num_classes, (batch,))
    convert = convert or (lambda array: array)
    return tuple(convert(a) for a in inputs), convert(labels)


def int64_ids(array: "np.ndarray") -> "np.ndarray":
    """Integer arrays as int64, the index type of PyTorch's and Paddle's losses; floats as they are."""
    return array if array.dtype.kind == "f" else array.astype("int64")


def tf32_state(switches: Iterable[bool]) -> Union[bool, str]:
    """True when TF32 is on in every switch, False when in none, else "mixed"."""
    states = set(switches)
    return states.pop() if len(states) == 1 else ("mixed" if states else False)


class Workload(ABC):
    """A built model, optimizer (SGD, momentum 0.9, weight decay 1e-4) and resident batch."""

    params: int  # trainable parameters of the built model
    peak_memory_source = "device allocator peak"  # what peak_memory_bytes measures, when not None

    @abstractmethod
    def train_step(self) -> None:
        """Forward, backward and optimizer update on the resident batch (may run async)."""

    def train_steps(self, count: int) -> None:
        """``count`` training steps: one call of the framework's own multi-step loop where it has
        one that its guide recommends (Keras' ``fit``), else ``count`` calls of train_step."""
        for _ in range(count):
            self.train_step()

    @abstractmethod
    def forward_backward(self) -> None:
        """Forward and backward without the optimizer update (convnet-benchmarks' figure)."""

    @abstractmethod
    def forward(self) -> object:
        """Forward only, no gradients (inference mode); returns the output."""

    @abstractmethod
    def sync(self) -> None:
        """Block until all queued device work is done."""

    @abstractmethod
    def loss(self) -> float:
        """Loss of the latest training step, as a Python float (synchronises)."""

    def output_shape(self) -> Tuple[int, ...]:
        """Shape of the forward output for the resident batch."""
        return tuple(self.forward().shape)  # type: ignore[attr-defined]

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

    @abstractmethod
    def policy_settings(self) -> Dict[str, object]:
        """The record's autotuning and layout fields (docs/fairness.md), read back from the
        framework where it can say: ``policy_fields`` builds them."""

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


UNTUNED = "untuned"  # the default mode with the framework's out-of-the-box cuDNN heuristics


def untuned_reason(config: RunConfig) -> Optional[str]:
    """Why mode ``untuned`` cannot run here (it differs from the default only on CUDA), or None."""
    if config.mode == UNTUNED and config.device != "cuda":
        return f"mode {UNTUNED} differs from the default only in cuDNN autotuning: CUDA only"
    return None


def tensor_cores_take_nhwc(config: RunConfig) -> bool:
    """The fairness policy's layout rule (docs/fairness.md, *Layout*): a convolutional network at
    tf32 or bf16 on a GPU, where Tensor Cores take NHWC, runs channels-last in the default mode
    of every framework that lets the user choose."""
    return ("image" in config.model.inputs and config.device == "cuda"
            and config.precision in ("tf32", "bf16"))


def policy_fields(config: RunConfig, autotune: bool, setting: str,
                  layout: str) -> Dict[str, object]:
    """``autotune``, ``autotune_setting`` and ``layout`` of a record: autotuning means cuDNN's
    (None on the CPU, where no framework here times algorithms), the layout that of the image
    tensors ("none" for a model without images)."""
    return {"autotune": autotune if config.device == "cuda" else None,
            "autotune_setting": setting,
            "layout": layout if "image" in config.model.inputs else "none"}


class Backend(ABC):
    """A framework: its ``runtime`` module answers for version, devices, threads and runtime
    versions (the same function names in each framework's runtime.py); the backend builds."""

    runtime: ModuleType

    def __init__(self, info) -> None:
        self.info = info

    @property
    def name(self) -> str:
        return self.info.name

    def version(self) -> str:
        """The framework's version string."""
        return self.runtime.version()

    def device_available(self, device: str) -> bool:
        """Whether ``device`` ("cpu" or "cuda") can run this framework here."""
        return self.runtime.device_available(device)

    def set_threads(self, threads: int) -> None:
        """Use ``threads`` CPU threads for intra-op work (called before any build)."""
        self.runtime.set_threads(threads)

    @abstractmethod
    def count_params(self, model: ModelSpec) -> int:
        """Trainable parameter count of the model as this framework builds it (no forward pass)."""

    @abstractmethod
    def build(self, config: RunConfig) -> Workload:
        """Build model, optimizer and synthetic resident batch under the precision policy."""

    def unsupported_reason(self, config: RunConfig) -> Optional[str]:
        """Why this framework cannot run ``config`` (an N/A with its reason), or None."""
        return None

    def device_unavailable_reason(self, device: str) -> Optional[str]:
        """Why ``device`` can never run this framework here, where the framework knows (said
        with the "not available" usage error), or None."""
        return None

    def runtime_info(self, device: str) -> Dict[str, Optional[str]]:
        """CUDA, cuDNN and driver versions and the device name, where present."""
        return self.runtime.runtime_info(device)

    def is_out_of_memory(self, error: BaseException) -> bool:
        text = f"{type(error).__name__}: {error}".lower()
        return any(s in text for s in ("out of memory", "outofmemory", "resource_exhausted",
                                      "resourceexhausted", "cannot allocate memory"))


_FTZ_DAZ = 0x8040  # x86 MXCSR flush-to-zero and denormals-are-zero bits


def flush_denormals_x86() -> None:
    """Set FTZ/DAZ for this thread; threads started later (a framework's engine, OpenMP and BLAS
    pools) inherit it.  For frameworks without a switch of their own (MXNet, Chainer), called
    before they start their threads: a fixed synthetic batch drives gradients into denormals,
    ~100x slower on x86 CPUs (PyTorch flushes them too, via its own switch)."""
    import ctypes
    import os
    import struct

    if os.uname().machine != "x86_64":
        return
    libm = ctypes.CDLL("libm.so.6")
    env = ctypes.create_string_buffer(32)  # glibc x86-64 fenv_t; MXCSR at offset 28
    if libm.fegetenv(env) == 0:
        struct.pack_into("<I", env, 28, struct.unpack_from("<I", env.raw, 28)[0] | _FTZ_DAZ)
        libm.fesetenv(env)


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
