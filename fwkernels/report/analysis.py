"""Where a measurement's wall time goes, per framework, from records that carry ``measure_s``.

    python scripts/combination_time.py RECORDS.jsonl [RECORDS.jsonl ...]

Prints a Markdown table: per framework the number of combinations and the seconds spent, summed
over them, in the whole measurement (``measure_s``, worker processes included), the framework
import, the build (model, optimizer state, batch), the compilation/warm-up of the three phases,
the FLOP count, the training phase's timing windows, and the rest (the forward-backward and
forward windows, interpreter start, device initialisation).
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from typing import Dict, Iterable, List

PARTS = ("import", "build", "warm-up", "FLOPs", "training windows", "rest")


def parts(record: Dict) -> Dict[str, float]:
    known = {
        "import": record["import_s"],
        "build": record["build_s"],
        "warm-up": record["warmup_s"] + record.get("forward_backward_warmup_s", 0.0)
        + record.get("forward_warmup_s", 0.0),
        "FLOPs": record["flops_s"],
        "training windows": record["windows"] * record["steps_per_window"] * record["step_time_s"],
    }
    return {**known, "rest": record["measure_s"] - sum(known.values())}


def table(records: Iterable[Dict]) -> str:
    totals: Dict[str, Dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in records:
        if r.get("status") != "ok" or "measure_s" not in r:
            continue
        total = totals[r["framework"]]
        total["combinations"] += 1
        total["measure"] += r["measure_s"]
        for name, seconds in parts(r).items():
            total[name] += seconds
    lines = ["| framework | combinations | measurement s | " + " | ".join(f"{p} s" for p in PARTS)
             + " |", "|---|---:|---:|" + "---:|" * len(PARTS)]
    for framework, t in totals.items():
        lines.append(f"| {framework} | {t['combinations']:.0f} | {t['measure']:.0f} | "
                     + " | ".join(f"{t[p]:.0f}" for p in PARTS) + " |")
    return "\n".join(lines)


def main(paths: List[str]) -> int:
    records = []
    for path in paths:
        with open(path) as f:
            records += [json.loads(line) for line in f if line.strip()]
    print(table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
