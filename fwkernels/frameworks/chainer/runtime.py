"""Chainer's process switches: the floating-point environment (set here before numpy's BLAS
threads start), version, devices, threads, the TF32 override, the cuDNN autotuner, runtime info.

Chainer's CPU path is numpy: every float32 matrix product and convolution (im2col, then a
``tensordot``) runs in the BLAS numpy was built with (OpenBLAS in numpy's wheels), the rest in
numpy's own single-threaded loops.  iDeep (``ideep4py``, Intel's oneDNN bindings) would replace
some of them, but it has no wheel for the Python fwkernels runs on, and Chainer uses it only when
``chainer.config.use_ideep`` says so: ``runtime_info`` records both.
"""
from __future__ import annotations

import ctypes
import os
from typing import Dict, Optional, Tuple

# CuPy 7 (Chainer 7.8.1's) has no TF32 switch, but its float32 cuDNN convolutions ask for the
# default math, which uses TF32 on Ampere and newer: NVIDIA's override keeps float32 strict.
os.environ["NVIDIA_TF32_OVERRIDE"] = "0"

from fwkernels.frameworks import base  # noqa: E402

# Neither Chainer nor numpy has a flush-to-zero switch: set FTZ/DAZ before numpy's OpenBLAS
# starts its threads (they inherit it).
base.flush_denormals_x86()

import chainer  # noqa: E402  (after the settings above)
import numpy  # noqa: E402

AUTOTUNE_SETTING = "chainer.config.autotune"  # cuDNN's convolution autotuner; off by default


def version() -> str:
    return chainer.__version__


def cupy_missing() -> Optional[str]:
    """Why Chainer cannot use CUDA here, or None when it can."""
    if not chainer.backends.cuda.available:
        return "CuPy (Chainer's CUDA arrays) is not installed or does not import here"
    if chainer.backends.cuda.cupy.cuda.runtime.getDeviceCount() == 0:
        return "CuPy sees no CUDA device"
    return None


def chainer_device(name: str) -> chainer.backend.Device:
    return chainer.get_device("@cupy:0" if name == "cuda" else "@numpy")


def device_available(device: str) -> bool:
    return device == "cpu" or (device == "cuda" and cupy_missing() is None)


def _openblas() -> Optional[Tuple[ctypes.CDLL, str]]:
    """numpy's OpenBLAS as loaded in this process, and its symbols' suffix (numpy's wheels build
    it with 64-bit integers, its functions named ``..._64_``); None for another BLAS."""
    with open("/proc/self/maps") as f:
        paths = sorted({line.split()[-1] for line in f
                        if "openblas" in line.rsplit("/", 1)[-1].lower()})
    for path in paths:
        library = ctypes.CDLL(path)  # the copy already loaded: the same handle
        for suffix in ("64_", ""):
            if hasattr(library, f"openblas_get_num_threads{suffix}"):
                return library, suffix
    return None


def blas_threads() -> Optional[int]:
    """Threads numpy's OpenBLAS will use, read back from the library."""
    found = _openblas()
    if found is None:
        return None
    return int(getattr(found[0], f"openblas_get_num_threads{found[1]}")())


def set_threads(threads: int) -> None:
    """Chainer has no thread setting: its CPU threads are those of numpy's BLAS."""
    found = _openblas()
    if found is None:
        raise ValueError("numpy here is not built with OpenBLAS, whose threads fwkernels sets "
                         f"for Chainer's CPU path ({numpy.__version__})")
    library, suffix = found
    getattr(library, f"openblas_set_num_threads{suffix}")(threads)
    if blas_threads() != threads:
        raise ValueError(f"OpenBLAS kept {blas_threads()} threads when asked for {threads}")


def blas_config() -> Optional[str]:
    """OpenBLAS's build line (version, kernel, thread limit)."""
    found = _openblas()
    if found is None:
        return None
    config = getattr(found[0], f"openblas_get_config{found[1]}")
    config.restype = ctypes.c_char_p
    return config().decode()


def denormals_flushed() -> bool:
    """Read back in numpy's own loop and in OpenBLAS's threads: do denormal products come out 0?"""
    product = numpy.full(1 << 20, 1e-38, numpy.float32) * numpy.float32(1e-5)  # else 1e-43
    tiny = numpy.full((256, 256), 1e-22, numpy.float32)  # 1e-44 products: a threaded sgemm
    return not product.any() and not (tiny @ tiny).any()


def precision_flags() -> Dict[str, object]:
    return {"tf32_enabled": False,  # no TF32 on CPU; on GPU NVIDIA_TF32_OVERRIDE=0 above
            "NVIDIA_TF32_OVERRIDE": os.environ.get("NVIDIA_TF32_OVERRIDE"),
            "chainer_dtype": str(numpy.dtype(chainer.config.dtype)),
            "flush_denormal": denormals_flushed()}


def set_cudnn_autotune(on: bool) -> None:
    chainer.global_config.autotune = on


def conv_autotune() -> Tuple[bool, str]:
    on = bool(chainer.config.autotune)
    return on, f"{AUTOTUNE_SETTING}={on}"


def sync(device: str) -> None:
    if device == "cuda":
        chainer.backends.cuda.cupy.cuda.Device().synchronize()


def peak_memory_bytes(device: str) -> Optional[int]:
    """On GPU: what CuPy's memory pool holds (it keeps what it allocated: its high-water mark)."""
    if device != "cuda":
        return None
    return int(chainer.backends.cuda.cupy.get_default_memory_pool().total_bytes())


def runtime_info(device: str) -> Dict[str, Optional[str]]:
    threads = blas_threads()
    info = {"blas_threads": None if threads is None else str(threads),
            "blas_config": blas_config(), "numpy_version": numpy.__version__,
            "ideep_available": str(chainer.backends.intel64.is_ideep_available()),
            "use_ideep": str(chainer.config.use_ideep)}
    if device == "cuda":
        cupy = chainer.backends.cuda.cupy
        info.update(cupy_version=cupy.__version__,
                    cuda_version=str(cupy.cuda.runtime.runtimeGetVersion()),
                    cudnn_version=str(chainer.backends.cuda.cudnn.getVersion())
                    if chainer.backends.cuda.cudnn_enabled else None,
                    device_name=cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                    driver_version=base.nvidia_driver_version())
    return info


def is_out_of_memory(error: BaseException) -> bool:
    return type(error).__name__ == "OutOfMemoryError"  # cupy.cuda.memory.OutOfMemoryError
