"""One framework's training throughput against another's, per model and precision, from records.

    python scripts/framework_ratio.py BASELINE OTHER RECORDS.jsonl [RECORDS.jsonl ...]

BASELINE and OTHER are framework names, optionally with a mode (``torch``, ``torch:compile``,
``keras-torch``); a name alone means the framework's default mode (``torch`` is eager). Prints a Markdown table of OTHER / BASELINE for every model and precision where
both have a finished record; where a combination was measured more than once, the newest record
(by timestamp) counts. ``-`` where either is missing or did not finish.
"""
from __future__ import annotations

import json
import sys
from typing import Dict, Iterable, List, Optional, Tuple

from fwkernels.frameworks import get_framework
from fwkernels.models import MODELS
from fwkernels.results import split_target

PRECISIONS = ("fp32", "tf32", "bf16")


def newest_rates(records: Iterable[Dict], target: str) -> Dict[Tuple[str, str], float]:
    framework, mode = split_target(target)
    get_framework(framework).check_mode(mode)  # unknown names fail with the valid ones
    newest: Dict[Tuple[str, str], Dict] = {}
    for r in records:
        if (r["framework"], r.get("mode")) == (framework, mode) and r.get("status") == "ok":
            key = (r["model"], r["precision"])
            if key not in newest or r["timestamp"] > newest[key]["timestamp"]:
                newest[key] = r
    return {key: r["samples_per_s"] for key, r in newest.items()}


def table(records: List[Dict], baseline: str, other: str) -> str:
    base, comp = newest_rates(records, baseline), newest_rates(records, other)

    def cell(model: str, precision: str) -> str:
        a: Optional[float] = base.get((model, precision))
        b: Optional[float] = comp.get((model, precision))
        return f"{b / a:.2f}" if a and b else "-"

    lines = [f"| {other} / {baseline} | " + " | ".join(PRECISIONS) + " |",
             "|---|" + "---:|" * len(PRECISIONS)]
    for model in MODELS:
        lines.append(f"| {model} | " + " | ".join(cell(model, p) for p in PRECISIONS) + " |")
    return "\n".join(lines)


def main(argv: List[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    baseline, other, *paths = argv
    records = []
    for path in paths:
        with open(path) as f:
            records += [json.loads(line) for line in f if line.strip()]
    try:
        print(table(records, baseline, other))
    except ValueError as error:  # an unknown framework or mode, with the valid ones
        print(f"framework_ratio.py: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
