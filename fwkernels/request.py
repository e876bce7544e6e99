"""The request resolver: from what a caller asked for to one valid measurement request.

Every entry point (``fwkernels measure`` and ``sweep``, the asv suite, the experiments) resolves
its input here, so the defaults and the rules are written once:

* defaults: the framework's first mode, the model's batch for the device, the protocol's windows,
  window length and warm-up steps for the device, all usable CPU cores, and on the CPU the
  fairness policy's memory allocator (TCMalloc; FWKERNELS_CPU_ALLOCATOR=glibc for glibc's own);
* targets: asv's framework parameter ``name`` or ``name:mode`` (``parse_target``, ``target_name``);
* rules: names must be known (a usage error naming the valid choices: ``InvalidRequest``), and a
  combination this machine cannot run is a ``Skip`` with its reason (a framework not installed,
  TF32 on the CPU).  Whether a device is present is known only with the framework imported, so
  the worker checks it (``fwkernels.worker``).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from fwkernels.frameworks import FRAMEWORKS, get_framework, unavailable_reason
from fwkernels.frameworks.base import DEVICES, PRECISIONS
from fwkernels.models import get_model
from fwkernels.registry import check


@dataclass(frozen=True)
class ProtocolDefaults:
    windows: int
    window_seconds: float  # target length of one timing window
    warmup: int  # warm-up steps


DEFAULTS = {"cpu": ProtocolDefaults(3, 1.5, 2), "cuda": ProtocolDefaults(5, 0.5, 10)}


CPU_ALLOCATOR_VARIABLE = "FWKERNELS_CPU_ALLOCATOR"
CPU_ALLOCATORS = ("tcmalloc", "glibc")  # the first is the policy's (docs/fairness.md)


class InvalidRequest(ValueError):
    """Bad input: the message names the valid choices (the CLI exits with status 2)."""


@dataclass(frozen=True)
class Skip:
    """A valid combination this machine cannot run, with the reason."""
    reason: str


@dataclass(frozen=True)
class Request:
    """One combination with every default filled in: what a worker process is told to measure."""
    framework: str
    model: str
    device: str
    precision: str
    mode: str
    batch: int
    windows: int
    steps: Optional[int]  # steps per window; None: calibrated to window_seconds
    window_seconds: float
    warmup: int
    threads: int
    allocator: str = ""  # the CPU workers' malloc, one of CPU_ALLOCATORS; "" on a GPU: as is

    @property
    def target(self) -> str:
        return target_name(self.framework, self.mode)

    def worker_message(self, phases: Sequence[str]) -> Dict[str, Any]:
        """The JSON object a worker reads (plain types: any Python can read it)."""
        return {**dataclasses.asdict(self), "phases": list(phases)}


def default_threads() -> int:
    return len(os.sched_getaffinity(0))


def split_target(target: str) -> Tuple[str, str]:
    """asv's framework parameter -> (framework, mode); a bare name is the default mode.  Names
    are not checked (results may hold frameworks this version does not know)."""
    framework, _, mode = target.partition(":")
    info = FRAMEWORKS.get(framework)
    return framework, mode or (info.default_mode if info else "")


def parse_target(target: str) -> Tuple[str, str]:
    """Like ``split_target``, but an unknown framework or mode is an ``InvalidRequest``."""
    framework, _, mode = target.partition(":")
    try:
        info = get_framework(framework)
        return framework, info.check_mode(mode) if mode else info.default_mode
    except ValueError as error:
        raise InvalidRequest(str(error)) from None


def target_name(framework: str, mode: str) -> str:
    """The inverse of ``split_target``: the name alone for the default mode."""
    info = FRAMEWORKS.get(framework)
    return framework if not mode or (info and mode == info.default_mode) else f"{framework}:{mode}"


DEFAULT_MODE = "default"  # the suite's mode parameter for each framework's own default mode
MODE_PROFILES = ("default", "tuned", "all")


def mode_parameter(profile: str) -> List[str]:
    """The asv suite's mode values for FWKERNELS_MODES: "default" (each framework's default
    mode), "tuned" (and every framework's compiled modes, ``FrameworkInfo.tuned_modes``), "all"
    (and every other mode), or a comma list of "default" and mode names."""
    frameworks = FRAMEWORKS.values()
    if profile in MODE_PROFILES:
        extra = {"default": lambda info: (), "tuned": lambda info: info.tuned_modes,
                 "all": lambda info: info.modes[1:]}[profile]
        modes = [mode for info in frameworks for mode in extra(info)]
    else:
        modes = [m.strip() for m in profile.split(",") if m.strip() and m.strip() != DEFAULT_MODE]
        known = {mode for info in frameworks for mode in info.modes}
        unknown = [m for m in modes if m not in known]
        if unknown or not profile.strip():
            raise ValueError(f"unknown FWKERNELS_MODES {profile!r}; valid: "
                             f"{', '.join(MODE_PROFILES)}, or a comma list of {DEFAULT_MODE} and "
                             f"modes ({', '.join(sorted(known))})")
    return [DEFAULT_MODE] + list(dict.fromkeys(modes))


def suite_mode(framework: str, mode: str) -> str:
    """The suite's mode parameter of one of the framework's modes: ``DEFAULT_MODE`` for its
    default mode (the inverse of ``release_target``); unknown frameworks keep the mode."""
    info = FRAMEWORKS.get(framework)
    return DEFAULT_MODE if info and mode == info.default_mode else mode


def release_target(framework: str, mode: str) -> Union[str, Skip]:
    """The target of the suite's mode parameter for the framework installed: its name for
    "default", name:mode for one of its other modes, a skip for a mode it does not have."""
    info = get_framework(framework)
    if mode == DEFAULT_MODE:
        return framework
    if mode == info.default_mode:
        return Skip(f"{mode} is {framework}'s default mode: measured as mode '{DEFAULT_MODE}'")
    if mode not in info.modes:
        return Skip(f"{framework} has no mode {mode!r}; its modes: {', '.join(info.modes)}")
    return f"{framework}:{mode}"


def resolve(framework: str, model: str, *, device: str = "cpu", precision: str = "fp32",
            mode: Optional[str] = None, batch: Optional[int] = None,
            windows: Optional[int] = None, steps: Optional[int] = None,
            window_seconds: Optional[float] = None, warmup: Optional[int] = None,
            threads: Optional[int] = None, allocator: Optional[str] = None
            ) -> Union[Request, Skip]:
    """The request, or the reason this machine skips it; InvalidRequest for bad input.
    ``mode`` None or "" is the framework's default mode; other None values are defaults
    (``allocator``: FWKERNELS_CPU_ALLOCATOR, else the policy's)."""
    try:
        info = get_framework(framework)
        spec = get_model(model)
        check(device, DEVICES, "device")
        check(precision, PRECISIONS, "precision")
        mode = info.check_mode(mode) if mode else info.default_mode
    except ValueError as error:
        raise InvalidRequest(str(error)) from None
    allocator = cpu_allocator(device, allocator)
    check_protocol(batch=batch, windows=windows, steps=steps, window_seconds=window_seconds,
                   warmup=warmup)
    usable = default_threads()
    if threads is not None and not 1 <= threads <= usable:
        # more threads than cores would time the scheduler, not the framework
        raise InvalidRequest(f"threads must be from 1 to {usable} (the usable cores), got "
                             f"{threads}")
    if device == "cpu" and precision == "tf32":
        return Skip("precision 'tf32' is a GPU tensor-core mode; on cpu use fp32 or bf16")
    reason = unavailable_reason(framework)
    if reason:
        return Skip(f"framework {framework!r} is not available: {reason}")
    defaults = DEFAULTS[device]
    return Request(framework=framework, model=model, device=device, precision=precision,
                   mode=mode, batch=batch or spec.default_batch(device),
                   windows=defaults.windows if windows is None else windows, steps=steps,
                   window_seconds=window_seconds or defaults.window_seconds,
                   warmup=defaults.warmup if warmup is None else warmup,
                   threads=threads or default_threads(), allocator=allocator)


def check_protocol(batch: Optional[int] = None, windows: Optional[int] = None,
                   steps: Optional[int] = None, window_seconds: Optional[float] = None,
                   warmup: Optional[int] = None) -> None:
    """InvalidRequest for a protocol value out of its range (None: the default)."""
    for name, value in (("batch", batch), ("windows", windows), ("steps", steps)):
        if value is not None and value <= 0:
            raise InvalidRequest(f"{name} must be a positive integer, got {value}")
    if warmup is not None and warmup < 0:
        raise InvalidRequest(f"warmup must be 0 or more steps, got {warmup}")
    if window_seconds is not None and not 0 < window_seconds < float("inf"):
        raise InvalidRequest(f"window_seconds must be a positive number, got {window_seconds}")


def cpu_allocator(device: str, choice: Optional[str] = None) -> str:
    """The memory allocator of a CPU measurement: ``choice``, else FWKERNELS_CPU_ALLOCATOR, else
    the policy's; "" on a GPU, where the workers keep the environment's."""
    choice = choice or os.environ.get(CPU_ALLOCATOR_VARIABLE, "").strip() or CPU_ALLOCATORS[0]
    try:
        check(choice, CPU_ALLOCATORS, "CPU allocator")
    except ValueError as error:
        raise InvalidRequest(f"{CPU_ALLOCATOR_VARIABLE}: {error}") from None
    return choice if device == "cpu" else ""


def require(resolved: Union[Request, Skip]) -> Request:
    """The request itself: a skip is a usage error where the caller named one combination."""
    if isinstance(resolved, Skip):
        raise InvalidRequest(resolved.reason)
    return resolved
