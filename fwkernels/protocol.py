"""The measurement protocol, in one place.

Warm-up steps run first and are timed separately (compile and autotune time is
a figure of its own).  Then K timing windows of N steps each run; every window
is closed by a device sync, so queued asynchronous work is inside the window
that launched it.  Throughput is reported per window, then summarised as mean,
standard deviation (n-1), median and coefficient of variation.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence


class NonFiniteLoss(RuntimeError):
    """The loss became NaN or infinite: the run is reported as such, never as a throughput."""


@dataclass
class Timing:
    warmup_s: float
    window_s: List[float]
    steps: int  # steps per window
    samples_per_step: int
    extra: Dict[str, float] = field(default_factory=dict)

    @property
    def window_samples_per_s(self) -> List[float]:
        return [self.samples_per_step * self.steps / w for w in self.window_s]

    @property
    def step_time_s(self) -> float:
        return sum(self.window_s) / (len(self.window_s) * self.steps)

    def summary(self, prefix: str = "samples_per_s") -> Dict[str, float]:
        stats = summarize(self.window_samples_per_s)
        return {
            prefix: stats["mean"],
            f"{prefix}_std": stats["std"],
            f"{prefix}_median": stats["median"],
            f"{prefix}_cv": stats["cv"],
        }


def summarize(values: Sequence[float]) -> Dict[str, float]:
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return {
        "mean": mean,
        "std": std,
        "median": statistics.median(values),
        "cv": std / mean if mean else math.nan,
    }


def run_windows(
    step: Callable[[], None],
    sync: Callable[[], None],
    *,
    windows: int,
    steps: Optional[int],
    warmup: int,
    samples_per_step: int,
    target_window_s: float = 1.0,
    check: Optional[Callable[[], None]] = None,
    clock: Callable[[], float] = time.perf_counter,
    run_steps: Optional[Callable[[int], None]] = None,
) -> Timing:
    """Time ``warmup`` steps, then ``windows`` windows of ``steps`` steps, each closed by ``sync``.

    ``steps=None`` calibrates the steps per window after the warm-up so that a
    window lasts about ``target_window_s``.  ``check`` runs outside the timed
    windows (after warm-up and after each window), e.g. to raise ``NonFiniteLoss``.
    ``run_steps(n)``, where given, runs n steps in one call (a framework's own multi-step
    loop, Keras' ``fit``) in place of n calls of ``step``.
    """
    if windows < 1 or (steps is not None and steps < 1) or warmup < 0:
        raise ValueError("windows and steps must be >= 1 and warmup >= 0")
    if run_steps is None:
        def run_steps(count: int) -> None:
            for _ in range(count):
                step()
    start = clock()
    run_steps(warmup)
    sync()
    warmup_s = clock() - start
    if check:
        check()
    if steps is None:
        steps = calibrate_steps(lambda: run_steps(1), sync, target_window_s, clock)
    window_s = []
    for _ in range(windows):
        start = clock()
        run_steps(steps)
        sync()
        window_s.append(clock() - start)
        if check:
            check()
    return Timing(warmup_s, window_s, steps, samples_per_step)


def finite_loss_check(loss: Callable[[], float]) -> Callable[[], None]:
    def check() -> None:
        value = loss()
        if not math.isfinite(value):
            raise NonFiniteLoss(f"loss is {value}")
    return check


def calibrate_steps(
    step: Callable[[], None],
    sync: Callable[[], None],
    target_window_s: float,
    clock: Callable[[], float] = time.perf_counter,
) -> int:
    """Steps per window so that one window lasts about ``target_window_s`` (at least 1)."""
    start = clock()
    step()
    sync()
    one = clock() - start
    return max(1, math.ceil(target_window_s / one)) if one > 0 else 1
