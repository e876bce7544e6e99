"""Measure one resolved request in fresh worker processes and return its record.

Used by the CLI, ``sweep``, the asv suite and the experiments alike.  The phases (train,
forward) run in fresh worker processes (``fwkernels.worker``); a crash, OOM or NaN there becomes
the record's ``status`` and the caller goes on.
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
from typing import Any, Dict, List, Sequence

import fwkernels
from fwkernels.frameworks import get_framework
from fwkernels.models import get_model
from fwkernels.record import Record
from fwkernels.request import InvalidRequest, Request, require, resolve

PHASES = ("train", "forward")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# Compilers that keep their output on disk between processes (TorchInductor's graphs and
# autotuning choices, Triton's kernels). Each worker gets them empty, so a compiled mode's warm-up
# is a cold compile whatever ran before it, as JAX's and TensorFlow's (kept in memory) always are.
# A variable set by the caller is kept: a measurement against that (warm) cache.
COMPILE_CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
EMPTY_COMPILE_CACHE = "empty per worker"  # the record's compile_cache when none is set


def host_info() -> Dict[str, Any]:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"host": socket.gethostname(), "cpu": cpu, "cpu_count": os.cpu_count(),
            "python": platform.python_version(), "fwkernels_version": fwkernels.__version__}


def measure(framework: str, model: str, *, phases: Sequence[str] = PHASES,
            timeout_s: float = 1800, **choices: Any) -> Record:
    """Resolve (``fwkernels.request.resolve``: device, batch, precision, mode, windows, steps,
    window_seconds, warmup, threads) and run one combination.  Raises ``InvalidRequest`` for bad
    input, a combination this machine skips, and a device the framework does not see."""
    return run(require(resolve(framework, model, **choices)), phases, timeout_s)


def run(request: Request, phases: Sequence[str] = PHASES, timeout_s: float = 1800) -> Record:
    """Run the protocol for one request and return its record (``status`` says how it went)."""
    spec = get_model(request.model)
    record: Dict[str, Any] = {
        "framework": request.framework, "mode": request.mode, "model": request.model,
        "device": request.device, "batch": request.batch, "precision": request.precision,
        "threads": request.threads, "windows": request.windows, "warmup": request.warmup,
        "framework_title": get_framework(request.framework).title, "task": spec.task,
        "unit": spec.unit, "samples_per_step": spec.samples_per_step(request.batch),
        "canonical_params": spec.params, "expected_params": spec.expected_params(request.framework),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "compile_cache": compile_cache_setting(), **host_info(),
    }
    start = time.perf_counter()
    for group in worker_groups(request.device, phases):
        out = _run_worker(request.worker_message(group), timeout_s)
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
    return Record.new(**record)


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
