"""Measure one (framework, model) combination: validation, fresh worker processes, one record.

Used by the CLI and the asv suite alike.  The phases (train, forward) run in
fresh worker processes (``fwkernels.worker``); a crash, OOM or NaN there
becomes the record's ``status`` and the caller goes on.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

import fwkernels
from fwkernels.frameworks import get_framework, unavailable_reason
from fwkernels.frameworks.base import DEVICES, PRECISIONS
from fwkernels.models import get_model

PHASES = ("train", "forward")
# Defaults per device: windows, target seconds per window, warm-up steps.
DEFAULTS = {"cpu": (3, 1.5, 2), "cuda": (5, 0.5, 10)}
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# Compilers that keep their output on disk between processes (TorchInductor's graphs and
# autotuning choices, Triton's kernels). Each worker gets them empty, so a compiled mode's warm-up
# is a cold compile whatever ran before it, as JAX's and TensorFlow's (kept in memory) always are.
# A variable set by the caller is kept: a measurement against that (warm) cache.
COMPILE_CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
EMPTY_COMPILE_CACHE = "empty per worker"  # the record's compile_cache when none is set


class InvalidRequest(ValueError):
    """Bad input: the message names the valid choices."""


def default_threads() -> int:
    return len(os.sched_getaffinity(0))


def validate(framework: str, model: str, device: str, precision: str, mode: str,
             batch: Optional[int]) -> None:
    try:
        info = get_framework(framework)
        get_model(model)
    except ValueError as error:
        raise InvalidRequest(str(error)) from None
    if device not in DEVICES:
        raise InvalidRequest(f"unknown device {device!r}; valid devices: {', '.join(DEVICES)}")
    if precision not in PRECISIONS:
        raise InvalidRequest(
            f"unknown precision {precision!r}; valid precisions: {', '.join(PRECISIONS)}")
    if device == "cpu" and precision == "tf32":
        raise InvalidRequest("precision 'tf32' is a GPU tensor-core mode; on cpu use fp32 or bf16")
    if mode:
        try:
            info.check_mode(mode)
        except ValueError as error:
            raise InvalidRequest(str(error)) from None
    if batch is not None and batch <= 0:
        raise InvalidRequest(f"batch must be a positive integer, got {batch}")
    reason = unavailable_reason(framework)
    if reason:
        raise InvalidRequest(f"framework {framework!r} is not available: {reason}")


def host_info() -> Dict[str, Any]:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"host": socket.gethostname(), "cpu": cpu, "cpu_count": os.cpu_count(),
            "python": platform.python_version(), "fwkernels_version": fwkernels.__version__}


def measure(
    framework: str,
    model: str,
    *,
    device: str = "cpu",
    batch: Optional[int] = None,
    precision: str = "fp32",
    mode: str = "",
    windows: Optional[int] = None,
    steps: Optional[int] = None,
    window_seconds: Optional[float] = None,
    warmup: Optional[int] = None,
    threads: Optional[int] = None,
    phases: Sequence[str] = PHASES,
    timeout_s: float = 1800,
) -> Dict[str, Any]:
    """Run the protocol for one combination and return its record (``status`` says how it went).

    Raises ``InvalidRequest`` for bad input, including a device the framework does not see.
    """
    validate(framework, model, device, precision, mode, batch)
    spec = get_model(model)
    default_windows, default_seconds, default_warmup = DEFAULTS[device]
    request = {
        "framework": framework, "model": model, "device": device,
        "batch": batch or spec.default_batch(device), "precision": precision,
        "mode": mode or get_framework(framework).default_mode,
        "windows": windows or default_windows, "steps": steps,
        "window_seconds": window_seconds or default_seconds,
        "warmup": default_warmup if warmup is None else warmup,
        "threads": threads or default_threads(),
    }
    record: Dict[str, Any] = {
        **{k: request[k] for k in ("framework", "mode", "model", "device", "batch", "precision",
                                   "threads", "windows", "warmup")},
        "framework_title": get_framework(framework).title, "task": spec.task, "unit": spec.unit,
        "samples_per_step": spec.samples_per_step(request["batch"]),
        "canonical_params": spec.params, "expected_params": spec.expected_params(framework),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "compile_cache": compile_cache_setting(), **host_info(),
    }
    start = time.perf_counter()
    for group in worker_groups(device, phases):
        out = _run_worker(dict(request, phases=group), timeout_s)
        record.update(out)
        if out.get("status") == "invalid":
            raise InvalidRequest(out["error"])
        if out.get("status") != "ok":
            record.setdefault("failed_phase", "+".join(group))  # the worker names it if it can
            break
    record["measure_s"] = time.perf_counter() - start  # worker processes included
    flops = record.get("flops_per_step")
    if flops and record.get("samples_per_s"):
        record["flops_per_sample"] = flops / record["samples_per_step"]
        record["achieved_tflops"] = flops / record["step_time_s"] / 1e12
    return record


def worker_groups(device: str, phases: Sequence[str]) -> List[List[str]]:
    """Phases per worker process.  On the CPU each phase gets its own process: its memory
    figure is the process's peak RSS.  On a GPU the allocator's peak is the figure, so one
    process runs forward first (its peak read before training) and then train (the training
    peak is above the forward one), saving a process start, framework import and build."""
    if device == "cpu":
        return [[phase] for phase in phases]
    return [sorted(phases, key=lambda phase: phase != "forward")]


def compile_cache_setting() -> str:
    """How the workers' on-disk compiler caches are set, for the record."""
    kept = [f"{name}={os.environ[name]}" for name in COMPILE_CACHE_VARIABLES if name in os.environ]
    return " ".join(kept) or EMPTY_COMPILE_CACHE


def worker_environment(threads: int, tmp: str) -> Dict[str, str]:
    """The worker's environment: thread counts, and empty compiler caches inside ``tmp``."""
    fresh = {name: os.path.join(tmp, name.lower()) for name in COMPILE_CACHE_VARIABLES
             if name not in os.environ}
    return dict(os.environ, **{name: str(threads) for name in THREAD_VARIABLES}, **fresh)


def _run_worker(request: Dict[str, Any], timeout_s: float) -> Dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fwkernels-") as tmp:
        env = worker_environment(request["threads"], tmp)
        path = os.path.join(tmp, "result.json")
        command = [sys.executable, "-m", "fwkernels.worker", json.dumps(request), path]
        try:
            proc = subprocess.run(command, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"status": "timeout",
                    "error": f"{'+'.join(request['phases'])} ran over {timeout_s} s"}
        if os.path.exists(path):
            with open(path) as f:
                out = json.load(f)
            if out.get("status") not in ("ok", "n/a", "invalid"):
                out["log_tail"] = proc.stdout.decode(errors="replace")[-2000:]
            return out
    tail = proc.stdout.decode(errors="replace")[-2000:]
    oom = proc.returncode == -9 or "out of memory" in tail.lower()
    return {"status": "oom" if oom else "crashed",
            "error": f"{'+'.join(request['phases'])} worker exited with status {proc.returncode}",
            "log_tail": tail}
