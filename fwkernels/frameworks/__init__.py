"""The framework registry.

Each framework is one backend module under ``fwkernels/frameworks/`` that
imports its framework only when a backend is loaded, so ``import fwkernels``
works in an environment holding a single framework (or none).  To add a
framework: write ``fwkernels/frameworks/<name>_backend.py`` with a
``Backend`` subclass named ``Backend`` and add one ``FrameworkInfo`` line below.
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from fwkernels.frameworks.base import Backend, Workload  # noqa: F401 (public API)


@dataclass(frozen=True)
class FrameworkInfo:
    name: str  # the name used on the command line and in asv params
    title: str  # the name the papers use
    package: str  # import name whose presence makes the framework available
    module: str  # backend module, relative to fwkernels.frameworks
    modes: Tuple[str, ...]  # execution modes; the first is the default
    tuned_modes: Tuple[str, ...] = ()  # the compiled modes that FWKERNELS_MODES=tuned adds
    options: Tuple[Tuple[str, str], ...] = ()  # passed to the backend (e.g. the Keras backend)

    @property
    def default_mode(self) -> str:
        return self.modes[0]

    def check_mode(self, mode: str) -> None:
        """ValueError naming the valid modes unless ``mode`` is one of this framework's."""
        if mode not in self.modes:
            raise ValueError(f"unknown mode {mode!r} for {self.name}; "
                             f"valid modes: {', '.join(self.modes)}")


_FRAMEWORKS = [
    FrameworkInfo("torch", "PyTorch", "torch", "torch_backend",
                  ("eager", "channels_last", "compile", "cudagraphs", "cudagraphs_tuned"),
                  tuned_modes=("compile", "cudagraphs")),
    FrameworkInfo("tensorflow", "TensorFlow", "tensorflow", "tensorflow_backend",
                  ("function", "xla"), tuned_modes=("xla",)),
    FrameworkInfo("mxnet", "MXNet", "mxnet", "mxnet_backend", ("hybrid", "imperative")),
    FrameworkInfo("paddle", "PaddlePaddle", "paddle", "paddle_backend", ("dynamic", "static"),
                  tuned_modes=("static",)),
    FrameworkInfo("chainer", "Chainer", "chainer", "chainer_backend", ("define_by_run",)),
    FrameworkInfo("cntk", "CNTK", "cntk", "cntk_backend", ("graph",)),
    FrameworkInfo("jax", "JAX/Flax", "flax", "jax_backend", ("jit",)),  # flax brings jax
    FrameworkInfo("keras-jax", "Keras 3 (JAX)", "keras", "keras_backend", ("jit",),
                  options=(("backend", "jax"),)),
    FrameworkInfo("keras-torch", "Keras 3 (PyTorch)", "keras", "keras_backend", ("eager",),
                  options=(("backend", "torch"),)),
    FrameworkInfo("keras-tensorflow", "Keras 3 (TensorFlow)", "keras", "keras_backend",
                  ("function",), options=(("backend", "tensorflow"),)),
]

FRAMEWORKS: Dict[str, FrameworkInfo] = {f.name: f for f in _FRAMEWORKS}


def list_frameworks() -> List[str]:
    return list(FRAMEWORKS)


def get_framework(name: str) -> FrameworkInfo:
    try:
        return FRAMEWORKS[name]
    except KeyError:
        raise ValueError(
            f"unknown framework {name!r}; valid frameworks: {', '.join(FRAMEWORKS)}"
        ) from None


def unavailable_reason(name: str) -> Optional[str]:
    """Why a framework cannot run here, or None when it can (without importing it)."""
    info = get_framework(name)
    if importlib.util.find_spec(f"fwkernels.frameworks.{info.module}") is None:
        return "no backend in this fwkernels version"
    if importlib.util.find_spec(info.package) is None:
        return f"{info.package} is not installed in this environment"
    keras_backend = dict(info.options).get("backend")  # its name is its package's import name
    if keras_backend and importlib.util.find_spec(keras_backend) is None:
        return f"{keras_backend} (the Keras backend) is not installed in this environment"
    return None


def load_backend(name: str) -> Backend:
    """Import the framework and return its backend; ValueError says why it cannot."""
    info = get_framework(name)
    reason = unavailable_reason(name)
    if reason:
        raise ValueError(f"framework {name!r} is not available: {reason}")
    module = importlib.import_module(f"fwkernels.frameworks.{info.module}")
    return module.Backend(info)
