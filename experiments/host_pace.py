"""Where each timed training window's time goes on the host: the suite's own workload and
window protocol (``fwkernels.worker.train_windows``, the request's defaults), run in this
process, with each window split into the time until its steps were launched (``launch_s``, the
host's part) and the time its closing sync then waited for the device (``drain_s``).  Beside
them, per window: the CPU time of the main thread while launching and of the whole process,
the main thread's involuntary context switches (the scheduler took its core) and migrations
to another core, the process's minor page faults (memory mapped and zeroed again), and the
steal time of all cores (the hypervisor ran something else on them).
A window whose drain is near zero left the device nothing queued: the host's work (or a wait
inside the steps) set its pace, not the device's.

``--cpus`` pins the process to those cores before the framework is imported (its threads
inherit it), as pyperf's ``--affinity`` does, and before the thread count is resolved: one thread
per pinned core unless ``--threads`` says otherwise.  ``--probe-cpu N`` runs the records' host-speed
probe (``fwkernels.runner.host_speed``, a fixed pure-Python loop) without pause in a second
process pinned to core N while the windows run, and gives each window the probe's mean speed
over it.  ``--probe-alone SECONDS --probe-cpu CORES`` runs only the probe, for that long, on
each of those cores at once, and gives each reading its clock, its speed, the share of its wall
time the probe's thread was on the CPU and the core's steal time, and for several cores the
correlation of their half-second mean speeds: how steady the host's own pace is with no
framework running, and whether its cores change pace together.
Prints one JSON object (docs/gpu.md, *Spread*).

    python experiments/host_pace.py keras-torch alexnet --device cuda --precision bf16 --probe-cpu 15
    python experiments/host_pace.py --probe-alone 20 --probe-cpu 3,8,15
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import combinations
from typing import Any, Callable, Dict, List, Optional, Sequence, Set

from fwkernels.cli import add_combination_arguments
from fwkernels.request import InvalidRequest, Request, require, resolve
from fwkernels.runner import host_speed
from fwkernels.worker import build, machine_cpu_seconds, prepare, train_windows

COUNTERS = ("clock", "thread_cpu", "process_cpu", "involuntary_switches", "migrations", "steal",
            "minor_faults")
PROBE_READING_S = 0.05
CORRELATION_BIN_S = 0.5


def steal_seconds(cpu: Optional[int] = None) -> float:
    """Steal time so far, of one core or (None) of all of them (/proc/stat)."""
    seconds = machine_cpu_seconds(cpu)
    if not seconds:
        raise ValueError(f"/proc/stat has no {'cpu' if cpu is None else f'cpu{cpu}'} line")
    return seconds["steal"]


def migrations() -> Optional[int]:
    """The main thread's moves to another core so far (None where the kernel does not say)."""
    try:
        with open("/proc/thread-self/sched") as f:
            for line in f:
                if line.startswith("se.nr_migrations"):
                    return int(line.split(":")[1])
    except OSError:
        pass
    return None


def snapshot() -> Dict[str, Any]:
    return {"clock": time.perf_counter(), "thread_cpu": time.thread_time(),
            "process_cpu": time.process_time(),
            "involuntary_switches": resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw,
            "migrations": migrations(), "steal": steal_seconds(),
            "minor_faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt}


def difference(end: Dict[str, Any], start: Dict[str, Any]) -> Dict[str, Any]:
    return {name: None if end[name] is None or start[name] is None else end[name] - start[name]
            for name in COUNTERS}


def split_windows(edges: List[Dict[str, Any]], launched: List[Dict[str, Any]],
                  windows: int) -> List[Dict[str, Any]]:
    """Per timed window, from the clock's readings at the start and end of each (the last
    ``2 * windows`` of ``edges``) and the readings taken as each closing sync began (the last
    ``windows`` of ``launched``): its wall, launch and drain seconds, the counters' changes
    while launching (``thread_cpu_s``, ``involuntary_switches``, ``migrations``) and over the
    whole window (``process_cpu_s``, ``steal_s``, and the process's page faults that needed no
    disk, ``minor_faults``: memory the kernel had to map and zero)."""
    starts, ends = edges[-2 * windows::2], edges[-2 * windows + 1::2]
    rows = []
    for start, launch, end in zip(starts, launched[-windows:], ends):
        launching, whole = difference(launch, start), difference(end, start)
        rows.append({"start_clock": start["clock"], "wall_s": round(whole["clock"], 6),
                     "launch_s": round(launching["clock"], 6),
                     "drain_s": round(end["clock"] - launch["clock"], 6),
                     "thread_cpu_s": round(launching["thread_cpu"], 6),
                     "process_cpu_s": round(whole["process_cpu"], 6),
                     "involuntary_switches": launching["involuntary_switches"],
                     "migrations": launching["migrations"], "steal_s": round(whole["steal"], 2),
                     "minor_faults": whole["minor_faults"]})
    return rows


def probe(cpu: int, seconds: float, emit: Callable[[List[float]], None]) -> None:
    """Pin to ``cpu`` and read the host-speed probe without pause for ``seconds`` (0: until
    ended); each reading: start, end, speed (millions of iterations/s), the thread's share of
    the wall time on the CPU, and the core's steal seconds meanwhile."""
    os.sched_setaffinity(0, {cpu})
    deadline = time.perf_counter() + seconds if seconds else float("inf")
    while time.perf_counter() < deadline:
        start, cpu_start, steal_start = time.perf_counter(), time.thread_time(), steal_seconds(cpu)
        speed = host_speed(PROBE_READING_S)
        end = time.perf_counter()
        emit([start, end, round(speed, 3), round((time.thread_time() - cpu_start) / (end - start), 3),
              round(steal_seconds(cpu) - steal_start, 2)])


def probe_speeds(readings: List[List[float]], rows: List[Dict[str, Any]]) -> List[Optional[float]]:
    """Per window, the mean speed of the probe's readings that lie wholly inside it."""
    speeds: List[Optional[float]] = []
    for row in rows:
        start, end = row["start_clock"], row["start_clock"] + row["wall_s"]
        inside = [reading[2] for reading in readings if start <= reading[0] and reading[1] <= end]
        speeds.append(round(statistics.fmean(inside), 3) if inside else None)
    return speeds


def parse_cpus(flag: str, text: str, available: Set[int]) -> Set[int]:
    """"3" or "2,3" or "2-5" as a set of core numbers, each one of ``available``."""
    cpus: Set[int] = set()
    try:
        for part in text.split(","):
            first, _, last = part.partition("-")
            cpus.update(range(int(first), int(last or first) + 1))
    except ValueError:
        cpus = set()
    if not cpus or not cpus <= available:
        raise ValueError(f"{flag} {text!r}: name cores such as 3, 2,3 or 2-3 among this "
                         f"process's {min(available)}-{max(available)}")
    return cpus


class Probe:
    """The probe in a process of its own on one core, its readings kept in a file (not a pipe:
    a long warm-up of the measured process cannot fill it)."""

    def __init__(self, cpu: int) -> None:
        self.cpu = cpu
        self.out = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--probe-lines", "--probe-cpu", str(cpu)],
            stdout=self.out, text=True)

    def started(self) -> bool:
        """Wait for the first reading; False if the probe ended before it."""
        while not os.fstat(self.out.fileno()).st_size:
            if self.process.poll() is not None:
                return False
            time.sleep(PROBE_READING_S)
        return True

    def stop(self) -> List[List[float]]:
        self.process.terminate()
        self.process.wait()
        self.out.seek(0)
        return [[float(x) for x in line.split()] for line in self.out if len(line.split()) == 5]


def pace_correlations(readings: Dict[int, List[List[float]]],
                      bin_s: float = CORRELATION_BIN_S) -> List[List[Any]]:
    """Per pair of cores, the correlation of the probe's mean speeds over the same ``bin_s``
    spans (readings wholly inside each), over the time every core was read."""
    start = max(rows[0][0] for rows in readings.values())
    end = min(rows[-1][1] for rows in readings.values())
    spans = [{"start_clock": start + i * bin_s, "wall_s": bin_s}
             for i in range(int((end - start) / bin_s))]
    means = {cpu: probe_speeds(rows, spans) for cpu, rows in readings.items()}
    pairs = []
    for a, b in combinations(sorted(readings), 2):
        known = [(x, y) for x, y in zip(means[a], means[b]) if x is not None and y is not None]
        pairs.append([a, b, round(statistics.correlation(*zip(*known)), 3)
                      if len(known) >= 3 else None])
    return pairs


def probe_alone(seconds: float, cpus: Sequence[int]) -> Dict[str, Any]:
    result: Dict[str, Any] = {"host_cores": os.cpu_count(), "seconds": seconds, "probes": []}
    probes = [Probe(cpu) for cpu in cpus]
    failed = [probe.cpu for probe in probes if not probe.started()]
    if not failed:
        time.sleep(seconds)
    readings = {probe.cpu: probe.stop() for probe in probes}
    if failed:
        return dict(result, error=f"the probe on core {failed[0]} ended before its first reading")
    for cpu, rows in readings.items():
        speeds = [row[2] for row in rows]
        result["probes"].append({
            "probe_cpu": cpu, "speed_min": min(speeds), "speed_max": max(speeds),
            "speed_cv": round(statistics.stdev(speeds) / statistics.fmean(speeds), 4)
            if len(speeds) > 1 else None,
            "on_cpu_min": min(row[3] for row in rows),
            "steal_s": round(sum(row[4] for row in rows), 2), "readings": rows})
    if len(cpus) > 1:
        result["correlations"] = pace_correlations(readings)
    return result


def measure(request: Request, probe_cpu: Optional[int]) -> Dict[str, Any]:
    result: Dict[str, Any] = {"framework": request.framework, "mode": request.mode,
                              "model": request.model, "device": request.device,
                              "precision": request.precision, "batch": request.batch,
                              "threads": request.threads,
                              "cpus": sorted(os.sched_getaffinity(0)),
                              "host_cores": os.cpu_count(), "load_before": os.getloadavg()}
    message = request.worker_message(["train"])
    prepared = prepare(message, result)
    if prepared is None:
        return result
    backend, config = prepared
    workload = build(backend, config, result)
    edges: List[Dict[str, Any]] = []  # train_windows reads the clock at each window's start and end
    launched: List[Dict[str, Any]] = []
    device_sync = workload.sync

    def clock() -> float:
        edges.append(snapshot())
        return edges[-1]["clock"]

    def sync() -> None:
        launched.append(snapshot())
        device_sync()

    workload.sync = sync  # type: ignore[method-assign]
    prober = None if probe_cpu is None else Probe(probe_cpu)
    if prober is not None and not prober.started():
        result.update(status="error", error=f"the probe ended with {prober.process.returncode}")
        return result
    try:
        timing = train_windows(workload, dict(message, samples_per_step=config.samples_per_step),
                               clock)
    except Exception as error:
        result.update(status="error", error=f"{type(error).__name__}: {error}".splitlines()[0])
        return result
    finally:
        readings = prober.stop() if prober is not None else []
    rows = split_windows(edges, launched, request.windows)
    if prober is not None:
        speeds = probe_speeds(readings, rows)
        for row, speed in zip(rows, speeds):
            row["probe_speed"] = speed
        known = [(pace, speed) for pace, speed in zip(timing.window_samples_per_s, speeds)
                 if speed is not None]
        result.update(probe_cpu=probe_cpu, probe_correlation=round(statistics.correlation(
            *zip(*known)), 3) if len(known) >= 3 else None)
    wall = sum(row["wall_s"] for row in rows)
    result.update(status="ok", steps_per_window=timing.steps,
                  window_samples_per_s=[round(x, 2) for x in timing.window_samples_per_s],
                  **timing.summary("samples_per_s"),
                  launch_share=round(sum(row["launch_s"] for row in rows) / wall, 4),
                  per_window=rows, load_after=os.getloadavg())
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_combination_arguments(parser, optional=True)
    parser.add_argument("--batch", type=int, default=None, help="default: the model's")
    parser.add_argument("--windows", type=int, default=None, help="default: the device's")
    parser.add_argument("--window-seconds", type=float, default=None)
    parser.add_argument("--threads", type=int, default=None, help="default: all usable cores")
    parser.add_argument("--cpus", default=None, help='cores to pin to, e.g. "3" or "2-3"')
    parser.add_argument("--probe-cpu", default=None,
                        help="the host-speed probe's core (cores, with --probe-alone)")
    parser.add_argument("--probe-alone", type=float, default=None, metavar="SECONDS")
    parser.add_argument("--probe-lines", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        # the probe's own process starts with the measured process's cores, pinned or not
        available = (set(range(os.cpu_count() or 1)) if args.probe_lines
                     else os.sched_getaffinity(0))
        probe_cpus = (sorted(parse_cpus("--probe-cpu", args.probe_cpu, available))
                      if args.probe_cpu else [])
        if args.probe_alone:
            if not probe_cpus:
                raise ValueError("--probe-alone needs --probe-cpu")
            print(json.dumps(probe_alone(args.probe_alone, probe_cpus)))
            return 0
        if len(probe_cpus) > 1:
            raise ValueError(f"--probe-cpu {args.probe_cpu!r}: name one core beside a run "
                             "(several only with --probe-alone)")
        probe_cpu = probe_cpus[0] if probe_cpus else None
        if args.probe_lines and probe_cpu is not None:
            probe(probe_cpu, 0, lambda reading: print(*reading, flush=True))
            return 0
        if not args.model:
            raise ValueError("give FRAMEWORK MODEL, or --probe-alone SECONDS --probe-cpu N")
        if args.cpus:  # before resolving: the default thread count is the pinned cores'
            os.sched_setaffinity(0, parse_cpus("--cpus", args.cpus, available))
        request = require(resolve(args.framework, args.model, device=args.device,
                                  precision=args.precision, mode=args.mode, batch=args.batch,
                                  windows=args.windows, window_seconds=args.window_seconds,
                                  threads=args.threads))
    except (InvalidRequest, ValueError) as error:
        print(f"host_pace.py: {error}", file=sys.stderr)
        return 2
    print(json.dumps(measure(request, probe_cpu)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
