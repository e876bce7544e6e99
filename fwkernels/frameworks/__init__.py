"""The framework registry: one line per framework, one folder per framework.

Each framework lives in ``fwkernels/frameworks/<folder>/`` with the same modules in each:

    runtime.py   the framework's own process switches: version, devices, threads, the TF32
                 switches, device memory, runtime versions (the framework imported here only)
    models.py    the ten models written in that framework
    backend.py   the ``Backend`` and ``Workload`` of fwkernels.frameworks.base

A folder is imported only when its backend is loaded, so ``import fwkernels`` works in an
environment holding one framework or none.  Adding a framework: its folder, one
``FrameworkInfo`` line below, a session in noxfile.py and an environment in asv.conf.json.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Dict, List, Optional, Tuple

from fwkernels.frameworks.base import Backend, Workload  # noqa: F401 (public API)
from fwkernels.ledger.installed import worker_site_packages
from fwkernels.registry import lookup


@dataclass(frozen=True)
class FrameworkInfo:
    name: str  # the name used on the command line and in asv params
    title: str  # the name the papers use
    package: str  # import name whose presence makes the framework available
    folder: str  # the backend's folder under fwkernels/frameworks/
    # execution modes; the first is the default (docs/fairness.md: cuDNN autotuning on); where
    # autotuning is off out of the box, "untuned" is the default mode as installed
    modes: Tuple[str, ...]
    tuned_modes: Tuple[str, ...] = ()  # the compiled modes that FWKERNELS_MODES=tuned adds
    options: Tuple[Tuple[str, str], ...] = ()  # passed to the backend (e.g. the Keras backend)
    # runs in a Python of its own (CNTK: 3.6), not importable here: the folder's interpreter
    # module says whether that Python and the framework are there
    own_python: bool = False

    @property
    def default_mode(self) -> str:
        return self.modes[0]

    def check_mode(self, mode: str) -> str:
        """``mode`` when it is one of this framework's, else a ValueError naming them."""
        if mode not in self.modes:
            raise ValueError(f"unknown mode {mode!r} for {self.name}; "
                             f"valid modes: {', '.join(self.modes)}")
        return mode


_FRAMEWORKS = [
    FrameworkInfo("torch", "PyTorch", "torch", "torch",
                  ("eager", "channels_last", "compile", "cudagraphs", "cudagraphs_tuned",
                   "untuned"),
                  tuned_modes=("compile", "cudagraphs")),
    FrameworkInfo("tensorflow", "TensorFlow", "tensorflow", "tensorflow",
                  ("function", "xla"), tuned_modes=("xla",)),
    FrameworkInfo("mxnet", "MXNet", "mxnet", "mxnet", ("hybrid", "imperative")),
    FrameworkInfo("paddle", "PaddlePaddle", "paddle", "paddle", ("dynamic", "static", "untuned"),
                  tuned_modes=("static",)),
    FrameworkInfo("chainer", "Chainer", "chainer", "chainer", ("define_by_run", "untuned")),
    FrameworkInfo("cntk", "CNTK", "cntk", "cntk", ("graph",), own_python=True),
    FrameworkInfo("jax", "JAX/Flax", "flax", "jax", ("jit",)),  # flax brings jax
    FrameworkInfo("keras-jax", "Keras 3 (JAX)", "keras", "keras", ("jit",),
                  options=(("backend", "jax"),)),
    FrameworkInfo("keras-torch", "Keras 3 (PyTorch)", "keras", "keras",
                  ("eager", "jit", "untuned"), tuned_modes=("jit",),
                  options=(("backend", "torch"),)),
    FrameworkInfo("keras-tensorflow", "Keras 3 (TensorFlow)", "keras", "keras",
                  ("function", "xla"), tuned_modes=("xla",), options=(("backend", "tensorflow"),)),
]

FRAMEWORKS: Dict[str, FrameworkInfo] = {f.name: f for f in _FRAMEWORKS}


def list_frameworks() -> List[str]:
    return list(FRAMEWORKS)


def get_framework(name: str) -> FrameworkInfo:
    return lookup(FRAMEWORKS, name, "framework")


def unavailable_reason(name: str) -> Optional[str]:
    """Why a framework cannot run here, or None when it can (without importing it)."""
    info = get_framework(name)
    if importlib.util.find_spec(f"{__name__}.{info.folder}") is None:
        return "no backend in this fwkernels version"
    if info.own_python:
        return own_interpreter(info).missing_reason()
    site_packages = worker_site_packages()
    where = f"the release's environment ({site_packages[0]})" if site_packages \
        else "this environment"

    def missing(package: str) -> bool:
        if site_packages is None:
            return importlib.util.find_spec(package) is None
        return not any(os.path.exists(os.path.join(folder, package, "__init__.py"))
                       for folder in site_packages)

    if missing(info.package):
        return f"{info.package} is not installed in {where}"
    keras_backend = dict(info.options).get("backend")  # its name is its package's import name
    if keras_backend and missing(keras_backend):
        return f"{keras_backend} (the Keras backend) is not installed in {where}"
    return None


def own_interpreter(info: FrameworkInfo) -> ModuleType:
    """The interpreter module of a framework with a Python of its own (``own_python``): its
    ``missing_reason()`` and ``installed_version()``, read from files."""
    return importlib.import_module(f"{__name__}.{info.folder}.interpreter")


def load_backend(name: str) -> Backend:
    """Import the framework and return its backend; ValueError says why it cannot."""
    info = get_framework(name)
    reason = unavailable_reason(name)
    if reason:
        raise ValueError(f"framework {name!r} is not available: {reason}")
    module = importlib.import_module(f"{__name__}.{info.folder}.backend")
    return module.Backend(info)
