"""Keras 3's process switches: which backend it runs on, and its dtype policy.

The switches of the framework underneath (threads, TF32, device memory) are that framework's
own runtime module: ``fwkernels.frameworks.<jax|torch|tensorflow>.runtime``.
"""
from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

POLICIES = {"fp32": "float32", "tf32": "float32", "bf16": "mixed_bfloat16"}


def import_keras(backend: str) -> ModuleType:
    """Keras on ``backend``: KERAS_BACKEND must be set before the first ``import keras``."""
    if "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = backend
        framework_runtime(backend)  # its switches set before Keras imports the framework
    import keras

    return keras


def framework_runtime(backend: str) -> ModuleType:
    """The runtime module of the framework Keras runs on."""
    return importlib.import_module(f"fwkernels.frameworks.{backend}.runtime")


def set_policy(keras: ModuleType, precision: str) -> None:
    """Keras' global dtype policy for the precision: bf16 is Keras mixed precision."""
    keras.mixed_precision.set_global_policy(POLICIES[precision])
