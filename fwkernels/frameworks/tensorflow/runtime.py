"""TensorFlow's process switches: version, devices, threads, TF32, device memory.

Shared by the TensorFlow backend and Keras 3 on its TensorFlow backend.

Log noise: ``TF_CPP_MIN_LOG_LEVEL=2`` (unless already set) is put in the environment before
TensorFlow is imported, which hides TensorFlow's C++ INFO and WARNING lines; TensorFlow's and
absl's Python loggers are set to ERROR.  Set TF_CPP_MIN_LOG_LEVEL=0 to see everything.
docs/tensorflow.md lists the lines that remain (TensorFlow 2.21 prints the oneDNN banner before
its log level applies).
"""
from __future__ import annotations

import os
from typing import Dict, Optional, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before the first import of TensorFlow
# TensorFlow's default, made explicit (docs/fairness.md): read at the first convolution.
AUTOTUNE_VARIABLE = "TF_CUDNN_USE_AUTOTUNE"
os.environ.setdefault(AUTOTUNE_VARIABLE, "1")

import absl.logging  # noqa: E402
import tensorflow as tf  # noqa: E402

from fwkernels.frameworks import base  # noqa: E402

absl.logging.set_verbosity(absl.logging.ERROR)
tf.get_logger().setLevel("ERROR")


def version() -> str:
    return tf.__version__


def gpu_available() -> bool:
    return bool(tf.config.list_physical_devices("GPU"))


def device_available(device: str) -> bool:
    return device == "cpu" or (device == "cuda" and gpu_available())


def set_threads(threads: int) -> None:
    threading = tf.config.threading
    for setter, getter in ((threading.set_intra_op_parallelism_threads,
                            threading.get_intra_op_parallelism_threads),
                           (threading.set_inter_op_parallelism_threads,
                            threading.get_inter_op_parallelism_threads)):
        try:
            setter(threads)
        except RuntimeError:  # settable only until TensorFlow's runtime starts
            if getter() != threads:
                raise


def apply_precision(precision: str) -> None:
    """TF32 only for "tf32": TensorFlow enables it by default."""
    tf.config.experimental.enable_tensor_float_32_execution(precision == "tf32")


def precision_flags() -> Dict[str, object]:
    return {"tf32_enabled": tf.config.experimental.tensor_float_32_execution_enabled()}


def conv_autotune() -> Tuple[bool, str]:
    """Whether cuDNN's convolution algorithms are timed (TensorFlow reads "0"/"false" as off)."""
    value = os.environ[AUTOTUNE_VARIABLE]
    return value.strip().lower() not in ("0", "false"), f"{AUTOTUNE_VARIABLE}={value}"


def sync(pending: object = None) -> None:
    """Wait for the device's queued work (``pending``: what JAX would wait for)."""
    tf.test.experimental.sync_devices()


def peak_memory_bytes(device: str) -> Optional[int]:
    return tf.config.experimental.get_memory_info("GPU:0")["peak"] if device == "cuda" else None


def runtime_info(device: str) -> Dict[str, Optional[str]]:
    if device != "cuda":
        return {}
    build = tf.sysconfig.get_build_info()
    details = tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0])
    return {"cuda_version": build.get("cuda_version"), "cudnn_version": build.get("cudnn_version"),
            "device_name": details.get("device_name"),
            "driver_version": base.nvidia_driver_version()}


def is_out_of_memory(error: BaseException) -> bool:
    return isinstance(error, tf.errors.ResourceExhaustedError)
