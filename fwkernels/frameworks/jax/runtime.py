"""JAX's process switches: version, devices, XLA's CPU threads, matmul precision, device memory.

Shared by the JAX backend and Keras 3 on its JAX backend; only jax is imported here.
"""
from __future__ import annotations

import os
import re
import warnings
from typing import Any, Dict, Optional, Tuple

# XLA's default autotuning level (4: time cuDNN's and its own kernels' variants, checking their
# results), made explicit before XLA reads its flags (docs/fairness.md); 0 turns it off.
AUTOTUNE_FLAG = "--xla_gpu_autotune_level"
if AUTOTUNE_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {AUTOTUNE_FLAG}=4".strip()

import jax  # noqa: E402

from fwkernels.frameworks import base  # noqa: E402

# jax_default_matmul_precision per policy: it sets the precision of every float32 dot and
# convolution.  XLA's default on GPUs lets cuBLAS/cuDNN use TF32, so fp32 asks for "highest"
# explicitly; "tensorfloat32" lowers to precision HIGH (TF32).
MATMUL_PRECISION = {"fp32": "highest", "tf32": "tensorfloat32", "bf16": "highest"}
# XLA's CPU client sizes its intra-op (Eigen) thread pool from this variable when the client is
# created; XLA_FLAGS has no thread-count flag, only multi-threading on or off
# (--xla_cpu_multi_thread_eigen).
THREADS_VARIABLE = "PJRT_NPROC"
EIGEN_THREAD_NAME = "tf_XLAEigen"  # how the pool's threads are named


def version() -> str:
    return jax.__version__


def jax_device(device: str) -> jax.Device:
    """The first JAX device for "cpu" or "cuda" (JAX's "gpu" platform)."""
    return jax.devices({"cpu": "cpu", "cuda": "gpu"}[device])[0]


def device_available(device: str) -> bool:
    try:
        return bool(jax_device(device))
    except (RuntimeError, KeyError):  # no backend for that platform
        return False


def xla_cpu_threads() -> Optional[int]:
    """Threads of XLA's CPU intra-op pool, counted by name (Linux); None before the client exists."""
    tasks = "/proc/self/task"
    if not os.path.isdir(tasks):
        return None
    names = []
    for task in os.listdir(tasks):
        try:
            with open(f"{tasks}/{task}/comm") as f:
                names.append(f.read().strip())
        except OSError:  # the thread ended meanwhile
            continue
    return names.count(EIGEN_THREAD_NAME) or None


def set_threads(threads: int) -> None:
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():  # too late: the pool exists (read back here)
        if xla_cpu_threads() not in (None, threads):
            warnings.warn(f"XLA's CPU client already runs {xla_cpu_threads()} threads; "
                          f"set_threads({threads}) comes after the first computation")
        return
    os.environ[THREADS_VARIABLE] = str(threads)


def apply_precision(precision: str) -> None:
    jax.config.update("jax_default_matmul_precision", MATMUL_PRECISION[precision])


def precision_flags() -> Dict[str, object]:
    value = jax.config.jax_default_matmul_precision
    # Unset (XLA's default), "high" or "tensorfloat32" let float32 matmuls use TF32 on GPUs.
    return {"tf32_enabled": value not in ("highest", "float32"),
            "jax_default_matmul_precision": value}


def conv_autotune() -> Tuple[bool, str]:
    """XLA's autotuning level as XLA_FLAGS sets it (its last occurrence wins)."""
    levels = re.findall(rf"{AUTOTUNE_FLAG}=(\d+)", os.environ.get("XLA_FLAGS", "")) or ["4"]
    return levels[-1] != "0", f"{AUTOTUNE_FLAG}={levels[-1]}"


def sync(pending: Any = None) -> None:
    jax.block_until_ready(pending)


def peak_memory_bytes(device: str) -> Optional[int]:
    stats = jax_device(device).memory_stats() if device == "cuda" else None
    return stats.get("peak_bytes_in_use") if stats else None


def runtime_info(device: str) -> Dict[str, Optional[str]]:
    if device != "cuda":
        return {}
    gpu = jax_device(device)
    return {"device_name": gpu.device_kind,
            "platform_version": getattr(gpu.client, "platform_version", None),
            "driver_version": base.nvidia_driver_version()}
