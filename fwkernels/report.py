"""Read asv results (tolerant of NaN/Infinity) and print the throughput table."""
from __future__ import annotations

import argparse
import glob
import itertools
import json
import math
import os
from typing import Any, Dict, List, Optional

from fwkernels.frameworks import FRAMEWORKS
from fwkernels.models import MODELS

BENCHMARK = "training.Training.track_samples_per_s"


def load_json(path: str) -> Any:
    """json.load that accepts asv's bare NaN / Infinity / -Infinity."""
    with open(path) as f:
        return json.loads(f.read(), parse_constant=lambda name: float(name.replace("Infinity", "inf")))


def result_files(results_dir: str, machine: Optional[str] = None) -> List[str]:
    pattern = os.path.join(results_dir, machine or "*", "*.json")
    return sorted(p for p in glob.glob(pattern) if os.path.basename(p) != "machine.json")


def throughput_rows(path: str, benchmark: str = BENCHMARK) -> List[Dict[str, Any]]:
    """One row per (framework, model, precision) of one asv result file: mean ± std of windows."""
    data = load_json(path)
    columns = data.get("result_columns", [])
    entry = data.get("results", {}).get(benchmark)
    if entry is None:
        return []
    values = dict(zip(columns, entry))
    rows = []
    combos = itertools.product(*values.get("params") or [[]])
    samples = values.get("samples") or []
    for i, (combo, result) in enumerate(zip(combos, values.get("result") or [])):
        if result is None or (isinstance(result, float) and math.isnan(result)):
            continue
        window = samples[i] if i < len(samples) and samples[i] else [result]
        mean = sum(window) / len(window)
        std = (sum((x - mean) ** 2 for x in window) / (len(window) - 1)) ** 0.5 if len(window) > 1 else 0.0
        framework, model, precision = (eval_param(p) for p in combo)
        rows.append({"framework": framework, "model": model, "precision": precision,
                     "mean": mean, "std": std, "env": data.get("env_name"),
                     "commit": data.get("commit_hash"), "machine": data.get("params", {}).get("machine")})
    return rows


def eval_param(text: str) -> str:
    """asv stores string parameters as their repr ("'torch'")."""
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def table(rows: List[Dict[str, Any]]) -> str:
    models = [m for m in MODELS if any(r["model"] == m for r in rows)]
    header = ["framework (env)"] + [MODELS[m].title for m in models]
    lines = []
    for key, group in itertools.groupby(sorted(rows, key=lambda r: (r["framework"], r["env"] or "", r["precision"])),
                                        key=lambda r: (r["framework"], r["env"], r["precision"])):
        cells = {r["model"]: f"{r['mean']:.4g} ± {r['std']:.2g}" for r in group}
        lines.append([f"{key[0]} {key[2]} ({key[1]})"] + [cells.get(m, "N/A") for m in models])
    widths = [max(len(str(row[i])) for row in [header] + lines) for i in range(len(header))]
    fmt = lambda row: " | ".join(str(c).ljust(w) for c, w in zip(row, widths))  # noqa: E731
    units = ", ".join(f"{MODELS[m].title}: {MODELS[m].unit}/s" for m in models)
    return "\n".join([fmt(header), "-+-".join("-" * w for w in widths)] + [fmt(r) for r in lines]
                     + [f"(mean ± std over timing windows; {units})"])


def latest_rows(results_dir: str, machine: Optional[str] = None) -> List[Dict[str, Any]]:
    files = result_files(results_dir, machine)
    if not files:
        return []
    by_date = sorted(files, key=lambda p: load_json(p).get("date", 0))
    latest_commit = load_json(by_date[-1]).get("commit_hash")
    return [row for p in files for row in throughput_rows(p) if row["commit"] == latest_commit]


def cmd_report(args: argparse.Namespace) -> int:
    rows = latest_rows(args.results, args.machine)
    if not rows:
        print(f"no throughput results under {args.results!r}: run `asv run` first")
        return 1
    print(table(rows))
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="the throughput table from asv results")
    p.add_argument("--results", default="results", help="asv results directory")
    p.add_argument("--machine", help="asv machine name (default: all)")
    p.set_defaults(func=cmd_report)
