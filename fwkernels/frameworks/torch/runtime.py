"""PyTorch's process switches: version, devices, threads, TF32, denormals, device memory.

Shared by the PyTorch backend and Keras 3 on its PyTorch backend.
"""
from __future__ import annotations

import contextlib
from typing import Dict, Optional, Tuple

import torch

from fwkernels.frameworks import base


def version() -> str:
    return torch.__version__


def device_available(device: str) -> bool:
    return device == "cpu" or (device == "cuda" and torch.cuda.is_available())


def set_threads(threads: int) -> None:
    torch.set_num_threads(threads)
    with contextlib.suppress(RuntimeError):  # settable once per process only
        torch.set_num_interop_threads(threads)


def apply_precision(precision: str) -> None:
    """Set TF32 use explicitly: PyTorch's defaults differ between cuBLAS and cuDNN."""
    fp32_mode = "tf32" if precision == "tf32" else "ieee"
    if hasattr(torch.backends, "fp32_precision"):  # the API of torch >= 2.9
        torch.backends.cuda.matmul.fp32_precision = fp32_mode
        torch.backends.cudnn.conv.fp32_precision = fp32_mode
        torch.backends.cudnn.rnn.fp32_precision = fp32_mode
    else:
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"


def flush_denormals() -> bool:
    """Flush denormal floats to zero; whether the CPU supports it.  A fixed synthetic batch
    drives the loss toward zero and the gradients into denormals, ~100x slower on x86 CPUs
    (TensorFlow and XLA flush them by default)."""
    return torch.set_flush_denormal(True)


def precision_flags() -> Dict[str, object]:
    """The TF32 switches as PyTorch reports them now, and whether TF32 is on for all of them."""
    if hasattr(torch.backends, "fp32_precision"):
        flags = {"cuda.matmul.fp32_precision": torch.backends.cuda.matmul.fp32_precision,
                 "cudnn.conv.fp32_precision": torch.backends.cudnn.conv.fp32_precision,
                 "cudnn.rnn.fp32_precision": torch.backends.cudnn.rnn.fp32_precision}
        states = [value == "tf32" for value in flags.values()]
    else:
        flags = {"cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                 "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32}
        states = list(flags.values())
    return {"tf32_enabled": base.tf32_state(states), **flags}


def set_conv_autotune(on: bool) -> None:
    """cuDNN times its convolution algorithms for fixed shapes during the warm-up (the fairness
    policy, docs/fairness.md); off is PyTorch's out-of-the-box heuristic choice."""
    torch.backends.cudnn.benchmark = on


def conv_autotune() -> Tuple[bool, str]:
    """Whether cuDNN times its convolution algorithms (``cudnn.benchmark``; off by default)."""
    on = torch.backends.cudnn.benchmark
    return on, f"cudnn.benchmark={on}"


def sync(pending: object = None) -> None:
    """Wait for the device's queued work (``pending``: what JAX would wait for)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def peak_memory_bytes(device: str) -> Optional[int]:
    return torch.cuda.max_memory_allocated() if device == "cuda" else None


def runtime_info(device: str) -> Dict[str, Optional[str]]:
    if device != "cuda":
        return {}
    return {"cuda_version": torch.version.cuda,
            "cudnn_version": str(torch.backends.cudnn.version()),
            "device_name": torch.cuda.get_device_name(),
            "driver_version": base.nvidia_driver_version()}


def is_out_of_memory(error: BaseException) -> bool:
    return isinstance(error, torch.cuda.OutOfMemoryError)
