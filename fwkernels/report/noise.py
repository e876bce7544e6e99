"""The run-to-run spread of training throughput measured on each machine: ``noise.toml``.

The spread inside one run (the standard deviation over its timing windows) understates how far
two separate runs of the same thing land apart.  ``fwkernels repeat`` measures the spread
between runs; noise.toml keeps, per machine, the largest one measured, with the command that
measured it.  ``fwkernels compare`` and ``fwkernels history`` call a difference real only
beyond the larger of the two spreads.
"""
from __future__ import annotations

import math
import os
import tomllib
from typing import Dict, Iterable

from fwkernels.report.results import ResultsError

DEFAULT_PATH = "noise.toml"


def load(path: str = DEFAULT_PATH) -> Dict[str, float]:
    """Machine -> its run-to-run spread of training throughput (a fraction of the mean); an
    absent file is an empty table."""
    if not os.path.exists(path):
        return {}
    try:
        with open(path, "rb") as f:
            machines = tomllib.load(f).get("machine", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ResultsError(f"{path}: {error}") from None
    spreads = {}
    for machine, entry in machines.items():
        value = entry.get("run_to_run") if isinstance(entry, dict) else None
        if not isinstance(value, (int, float)) or not 0 <= value < 1 or not math.isfinite(value):
            raise ResultsError(f"{path}: machine {machine!r} needs run_to_run, a fraction in "
                               f"[0, 1), got {value!r}")
        spreads[machine] = float(value)
    return spreads


def run_to_run(machines: Iterable[str], spreads: Dict[str, float]) -> float:
    """The largest run-to-run spread of the machines (0 for a machine never measured)."""
    return max((spreads.get(m, 0.0) for m in machines), default=0.0)


def beyond(before_mean: float, before_std: float, after_mean: float, after_std: float,
           spread: float) -> bool:
    """Do two means differ by more than the larger of the within-run spread (the sum of their
    standard deviations) and the run-to-run spread (a fraction of the first mean)?"""
    return abs(after_mean - before_mean) > max(before_std + after_std, spread * abs(before_mean))
