"""Measurement phases in a fresh process.

    python -m fwkernels.worker REQUEST_JSON RESULT_PATH

The request's ``phases`` ("train", "forward") run in order on one workload.
On the CPU the runner starts one process per phase, which makes the memory
figure honest (peak RSS above the baseline taken after the framework import);
a fresh process also keeps a crash, OOM or NaN inside one measurement.
``fwkernels.runner`` starts it; the result is a JSON file, since frameworks
write their own noise to stdout.  A failure keeps the figures of the phases
that finished before it.
"""
from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import signal
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

from fwkernels.frameworks import load_backend
from fwkernels.frameworks.base import DEVICES, Backend, RunConfig, Workload
from fwkernels.models import get_model
from fwkernels.protocol import NonFiniteLoss, Timing, finite_loss_check, run_windows


FOLDER_VARIABLE = "FWKERNELS_WORKER_FOLDER"
ALLOCATOR_LIBRARIES = ("tcmalloc", "jemalloc", "mimalloc")
ALLOCATOR_VARIABLES = ("GLIBC_TUNABLES", "MALLOC_CONF", "THP_MEM_ALLOC_ENABLE")
ALLOCATOR_PREFIXES = ("MALLOC_", "TCMALLOC_", "MIMALLOC_")
MKL_CPU_TYPE_VARIABLE = "MKL_DEBUG_CPU_TYPE"


def memory_allocator() -> Dict[str, Any]:
    """The ``allocator`` this process runs on: "glibc", or an allocator library preloaded into it
    (LD_PRELOAD, and mapped: a path the loader could not open is not), e.g. "tcmalloc_minimal";
    and ``allocator_settings``, the variables set that tune it.  On the CPU they decide how much
    of a step goes to page faults (docs/reports.md, *Page faults*)."""
    def stem(path: str) -> str:  # /usr/lib/libtcmalloc_minimal.so.4.5.10 -> tcmalloc_minimal
        return os.path.basename(path).split(".so")[0][len("lib"):]

    with open("/proc/self/maps") as f:
        mapped = {stem(line.split()[-1]) for line in f if ".so" in line}
    preloaded = [stem(path) for path in os.environ.get("LD_PRELOAD", "").replace(":", " ").split()]
    names = [name for name in preloaded if name in mapped and name.startswith(ALLOCATOR_LIBRARIES)]
    settings = {name: value for name, value in os.environ.items()
                if name in ALLOCATOR_VARIABLES or name.startswith(ALLOCATOR_PREFIXES)}
    return {"allocator": names[0] if names else "glibc",
            **({"allocator_settings": settings} if settings else {})}


def current_rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _peak_memory(workload: Workload, baseline_rss: int) -> Dict[str, Any]:
    device_peak = workload.peak_memory_bytes()
    if device_peak is not None:
        return {"bytes": device_peak, "source": workload.peak_memory_source}
    return {"bytes": peak_rss_bytes() - baseline_rss, "source": "process peak RSS above baseline"}


def _timed(workload: Workload, step, request: Dict[str, Any], check=None, run_steps=None,
           clock: Callable[[], float] = time.perf_counter) -> Timing:
    return run_windows(step, workload.sync, windows=request["windows"], steps=request["steps"],
                       warmup=request["warmup"], samples_per_step=request["samples_per_step"],
                       target_window_s=request["window_seconds"], check=check,
                       run_steps=run_steps, clock=clock)


def machine_cpu_seconds(cpu: Optional[int] = None) -> Dict[str, float]:
    """CPU time so far, in seconds, of every core or (``cpu``) of one (/proc/stat): ``busy``
    (user, nice, system, irq, softirq), ``steal`` (the hypervisor ran something else on the
    core) and ``total`` (every state, idle included); empty where /proc/stat cannot be read."""
    label = "cpu" if cpu is None else f"cpu{cpu}"
    try:
        with open("/proc/stat") as f:
            line = next(line for line in f if line.split()[0] == label)
        fields = [int(x) for x in line.split()[1:9]]
        user, nice, system, idle, iowait, irq, softirq, steal = fields
    except (OSError, StopIteration, ValueError):
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    return {"busy": (user + nice + system + irq + softirq) / tick, "steal": steal / tick,
            "total": sum(fields) / tick}


def process_tree_cpu_seconds(pid: int) -> float:
    """CPU time so far of a process, its finished children and its live descendants (CNTK's
    server, compile helpers), in seconds (/proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # the name, in parentheses, may hold spaces
        children: List[str] = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                children += f.read().split()
    except (OSError, IndexError):  # it ended meanwhile
        return 0.0
    own = sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime .. cstime
    return own + sum(process_tree_cpu_seconds(int(child)) for child in children)


class MachineLoad:
    """What else the machine did while the timed windows ran.  ``clock`` stands in for
    ``run_windows``' clock, which is read in pairs (a start, an end), and reads the CPU time of
    the machine and of this process's tree outside each timed interval; ``shares`` compares the
    first window's start with the last window's end."""

    def __init__(self) -> None:
        self.readings: List[Tuple[float, Dict[str, float]]] = []

    def _read(self) -> None:
        self.readings.append((process_tree_cpu_seconds(os.getpid()), machine_cpu_seconds()))

    def clock(self) -> float:
        if len(self.readings) % 2 == 0:  # a start
            self._read()
            return time.perf_counter()
        now = time.perf_counter()
        self._read()
        return now

    def shares(self, windows: int) -> Dict[str, float]:
        """``other_cpu_share``: the share of the machine's CPU time that went to processes other
        than this one and its descendants; ``steal_share``: the share the hypervisor gave to
        others.  Empty where /proc/stat could not be read."""
        if windows < 1 or len(self.readings) < 2 * windows:
            return {}
        (own_start, start), (own_end, end) = self.readings[-2 * windows], self.readings[-1]
        if not start or not end or end["total"] <= start["total"]:
            return {}
        total = end["total"] - start["total"]
        other = end["busy"] - start["busy"] - (own_end - own_start)
        return {"other_cpu_share": round(min(1.0, max(0.0, other / total)), 4),
                "steal_share": round((end["steal"] - start["steal"]) / total, 4)}


def train_windows(workload: Workload, request: Dict[str, Any],
                  clock: Callable[[], float] = time.perf_counter) -> Timing:
    """The training phase's timed windows (warm-up, calibration, windows), the loss checked for
    NaN after each; ``clock`` is read at the start and end of each."""
    return _timed(workload, workload.train_step, request, finite_loss_check(workload.loss),
                  workload.train_steps, clock)


def prepare(request: Dict[str, Any], out: Dict[str, Any]) -> Optional[Tuple[Backend, RunConfig]]:
    """Import the framework and set its threads, noting in ``out`` what the record keeps; the
    backend and the run's configuration, or None when it cannot run here (``out["status"]``
    says why: "invalid" for a device the framework does not see, "n/a" for a combination it
    cannot run)."""
    start = time.perf_counter()
    backend = load_backend(request["framework"])
    out["framework_version"] = backend.version()
    out["import_s"] = time.perf_counter() - start
    out["python"] = platform.python_version()  # a release of its own Python: not the runner's
    backend.set_threads(request["threads"])
    out.update(memory_allocator())
    if MKL_CPU_TYPE_VARIABLE in os.environ:
        out["mkl_debug_cpu_type"] = os.environ[MKL_CPU_TYPE_VARIABLE]
    device = request["device"]
    if not backend.device_available(device):
        usable = [d for d in DEVICES if backend.device_available(d)]
        why = backend.device_unavailable_reason(device)
        out.update(status="invalid", error=f"device {device!r} is not available to "
                   f"{backend.name} here{f' ({why})' if why else ''}; "
                   f"available devices: {', '.join(usable)}")
        return None
    out.update(backend.runtime_info(device))
    config = RunConfig(model=get_model(request["model"]), batch=request["batch"], device=device,
                       precision=request["precision"], mode=request["mode"])
    reason = backend.unsupported_reason(config)
    if reason:
        out.update(status="n/a", error=reason)
        return None
    return backend, config


def build(backend: Backend, config: RunConfig, out: Dict[str, Any]) -> Workload:
    start = time.perf_counter()
    workload = backend.build(config)
    out["build_s"] = time.perf_counter() - start
    out["params"] = workload.params
    return workload


def run_phases(request: Dict[str, Any], out: Dict[str, Any]) -> None:
    """Build the workload and time each of ``request["phases"]`` into ``out``."""
    prepared = prepare(request, out)
    if prepared is None:
        return
    backend, config = prepared
    request = dict(request, samples_per_step=config.samples_per_step)
    baseline_rss = current_rss_bytes()  # after the framework import: the figure is the run's own
    workload = build(backend, config, out)
    out["precision_settings"] = workload.precision_settings()
    out.update(workload.policy_settings())
    for phase in request["phases"]:
        out["running_phase"] = phase
        out.update(PHASES[phase](workload, request, baseline_rss))
        out.update(workload.extra_figures(phase))
    del out["running_phase"]
    out["status"] = "ok"


def train_phase(workload: Workload, request: Dict[str, Any], baseline_rss: int) -> Dict[str, Any]:
    load = MachineLoad()
    train = train_windows(workload, request, load.clock)
    fwd_bwd = _timed(workload, workload.forward_backward, dict(request, warmup=1),
                     finite_loss_check(workload.loss))
    memory = _peak_memory(workload, baseline_rss)
    start = time.perf_counter()
    flops = workload.flops_per_step()
    flops_s = time.perf_counter() - start
    return {**train.summary("samples_per_s"),
            "window_samples_per_s": train.window_samples_per_s, "step_time_s": train.step_time_s,
            "steps_per_window": train.steps, "warmup_s": train.warmup_s,
            "forward_backward_time_s": fwd_bwd.step_time_s,
            "forward_backward_warmup_s": fwd_bwd.warmup_s, "loss": workload.loss(),
            "peak_memory_bytes": memory["bytes"], "peak_memory_source": memory["source"],
            "flops_per_step": flops, "flops_s": flops_s, **load.shares(request["windows"])}


def forward_phase(workload: Workload, request: Dict[str, Any], baseline_rss: int) -> Dict[str, Any]:
    forward = _timed(workload, workload.forward, request)
    return {**forward.summary("forward_samples_per_s"), "forward_time_s": forward.step_time_s,
            "forward_warmup_s": forward.warmup_s,
            "forward_peak_memory_bytes": _peak_memory(workload, baseline_rss)["bytes"]}


PHASES = {"train": train_phase, "forward": forward_phase}


def classify_failure(backend_name: str, error: BaseException) -> Dict[str, Any]:
    message = f"{type(error).__name__}: {error}".strip().splitlines()[0][:500]
    if isinstance(error, NonFiniteLoss):
        return {"status": "nan", "error": message}
    if isinstance(error, MemoryError):  # the host's memory (numpy's, any framework's CPU arrays)
        return {"status": "oom", "error": message}
    try:
        backend = load_backend(backend_name)
        if backend.is_out_of_memory(error):
            return {"status": "oom", "error": message}
    except Exception:  # the backend itself fails to load (the error above, say): not an OOM
        pass
    return {"status": "error", "error": message}


def end_with_the_runner() -> None:
    """The runner starts a worker as the leader of its own process group, with SIGTERM as its
    parent-death signal, and names its temporary folder in FWKERNELS_WORKER_FOLDER
    (``fwkernels.runner``): on SIGTERM remove that folder and kill the group, compile helpers
    included.  Run otherwise (from a shell), nothing changes."""
    folder = os.environ.get(FOLDER_VARIABLE)
    if not folder or os.getpgrp() != os.getpid():
        return

    def end(signum: int, frame: Any) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        os.killpg(0, signal.SIGKILL)
    signal.signal(signal.SIGTERM, end)


def main(argv: Optional[list] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    end_with_the_runner()
    request = json.loads(argv[0])
    result: Dict[str, Any] = {}
    try:
        run_phases(request, result)
    except BaseException as error:  # recorded, never lost: the parent decides what follows
        traceback.print_exc()
        result.update(classify_failure(request["framework"], error))
        if "running_phase" in result:  # otherwise the build failed, before any phase
            result["failed_phase"] = result.pop("running_phase")
    with open(argv[1], "w") as f:
        json.dump(result, f, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
