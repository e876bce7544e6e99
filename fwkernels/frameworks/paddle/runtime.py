"""PaddlePaddle's process switches: version, devices, threads, TF32, device memory, runtime info."""
from __future__ import annotations

import ctypes
import os
from typing import Dict, Optional

import paddle
from paddle.base import core

from fwkernels.frameworks import base


def version() -> str:
    return paddle.__version__


def device_available(device: str) -> bool:
    if device == "cpu":
        return True
    return device == "cuda" and paddle.device.is_compiled_with_cuda() \
        and paddle.device.cuda.device_count() > 0


def set_threads(threads: int) -> None:
    # Paddle sets MKL and OpenMP to FLAGS_paddle_num_threads (1) at import
    # unless OMP_NUM_THREADS is set; this call sets both to ``threads``.
    core.set_num_threads(threads)


def mkl_library() -> str:
    """The MKL that Paddle's CPU wheel bundles (MKLML 2019.0.5 in 3.3.1); it may be absent."""
    return os.path.join(os.path.dirname(paddle.__file__), "libs", "libmklml_intel.so")


def blas_threads() -> Optional[int]:
    """Threads MKL will use, read from the MKL library that Paddle's CPU wheel bundles."""
    path = mkl_library()
    if not os.path.exists(path):
        return None
    return int(ctypes.CDLL(path).MKL_Get_Max_Threads())


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
    return {"tf32_enabled": base.tf32_state(flags.values()), **flags}


AUTOTUNE_FLAG = "FLAGS_cudnn_exhaustive_search"  # off by default; CUDA builds only


def set_cudnn_autotune(on: bool) -> Optional[bool]:
    """Let cuDNN time every convolution algorithm for each shape (the first step pays for it);
    the flag as read back, None where this build has no cuDNN (Paddle rejects the flag)."""
    try:
        paddle.set_flags({AUTOTUNE_FLAG: on})
        return bool(paddle.get_flags([AUTOTUNE_FLAG])[AUTOTUNE_FLAG])
    except ValueError:
        return None


def sync(pending: object = None) -> None:
    paddle.device.cuda.synchronize()


def peak_memory_bytes(device: str) -> Optional[int]:
    return int(paddle.device.cuda.max_memory_allocated()) if device == "cuda" else None


def runtime_info(device: str) -> Dict[str, Optional[str]]:
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
