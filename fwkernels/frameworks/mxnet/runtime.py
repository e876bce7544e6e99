"""MXNet's process switches: threads and the floating-point environment (fixed at import, so set
here before ``import mxnet``), version, devices, the TF32 override, denormals, runtime info."""
from __future__ import annotations

import os
from typing import Dict, Optional, Tuple

# Operators run one at a time (MXNet's default, made explicit), each on OMP_NUM_THREADS
# OpenMP threads (oneDNN included): the intra-op count is the common thread count.
os.environ["MXNET_CPU_WORKER_NTHREADS"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0))))
# MXNet 1.9.1 has no TF32 switch, but its float32 convolutions ask cuDNN for the default
# math, which uses TF32 on Ampere and newer: NVIDIA's override keeps float32 strict.
os.environ["NVIDIA_TF32_OVERRIDE"] = "0"
# MXNet's default (1: time the algorithms within a workspace limit), made explicit
# (docs/fairness.md); 0 turns it off, 2 lifts the limit.
AUTOTUNE_VARIABLE = "MXNET_CUDNN_AUTOTUNE_DEFAULT"
os.environ.setdefault(AUTOTUNE_VARIABLE, "1")

from fwkernels.frameworks import base  # noqa: E402

# MXNet has no flush-to-zero switch: set FTZ/DAZ before its engine and OpenMP threads start.
base.flush_denormals_x86()

import mxnet as mx  # noqa: E402  (after the settings above)


def version() -> str:
    return mx.__version__


def context(device: str) -> mx.Context:
    return mx.gpu(0) if device == "cuda" else mx.cpu(0)


def device_available(device: str) -> bool:
    return device == "cpu" or (device == "cuda" and mx.context.num_gpus() > 0)


def set_threads(threads: int) -> None:
    fixed = int(os.environ["OMP_NUM_THREADS"])
    if threads != fixed:
        raise ValueError(f"MXNet fixed its OpenMP thread count ({fixed}) at import; set "
                         f"OMP_NUM_THREADS={threads} before importing it")


def denormals_flushed() -> bool:
    """Read back through MXNet's own CPU operator threads: does a denormal product come out as 0?"""
    product = mx.nd.full((1 << 20,), 1e-38, ctx=mx.cpu()) * 1e-5  # 1e-43 unless flushed
    return float(product.abs().max().asscalar()) == 0.0


def precision_flags() -> Dict[str, object]:
    return {"tf32_enabled": False,  # no TF32 on CPU; on GPU NVIDIA_TF32_OVERRIDE=0 above
            "NVIDIA_TF32_OVERRIDE": os.environ.get("NVIDIA_TF32_OVERRIDE"),
            "flush_denormal": denormals_flushed()}


def conv_autotune() -> Tuple[bool, str]:
    value = os.environ[AUTOTUNE_VARIABLE]
    return value.strip() != "0", f"{AUTOTUNE_VARIABLE}={value}"


def sync(pending: object = None) -> None:
    mx.nd.waitall()


def runtime_info(device: str) -> Dict[str, Optional[str]]:
    info = {"omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "mxnet_cpu_worker_nthreads": os.environ.get("MXNET_CPU_WORKER_NTHREADS")}
    if device == "cuda":
        info["driver_version"] = base.nvidia_driver_version()
        capability = mx.util.get_cuda_compute_capability(mx.gpu(0))
        info["compute_capability"] = f"{capability // 10}.{capability % 10}"
    return info


def is_out_of_memory(error: BaseException) -> bool:
    return "cudaErrorMemoryAllocation" in str(error)


def cpu_has(flags: Tuple[str, ...]) -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            present = next(line for line in f if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return False
    return all(flag in present for flag in flags)
