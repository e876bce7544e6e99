"""Fold asv results into the ledger's layout: one result file per machine, release and
environment, named for what it is.

    fwkernels ledger fold --machine h200 --env existing-py3.12

takes every result file of the machine that is not yet at a ledger commit under that environment
name: results of the suite before the ledger (commits of fwkernels, first parameter the framework
target) and runs of one release split over several environments (``asv run -E existing`` names an
environment after its interpreter's path; a run in slices used several). Each figure goes to the
release its record names (the framework's reported version), under the suite's current
parameters (mode, model, precision); where several files hold the same figure, the one measured
last is kept (a figure before a failed or skipped cell, which keeps its place in the grid), and
every record is kept in the release's records file, with ``harness_commit`` naming the fwkernels
commit that measured it. Nothing is written until every figure has found its release; the files
folded are then removed.

asv replaces a release's result whole when it runs the release again, so a run of fewer models
would lose the others' figures: ``set_aside`` moves the results and records a run will replace to
the environment ``earlier`` first, and the fold after the run takes them back, figure by figure
(``fwkernels ledger set-aside``; scripts/bench does both).

asv writes a parameterised benchmark's result only when all its combinations have run, so a run
stopped before that (a time limit) leaves records and no result. Where a finished record of the
files folded has no figure in any of them nor in the folded file, its figures are written from the
record: what the suite returns for it (``suite.figures``), with asv's own statistics, under the
version benchmarks.json names. A figure asv wrote is never replaced by one from a record.
"""
from __future__ import annotations

import datetime
import glob
import itertools
import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from fwkernels import record, suite
from fwkernels.frameworks import FRAMEWORKS
from fwkernels.frameworks.base import PRECISIONS
from fwkernels.ledger.build import tags_by_commit
from fwkernels.ledger.releases import LedgerError, TrackedFramework
from fwkernels.models import MODELS
from fwkernels.record import Record
from fwkernels.report.results import (BENCHMARK_PREFIX, combinations, load_json,
                                      load_result_file, write_atomically)
from fwkernels.request import DEFAULT_MODE, split_target, suite_mode

COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
           "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples",
           "profile"]
PER_COMBINATION = ["result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75",
                   "stats_number", "stats_repeat", "samples"]
SET_ASIDE_ENV = "earlier"
# (release tag, mode parameter, model, precision)
Combination = Tuple[str, str, str, str]


@dataclass
class Figure:
    values: Dict[str, Any]  # PER_COMBINATION column -> this combination's entry
    version: Optional[str]  # the benchmark's code hash
    started_at: Optional[int]
    order: Tuple[int, int]  # (started_at, the file's date): the larger was measured last
    measured: bool = True  # False: asv's None (failed) or NaN (skipped), kept below any figure


@dataclass
class Folded:
    python: str
    date: int = 0
    figures: Dict[str, Dict[Combination, Figure]] = field(default_factory=dict)
    records: List[Record] = field(default_factory=list)


def release_of(result: Record, tracked: Dict[str, TrackedFramework]) -> str:
    """The release tag of a record, from the version its framework reported."""
    framework, reported = result.framework, result.framework_version or ""
    version = reported.split()[0].split("+")[0] if reported else ""
    if framework not in tracked or not any(r.version == version for r in tracked[framework].releases):
        raise LedgerError(f"{framework} {version or '(no version recorded)'} is not in the releases "
                          f"file: add it with its date (and `python` where it needs one), then "
                          f"`fwkernels ledger build`")
    return f"{framework}-{version}"


def fold(results_dir: str, records_dir: str, machine: str, env: str,
         tracked: Dict[str, TrackedFramework], ledger: str,
         from_records: Optional[List[str]] = None) -> List[str]:
    """Fold the machine's results (see the module's text); returns what was written, and adds
    to ``from_records`` each combination whose figures were written from its record."""
    tags = tags_by_commit(ledger)
    commits = {tag: commit for commit, tag in tags.items()}
    if not commits:
        raise LedgerError(f"no ledger at {ledger}: `fwkernels ledger build` first")
    folded: Dict[str, Folded] = {}
    sources = []
    for path in sorted(glob.glob(os.path.join(results_dir, machine, "*.json"))):
        name = os.path.splitext(os.path.basename(path))[0]
        if name == "machine":
            continue
        data = load_result_file(path)
        if data.get("commit_hash") in tags and data.get("env_name") == env:
            continue  # folded already (its figures join the new ones below)
        records_path = os.path.join(records_dir, machine, name + ".jsonl")
        records = record.read(records_path)
        _fold_file(data, records, tags, tracked, folded)
        sources += [path, records_path]
    for records_path in sorted(glob.glob(os.path.join(records_dir, machine, "*.jsonl"))):
        name = os.path.splitext(os.path.basename(records_path))[0]
        if records_path in sources or name.endswith(f"-{env}"):
            continue  # folded above, or the records of a folded file
        # records whose asv results were never written (a run stopped before its benchmark
        # finished): kept with their release all the same
        _fold_file({}, record.read(records_path), tags, tracked, folded)
        sources.append(records_path)
    written = []
    versions = _benchmark_versions(os.path.join(results_dir, "benchmarks.json"))
    for tag, entry in sorted(folded.items()):
        if tag not in commits:
            raise LedgerError(f"{tag} is in the releases file but not in the ledger at {ledger}: "
                              "`fwkernels ledger build` first")
        stem = f"{commits[tag][:8]}-{env}"
        path = os.path.join(results_dir, machine, stem + ".json")
        if os.path.exists(path):  # folded before: its figures stay unless newer ones came
            _fold_file(load_result_file(path), [], tags, tracked, folded, release=tag)
        for combination in _figures_from_records(entry, versions):
            if from_records is not None:
                from_records.append(f"{machine} {' '.join(combination)}")
        written.append(_write_result(path, entry, commits[tag], release_date_ms(tracked, tag),
                                     env, machine))
        records_path = os.path.join(records_dir, machine, stem + ".jsonl")
        for result in entry.records:
            record.append(records_path, result)
        written.append(records_path)
    for path in sources:
        if os.path.exists(path):
            os.remove(path)
    return written


def set_aside(results_dir: str, records_dir: str, machine: str, env: str,
              commits: List[str]) -> List[str]:
    """Move the machine's results and records of ``env`` at these ledger commits to the
    environment ``earlier``, for ``fold`` to take back after a run of them; returns what was
    moved. A set-aside not yet folded back is an error (fold first): nothing is moved then."""
    moves = []
    for commit in commits:
        for folder, extension in ((results_dir, ".json"), (records_dir, ".jsonl")):
            source, target = (os.path.join(folder, machine, f"{commit[:8]}-{name}{extension}")
                              for name in (env, SET_ASIDE_ENV))
            if os.path.exists(target):
                raise LedgerError(f"{target} was set aside before and not folded back: "
                                  f"`fwkernels ledger fold --machine {machine} --env {env}` first")
            if os.path.exists(source):
                moves.append((source, target))
    for source, target in moves:
        if target.endswith(".json"):
            data = load_result_file(source)
            data["env_name"] = SET_ASIDE_ENV
            write_atomically(target, json.dumps(data, indent=1))
            os.remove(source)
        else:
            os.replace(source, target)
    return [target for _, target in moves]


def _benchmark_versions(path: str) -> Dict[str, str]:
    """Each benchmark's version in asv's benchmarks.json (none where asv never ran here)."""
    if not os.path.exists(path):
        return {}
    return {name: info["version"] for name, info in load_json(path).items()
            if isinstance(info, dict) and "version" in info}


def _figures_from_records(entry: Folded, versions: Dict[str, str]) -> List[Combination]:
    """Figures for the entry's finished records whose combinations asv wrote none for (the
    module's text); returns those combinations."""
    written: List[Combination] = []
    asv_wrote = {benchmark: {c for c, figure in cells.items() if figure.measured}
                 for benchmark, cells in entry.figures.items()}
    for result in sorted((r for r in entry.records if r.ok), key=lambda r: r.timestamp or ""):
        combination = (result.release, suite_mode(result.framework, result.mode), result.model,
                       result.precision)
        started = int(datetime.datetime.fromisoformat(result.timestamp).timestamp() * 1000)
        for name, value in suite.figures(result).items():
            benchmark = BENCHMARK_PREFIX + name
            if benchmark not in versions or combination in asv_wrote.get(benchmark, ()):
                continue
            entry.figures.setdefault(benchmark, {})[combination] = Figure(
                _as_asv_writes(value), versions[benchmark], started, (started, entry.date))
            if combination not in written:
                written.append(combination)
    return written


def _as_asv_writes(value: Any) -> Dict[str, Any]:
    """A benchmark's return value as asv's result file holds it: samples as their median with
    asv's statistics (rounded as asv rounds them), anything else as it is."""
    values: Dict[str, Any] = dict.fromkeys(PER_COMBINATION)
    if not isinstance(value, dict):
        values["result"] = value
        return values
    from asv.util import truncate_float_list
    from asv_runner.statistics import compute_stats

    values["result"], stats = compute_stats(value["samples"], value["number"])
    for key, stat in stats.items():
        values[f"stats_{key}"] = truncate_float_list(stat)
    values["samples"] = value["samples"]
    return values


def release_date_ms(tracked: Dict[str, TrackedFramework], tag: str) -> int:
    """asv's date of a ledger commit: its release date at 12:00 UTC, in milliseconds."""
    framework, _, version = tag.rpartition("-")
    day = tracked[framework].release(version).date
    noon = datetime.datetime.combine(day, datetime.time(12), tzinfo=datetime.timezone.utc)
    return int(noon.timestamp()) * 1000


def _fold_file(data: Dict[str, Any], records: List[Record], tags: Dict[str, str],
               tracked: Dict[str, TrackedFramework], folded: Dict[str, Folded],
               release: Optional[str] = None) -> None:
    commit = data.get("commit_hash", "")
    ledger_run = release or tags.get(commit)
    date = int(data.get("date") or 0)
    python = str(data.get("python", ""))
    if ledger_run:  # a run that skipped everything still says that it ran
        folded.setdefault(ledger_run, Folded(python=python))
    by_target: Dict[Tuple[str, str, str, str], str] = {}
    for result in records:
        tag = ledger_run or release_of(result, tracked)
        harness = result.harness_commit or (None if ledger_run else result.asv_commit)
        entry = folded.setdefault(tag, Folded(python=python))
        entry.records.append(result.with_fields(release=tag, harness_commit=harness))
        by_target[(result.framework, result.mode, result.model, result.precision)] = tag
    for benchmark, (first, model, precision), cell, fields in combinations(data):
        values = {c: cell.get(c) for c in PER_COMBINATION}
        measured = isinstance(values["result"], (int, float)) and math.isfinite(values["result"])
        if not measured and not ledger_run:
            continue  # a cell of a run before the ledger that was not measured
        if ledger_run:
            tag, mode = ledger_run, first
        else:
            framework, mode = split_target(first)
            tag = by_target.get((framework, mode, model, precision)) or next(
                (t for (f, _, _, _), t in by_target.items() if f == framework), None)
            if tag is None:
                raise LedgerError(f"{benchmark}({first}, {model}, {precision}) at {commit[:8]} has "
                              "no record naming its framework's version: its release is unknown")
            mode = suite_mode(framework, mode)
        entry = folded.setdefault(tag, Folded(python=python))
        figure = Figure(values, fields.get("version"), fields.get("started_at"),
                        (int(fields.get("started_at") or 0), date), measured)
        known = entry.figures.setdefault(benchmark, {}).get((tag, mode, model, precision))
        # a failed or skipped cell keeps its place in the grid, and never hides a figure
        if known is None or (figure.measured, figure.order) > (known.measured, known.order):
            entry.figures[benchmark][(tag, mode, model, precision)] = figure
        entry.date = max(entry.date, date)


def _write_result(path: str, entry: Folded, commit: str, date: int, env: str,
                  machine: str) -> str:
    # an existing environment's python is its interpreter's path, one per folded source: the
    # folded environment's version instead, so that the site's python selector has one entry
    version = re.search(r"-py(\d+\.\d+)$", env)
    python = version.group(1) if version else entry.python
    results = {}
    for benchmark, figures in sorted(entry.figures.items()):
        modes = _ordered({c[1] for c in figures}, [DEFAULT_MODE] + [
            m for info in FRAMEWORKS.values() for m in info.modes])
        models = _ordered({c[2] for c in figures}, list(MODELS))
        precisions = _ordered({c[3] for c in figures}, list(PRECISIONS))
        tag = next(iter(figures))[0]
        grid = [[repr(v) for v in values] for values in (modes, models, precisions)]
        cells = [figures.get((tag, *combo)) for combo in itertools.product(modes, models, precisions)]
        newest = max((f for f in cells if f), key=lambda f: f.order)
        columns: Dict[str, Any] = {c: [f.values[c] if f else None for f in cells]
                                   for c in PER_COMBINATION}
        for c in PER_COMBINATION:
            if all(v is None for v in columns[c]):
                columns[c] = None
        columns.update(params=grid, version=newest.version, started_at=newest.started_at,
                       duration=None, profile=None)
        results[benchmark] = [columns[c] for c in COLUMNS]
    data = {"commit_hash": commit, "env_name": env, "date": date,
            "params": {**machine_params(os.path.dirname(path), machine), "python": python},
            "python": python,
            "requirements": {}, "env_vars": {}, "result_columns": COLUMNS, "results": results,
            "durations": {}, "version": 2}
    write_atomically(path, json.dumps(data, indent=1))
    return path


def machine_params(machine_dir: str, machine: str) -> Dict[str, str]:
    """The machine's parameters as asv writes them into its own results (machine.json less its
    version): asv publish graphs results with different parameters as different series."""
    path = os.path.join(machine_dir, "machine.json")
    described = load_json(path) if os.path.exists(path) else {}
    return {**{k: str(v) for k, v in described.items() if k != "version"}, "machine": machine}


def _ordered(values: set, order: List[str]) -> List[str]:
    return [v for v in dict.fromkeys(order) if v in values] + sorted(v for v in values
                                                                   if v not in order)


def rename_parameters(path: str) -> None:
    """asv's benchmarks.json with the suite's current first parameter (mode, not framework), so
    that `asv publish` graphs the folded results before the next `asv run` rewrites it."""
    benchmarks = load_json(path)
    for name, info in benchmarks.items():
        if isinstance(info, dict) and info.get("param_names", [None])[0] == "framework":
            info["param_names"] = ["mode"] + info["param_names"][1:]
            info["params"] = [[repr(DEFAULT_MODE)]] + info["params"][1:]
    with open(path, "w") as f:
        json.dump(benchmarks, f, indent=4, sort_keys=True)
