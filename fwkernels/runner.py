"""Measure one resolved request in fresh worker processes and return its record.

Used by the CLI, ``sweep``, the asv suite and the experiments alike.  The phases (train,
forward) run in fresh worker processes (``fwkernels.worker``); a crash, OOM or NaN there becomes
the record's ``status`` and the caller goes on.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import datetime
import functools
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import fwkernels
from fwkernels.frameworks import get_framework
from fwkernels.ledger.installed import worker_python
from fwkernels.models import get_model
from fwkernels.record import Record
from fwkernels.request import InvalidRequest, Request, require, resolve
from fwkernels.worker import ALLOCATOR_LIBRARIES, FOLDER_VARIABLE, MKL_CPU_TYPE_VARIABLE

PHASES = ("train", "forward")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# Compilers that keep their output on disk between processes (TorchInductor's graphs and
# autotuning choices, Triton's kernels). Each worker gets them empty, so a compiled mode's warm-up
# is a cold compile whatever ran before it, as JAX's and TensorFlow's (kept in memory) always are.
# A variable set by the caller is kept: a measurement against that (warm) cache.
COMPILE_CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
EMPTY_COMPILE_CACHE = "empty per worker"  # the record's compile_cache when none is set
# The host's speed before and after each measurement: a fixed pure-Python loop (the same work
# whatever framework and numpy an environment holds). A shared host runs the same work at
# different speeds at different hours (docs/history.md, *Reading the change column*).
HOST_SPEED_LOOP = 100_000
HOST_SPEED_SECONDS = 0.5
# The fairness policy's CPU allocator (docs/fairness.md, *Memory allocator on the CPU*), by the
# names the loader knows it: Debian's libtcmalloc-minimal4, then gperftools' full library.
TCMALLOC_LIBRARIES = ("tcmalloc_minimal", "tcmalloc")
# Intel MKL before 2020.1, which PaddlePaddle's and CNTK's CPU wheels bundle, runs its generic
# SSE kernels on a processor whose vendor is not Intel; this value makes it run its AVX2 kernels
# there (docs/fairness.md, *Intel MKL on a non-Intel processor*). Later MKLs ignore the variable.
MKL_AVX2_CPU_TYPE = "5"
# The vector instruction sets that decide which kernels a CPU framework runs (oneDNN's, XLA's).
INSTRUCTION_SETS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile")


def cpuinfo() -> Dict[str, str]:
    """The first processor's fields in /proc/cpuinfo; empty where it cannot be read."""
    fields: Dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if not key.strip():
                    break  # a blank line ends the first processor
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def processor() -> Tuple[str, List[str]]:
    """The CPU's model name and which of ``INSTRUCTION_SETS`` it has."""
    fields = cpuinfo()
    flags = set(fields.get("flags", "").split())
    return fields.get("model name") or platform.processor(), \
        [name for name in INSTRUCTION_SETS if name in flags]


def host_info() -> Dict[str, Any]:
    cpu, instruction_sets = processor()
    return {"host": socket.gethostname(), "cpu": cpu, "instruction_sets": instruction_sets,
            "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "fwkernels_version": fwkernels.__version__}


def host_speed(seconds: float = HOST_SPEED_SECONDS) -> float:
    """Millions of iterations per second of a fixed pure-Python loop on one core: the median
    over repeats for ``seconds``."""
    rates = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(rates) < 3:
        start = time.perf_counter()
        total = 0
        for i in range(HOST_SPEED_LOOP):
            total += i * i % 7
        rates.append(HOST_SPEED_LOOP / (time.perf_counter() - start) / 1e6)
    rates.sort()
    return rates[len(rates) // 2]


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
        "threads": request.threads, "windows": request.windows,
        "window_seconds": request.window_seconds, "warmup": request.warmup,
        "framework_title": get_framework(request.framework).title, "task": spec.task,
        "unit": spec.unit, "samples_per_step": spec.samples_per_step(request.batch),
        "canonical_params": spec.params, "expected_params": spec.expected_params(request.framework),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "compile_cache": compile_cache_setting(), **host_info(),
    }
    probes = [host_speed()]
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
    probes.append(host_speed())
    record.update(host_speed=min(probes), host_speed_probes=probes)
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


def worker_environment(threads: int, tmp: str, allocator: str = "", device: str = ""
                       ) -> Dict[str, str]:
    """The worker's environment: thread counts, empty compiler caches inside ``tmp``, the
    memory allocator (``Request.allocator``) preloaded and, on the CPU, MKL's code path."""
    fresh = {name: os.path.join(tmp, name.lower()) for name in COMPILE_CACHE_VARIABLES
             if name not in os.environ}
    env = dict(os.environ, **{name: str(threads) for name in THREAD_VARIABLES}, **fresh,
               **{FOLDER_VARIABLE: tmp}, **mkl_cpu_type(device))
    preload = allocator_preload(allocator, env.pop("LD_PRELOAD", ""))
    return dict(env, LD_PRELOAD=preload) if preload else env


def mkl_cpu_type(device: str) -> Dict[str, str]:
    """MKL_DEBUG_CPU_TYPE for a worker on ``device``: MKL's AVX2 kernels on a CPU whose vendor is
    not Intel and that has AVX2 and FMA; nothing elsewhere, or where the caller set it (their
    value stands, an empty one for MKL's own choice; the record names it)."""
    fields = cpuinfo()
    if device != "cpu" or MKL_CPU_TYPE_VARIABLE in os.environ \
            or fields.get("vendor_id", "GenuineIntel") == "GenuineIntel" \
            or not {"avx2", "fma"} <= set(fields.get("flags", "").split()):
        return {}
    return {MKL_CPU_TYPE_VARIABLE: MKL_AVX2_CPU_TYPE}


def allocator_preload(allocator: str, preload: str) -> str:
    """LD_PRELOAD for a worker on ``allocator``: "tcmalloc" puts TCMalloc first unless
    ``preload`` names an allocator already (the caller's choice stands; the record names it),
    "glibc" takes the allocators out of it, "" keeps it."""
    entries = preload.replace(":", " ").split()
    if allocator == "glibc":
        entries = [path for path in entries if not is_allocator_library(path)]
    elif allocator == "tcmalloc" and not any(map(is_allocator_library, entries)):
        entries[:0] = [library for library in [tcmalloc_library()] if library]
    return " ".join(entries)


def is_allocator_library(path: str) -> bool:
    return os.path.basename(path).startswith(tuple("lib" + name for name in ALLOCATOR_LIBRARIES))


@functools.lru_cache(maxsize=None)
def tcmalloc_library() -> Optional[str]:
    """TCMalloc's library as the loader finds it, or None (said once on stderr: the workers then
    run on glibc's malloc, and their records say so)."""
    library = next(filter(None, map(ctypes.util.find_library, TCMALLOC_LIBRARIES)), None)
    if library is None:
        print("fwkernels: TCMalloc, the policy's CPU allocator, is not installed (Debian: "
              "libtcmalloc-minimal4); the CPU workers run on glibc's malloc", file=sys.stderr)
    return library


def worker_command(request: Dict[str, Any], path: str) -> List[str]:
    return [worker_python(), "-m", "fwkernels.worker", json.dumps(request), path]


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> Optional[Callable[[], None]]:
    """A preexec_fn that gives the child SIGTERM when this process dies, however it dies (the
    worker then removes its folder and kills its process group: ``fwkernels.worker``); None
    where there is no prctl (not Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "prctl"):
        return None
    parent = os.getpid()

    def preexec() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl: no signal would come
            os._exit(1)
    return preexec


def oom_kills() -> Optional[int]:
    """The kernel's OOM kills: those in this process's cgroup (v2, where workers run too) plus
    the machine's (/proc/vmstat: a global OOM, the machine out of memory, is not counted in the
    cgroup); None where neither can be read."""
    counts = []
    try:
        with open("/proc/self/cgroup") as f:
            group = next(line.split(":", 2)[2].strip() for line in f if line.startswith("0::"))
        with open(f"/sys/fs/cgroup{group}/memory.events") as f:
            counts.append(next(int(line.split()[1]) for line in f if line.startswith("oom_kill ")))
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    try:
        with open("/proc/vmstat") as f:
            counts.append(next(int(line.split()[1]) for line in f if line.startswith("oom_kill ")))
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    return sum(counts) if counts else None


def _run_worker(request: Dict[str, Any], timeout_s: float) -> Dict[str, Any]:
    phases = "+".join(request["phases"])
    with tempfile.TemporaryDirectory(prefix="fwkernels-") as tmp:
        env = worker_environment(request["threads"], tmp, request.get("allocator", ""),
                                 request.get("device", ""))
        path = os.path.join(tmp, "result.json")
        kills_before = oom_kills()
        # A session of its own: the worker and its compile helpers are one process group,
        # killed together whatever way the worker ends (and by the worker when this process dies).
        proc = subprocess.Popen(worker_command(request, path), env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=die_with_parent())
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"status": "timeout", "error": f"{phases} ran over {timeout_s} s"}
        finally:
            _kill_group(proc)
        if os.path.exists(path):
            with open(path) as f:
                out = json.load(f)
            if out.get("status") not in ("ok", "n/a", "invalid"):
                out["log_tail"] = output.decode(errors="replace")[-2000:]
            return out
    tail = output.decode(errors="replace")[-2000:]
    kills_after = oom_kills()
    oom_killed = proc.returncode == -signal.SIGKILL and kills_before is not None \
        and kills_after is not None and kills_after > kills_before
    if "out of memory" in tail.lower() or oom_killed:
        status, why = "oom", "the kernel's OOM killer" if oom_killed else "out of memory"
    elif proc.returncode == -signal.SIGKILL:
        status, why = "killed", "SIGKILL with no sign of running out of memory (no allocator " \
                                "error, no OOM kill counted by the kernel)"
    else:
        status, why = "crashed", ""
    return {"status": status, "log_tail": tail,
            "error": f"{phases} worker exited with status {proc.returncode}"
                     + (f": {why}" if why else "")}


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill what is left of the worker's process group (compile helpers it started) and reap."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
