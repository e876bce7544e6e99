"""Garbage-collector pauses inside the timed training windows: the suite's own workload and
window protocol (``fwkernels.worker.train_windows``, the request's defaults), run in this
process with every collection of Python's cyclic garbage collector timed.  Prints one JSON
object: each window's samples/s, and the collections and their seconds per generation inside
the windows and outside them (import, build, warm-up, the loss checks between windows).
``--collector off`` turns the collector off after the build, as ``timeit`` does for its loop;
whether a workload then still fits its device's memory is part of the answer (docs/gpu.md,
*Spread*).

    python experiments/gc_pauses.py keras-torch resnet50 --device cuda --precision bf16
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from typing import Any, Dict, List, Tuple

from fwkernels.cli import add_combination_arguments
from fwkernels.request import InvalidRequest, require, resolve
from fwkernels.worker import build, prepare, train_windows

GENERATIONS = (0, 1, 2)


class CollectionTimer:
    """Every collection as (start, seconds, generation), from ``gc.callbacks``."""

    def __init__(self) -> None:
        self.collections: List[Tuple[float, float, int]] = []
        self._start = 0.0

    def __call__(self, phase: str, info: Dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.collections.append((self._start, time.perf_counter() - self._start,
                                     info["generation"]))


def per_generation(collections: List[Tuple[float, float, int]]) -> Dict[str, Dict[str, float]]:
    return {str(g): {"count": sum(1 for c in collections if c[2] == g),
                     "seconds": round(sum(c[1] for c in collections if c[2] == g), 6)}
            for g in GENERATIONS}


def split_by_windows(collections: List[Tuple[float, float, int]], edges: List[float],
                     windows: int) -> Tuple[list, list]:
    """The collections that started inside one of the last ``windows`` windows, whose start and
    end are the last ``2 * windows`` clock readings in ``edges``, and the others."""
    spans = list(zip(edges[-2 * windows::2], edges[-2 * windows + 1::2]))
    inside = [c for c in collections if any(start <= c[0] < end for start, end in spans)]
    return inside, [c for c in collections if c not in inside]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_combination_arguments(parser)
    parser.add_argument("--batch", type=int, default=None, help="default: the model's")
    parser.add_argument("--windows", type=int, default=None, help="default: the device's")
    parser.add_argument("--window-seconds", type=float, default=None)
    parser.add_argument("--collector", choices=("on", "off"), default="on")
    args = parser.parse_args()
    try:
        request = require(resolve(args.framework, args.model, device=args.device,
                                  precision=args.precision, mode=args.mode, batch=args.batch,
                                  windows=args.windows, window_seconds=args.window_seconds))
    except InvalidRequest as error:
        print(f"gc_pauses.py: {error}", file=sys.stderr)
        return 2
    timer = CollectionTimer()
    gc.callbacks.append(timer)
    message = request.worker_message(["train"])
    out: Dict[str, Any] = {}
    prepared = prepare(message, out)
    if prepared is None:
        print(json.dumps(out))
        return 0
    backend, config = prepared
    workload = build(backend, config, out)
    if args.collector == "off":
        gc.disable()
    edges: List[float] = []  # train_windows reads the clock at the start and end of each window

    def clock() -> float:
        edges.append(time.perf_counter())
        return edges[-1]

    result: Dict[str, Any] = {"framework": request.framework, "mode": request.mode,
                              "model": request.model, "device": request.device,
                              "precision": request.precision, "batch": request.batch,
                              "collector": args.collector}
    try:
        timing = train_windows(workload, dict(message, samples_per_step=config.samples_per_step),
                               clock)
    except Exception as error:  # an OOM with the collector off is a finding, not a crash
        result.update(status="error", error=f"{type(error).__name__}: {error}".splitlines()[0])
        print(json.dumps(result))
        return 0
    finally:
        gc.callbacks.remove(timer)
    inside, outside = split_by_windows(timer.collections, edges, request.windows)
    result.update(status="ok", collector_enabled=gc.isenabled(), steps_per_window=timing.steps,
                  window_samples_per_s=[round(x, 2) for x in timing.window_samples_per_s],
                  **timing.summary("samples_per_s"),
                  windows_s=round(sum(timing.window_s), 6),
                  inside_windows=per_generation(inside), outside_windows=per_generation(outside),
                  longest_inside_s=round(max((c[1] for c in inside), default=0.0), 6))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
