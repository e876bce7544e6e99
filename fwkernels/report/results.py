"""Read what the main job leaves behind: asv result files and fwkernels' measurement records.

    results/<machine>/<commit8>-<env>.json   asv: one value (and per-window samples) per benchmark
    records/<machine>/<commit8>-<env>.jsonl  fwkernels.suite: every measurement's full record
                                             (fwkernels.record), failures and N/A included

A ``Run`` is one such pair: one machine, one commit, one environment.  asv writes bare
NaN / Infinity into its JSON; ``load_json`` accepts them.

The commits are framework releases (fwkernels.ledger): a run's release comes from its records
(``release``) or from the ledger's tags, and its results' first parameter is the mode ("default"
for the framework's own). Results of the suite before the ledger, whose first parameter is the
framework target and whose commits are fwkernels' own, still read.
"""
from __future__ import annotations

import glob
import itertools
import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from fwkernels import record
from fwkernels.ledger.build import DEFAULT_PATH as LEDGER_PATH
from fwkernels.ledger.build import tags_by_commit
from fwkernels.record import Record
from fwkernels.request import DEFAULT_MODE, split_target, target_name

BENCHMARK_PREFIX = "training.Training."
THROUGHPUT = BENCHMARK_PREFIX + "track_samples_per_s"
FORWARD_BACKWARD = BENCHMARK_PREFIX + "track_forward_backward_time"
PEAK_MEMORY_TRAIN = BENCHMARK_PREFIX + "track_peak_memory_train"
PEAK_MEMORY_FORWARD = BENCHMARK_PREFIX + "track_peak_memory_forward"

# asv's unit of each benchmark, and whether a larger value is better.
HIGHER_IS_BETTER_UNITS = ("samples/s",)


class ResultsError(ValueError):
    """Missing or unusable results: the message says what was looked for and what exists."""


def load_json(path: str) -> Any:
    """json.load that accepts asv's bare NaN / Infinity / -Infinity; a file that cannot be read or
    is not JSON (a truncated write, say) is a ResultsError naming it."""
    try:
        with open(path) as f:
            return json.loads(f.read(),
                              parse_constant=lambda name: float(name.replace("Infinity", "inf")))
    except OSError as error:
        raise ResultsError(f"{path}: cannot read it ({error.strerror})") from None
    except ValueError as error:
        raise ResultsError(f"{path}: not JSON, truncated or corrupt ({error})") from None


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def check_result_file(data: Any, path: str) -> Dict[str, Any]:
    """``data`` if it has the layout of an asv result file where this module reads it, else a
    ResultsError naming the file and what is wrong."""
    def wrong(what: str) -> ResultsError:
        return ResultsError(f"{path}: not an asv result file: {what}")

    if not isinstance(data, dict):
        raise wrong(f"the file holds {_kind(data)}, not an object")
    for key, kind in (("results", dict), ("result_columns", list), ("params", dict),
                      ("requirements", dict)):
        if data.get(key) is not None and not isinstance(data[key], kind):
            raise wrong(f"{key!r} is {_kind(data[key])}, not {_kind(kind())}")
    date = data.get("date")
    if date is not None and (isinstance(date, bool) or not isinstance(date, (int, float))
                             or not math.isfinite(date)):
        raise wrong(f"'date' is {date!r}, not milliseconds since the epoch")
    columns = data.get("result_columns") or []
    for name, entry in (data.get("results") or {}).items():
        if not isinstance(entry, list):
            raise wrong(f"{name} is {_kind(entry)}, not a list of result columns")
        fields = dict(zip(columns, entry))
        params = fields.get("params")
        if params is not None and not (isinstance(params, list)
                                       and all(isinstance(p, list) for p in params)):
            raise wrong(f"{name}: 'params' is not a list of parameter lists")
        for column in ("result", "samples"):
            if fields.get(column) is not None and not isinstance(fields[column], list):
                raise wrong(f"{name}: {column!r} is {_kind(fields[column])}, not a list (one "
                            "entry per combination of parameters)")
    return data


def load_result_file(path: str) -> Dict[str, Any]:
    return check_result_file(load_json(path), path)


def unquote(text: str) -> str:
    """asv stores string parameters as their repr ("'torch'")."""
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


@dataclass(frozen=True)
class Value:
    """One benchmark result: the mean, its per-window spread where asv recorded samples."""
    mean: float
    std: Optional[float]  # None: no samples, so no measured spread
    samples: Tuple[float, ...] = ()

    @staticmethod
    def problem(result: Any, samples: Any) -> Optional[str]:
        """Why asv's figure is no number (a non-finite window), or None."""
        if result is not None and (isinstance(result, bool)
                                   or not isinstance(result, (int, float))):
            return f"its result is {_kind(result)}, not a number"
        if samples is not None and not isinstance(samples, list):
            return f"its samples are {_kind(samples)}, not a list"
        bad = [x for x in samples or [] if isinstance(x, bool) or not isinstance(x, (int, float))
               or not math.isfinite(x)]
        if bad:
            return f"{len(bad)} of its {len(samples)} samples are not finite numbers " \
                   f"({', '.join(sorted({json.dumps(x) for x in bad}))})"
        return None

    @classmethod
    def from_asv(cls, result: Any, samples: Optional[List[float]]) -> Optional["Value"]:
        """The figure, or None where asv has none (NaN: not measured).  Check ``problem`` first."""
        if result is None or (isinstance(result, float) and not math.isfinite(result)):
            return None
        if samples:
            mean = sum(samples) / len(samples)
            std = (sum((x - mean) ** 2 for x in samples) / (len(samples) - 1)) ** 0.5 \
                if len(samples) > 1 else 0.0
            return cls(mean, std, tuple(samples))
        return cls(float(result), None)


# (benchmark, framework target, model, precision): a target is "torch" or "torch:compile".
Key = Tuple[str, str, str, str]


@dataclass
class Run:
    """One asv result file and the records of the same machine, commit and environment."""
    machine: str
    commit: str  # full hash
    env: str
    date: int  # asv's commit date, milliseconds since the epoch
    requirements: Dict[str, str]
    values: Dict[Key, Value] = field(default_factory=dict)
    attempted: Dict[Key, bool] = field(default_factory=dict)  # asv listed it (value or not)
    invalid: Dict[Key, str] = field(default_factory=dict)  # a figure that is no number: why
    records: List[Record] = field(default_factory=list)
    path: str = ""
    release: Optional[str] = None  # the ledger release of the commit, "torch-2.14.1"

    @property
    def short_commit(self) -> str:
        return self.commit[:8]

    @property
    def framework(self) -> Optional[str]:
        """The framework of the run's release (None for a run before the ledger)."""
        return self.release.rpartition("-")[0] if self.release else None

    @property
    def name(self) -> str:
        """The release where there is one, else the commit."""
        return self.release or self.short_commit

    def record(self, target: str, model: str, precision: str,
               finished: bool = False) -> Optional[Record]:
        """The newest record of one combination in this run (``finished``: of those with status
        ok, the measurement that asv's value is), or None."""
        wanted = (*split_target(target), model, precision)
        matches = [r for r in self.records
                   if (r.get("framework"), r.get("mode"), r.get("model"), r.get("precision")) == wanted
                   and (not finished or r.get("status") == "ok")]
        return max(reversed(matches), key=lambda r: r.get("timestamp") or "") if matches else None

    def install_failure(self) -> Optional[Record]:
        """The record of a release that did not install (nothing of it was measured), or None."""
        return next((r for r in self.records if r.get("failed_phase") == "install"), None)

    def targets(self) -> List[str]:
        return sorted({key[1] for key in self.attempted})

    def framework_versions(self) -> Dict[str, str]:
        """Framework name -> version, from the records (what the framework itself reported)."""
        return {r["framework"]: r["framework_version"] for r in self.records
                if r.get("framework_version")}


def combinations(data: Dict[str, Any]) -> Iterator[Tuple[str, Tuple[str, ...], Dict[str, Any],
                                                         Dict[str, Any]]]:
    """Each (benchmark, combination of three parameters, unquoted) of an asv result file, with
    the combination's columns (result, samples, stats_*) and the benchmark's (params, version,
    started_at, ...)."""
    columns = data.get("result_columns", [])
    for benchmark, entry in (data.get("results") or {}).items():
        if not benchmark.startswith(BENCHMARK_PREFIX):
            continue
        fields = dict(zip(columns, entry))
        combos = list(itertools.product(*fields.get("params") or [[]]))
        for index, combo in enumerate(combos):
            if len(combo) != 3:
                continue
            cell = {c: v[index] for c, v in fields.items()
                    if isinstance(v, list) and c != "params" and len(v) == len(combos)}
            yield benchmark, tuple(unquote(p) for p in combo), cell, fields


def other_grids(data: Dict[str, Any]) -> Dict[str, int]:
    """The suite's benchmarks of a result file whose grid is not (mode, model, precision): name
    -> number of parameters.  Nothing says which of their parameters is which."""
    columns = data.get("result_columns", [])
    out = {}
    for benchmark, entry in (data.get("results") or {}).items():
        params = dict(zip(columns, entry)).get("params") or []
        if benchmark.startswith(BENCHMARK_PREFIX) and len(params) != 3:
            out[benchmark] = len(params)
    return out


def read_result_file(path: str, releases: Optional[Dict[str, str]] = None,
                     records: Optional[List[Record]] = None) -> Run:
    """One result file; ``releases`` maps commits to release tags (the ledger's), ``records`` are
    the run's (their ``release`` names it too).  Benchmarks of another parameter grid are left
    out with a warning."""
    data = load_result_file(path)
    skipped = other_grids(data)
    if skipped:
        counts = sorted(set(skipped.values()))
        record.warn(f"{path}: {len(skipped)} benchmark(s) with {' or '.join(map(str, counts))} "
                    f"parameters left out ({', '.join(sorted(skipped))[:200]}): this fwkernels "
                    f"reads the suite's grid of three (mode or framework, model, precision)")
    params = data.get("params", {})
    commit = data.get("commit_hash", "")
    named = [r.release for r in records or [] if r.get("release")]
    run = Run(machine=params.get("machine") or os.path.basename(os.path.dirname(path)),
              commit=commit, env=data.get("env_name", ""),
              date=int(data.get("date") or 0), requirements=dict(data.get("requirements") or {}),
              path=path, records=list(records or []),
              release=named[-1] if named else (releases or {}).get(commit))
    for benchmark, (first, model, precision), cell, _ in combinations(data):
        if run.framework:  # the mode of the release's framework
            first = target_name(run.framework, "" if first == DEFAULT_MODE else first)
        key: Key = (benchmark, first, model, precision)
        run.attempted[key] = True
        problem = Value.problem(cell.get("result"), cell.get("samples"))
        if problem:
            run.invalid[key] = problem
            continue
        value = Value.from_asv(cell.get("result"), cell.get("samples"))
        if value is not None:
            run.values[key] = value
    return run


def load_runs(results_dir: str, records_dir: Optional[str] = None) -> List[Run]:
    """Every run under results_dir, records attached (records_dir: default beside results_dir)."""
    if not os.path.isdir(results_dir):
        raise ResultsError(f"no results directory {results_dir!r}: run the main job "
                           f"(scripts/bench) or pass --results")
    root = os.path.dirname(os.path.abspath(results_dir))
    records_dir = records_dir or os.path.join(root, "records")
    releases = tags_by_commit(os.path.join(root, LEDGER_PATH))
    runs = []
    for path in sorted(glob.glob(os.path.join(results_dir, "*", "*.json"))):
        if os.path.basename(path) == "machine.json":
            continue
        name = os.path.splitext(os.path.basename(path))[0]
        machine = os.path.basename(os.path.dirname(path))
        records = record.read(os.path.join(records_dir, machine, name + ".jsonl"))
        run = read_result_file(path, releases, records)
        add_window_spread(run)
        runs.append(run)
    return runs


# Scalar benchmarks whose spread the record holds as the windows' coefficient of variation.
WINDOW_CV = {BENCHMARK_PREFIX + "track_train_step_time": "samples_per_s_cv",
             BENCHMARK_PREFIX + "track_forward_time": "forward_samples_per_s_cv"}


def add_window_spread(run: Run) -> None:
    """Give mean step times the spread of their timing windows (std = mean x the windows'
    throughput cv), which asv does not keep for a scalar result."""
    for key, value in list(run.values.items()):
        cv_field = WINDOW_CV.get(key[0])
        found = run.record(*key[1:]) if cv_field and value.std is None else None
        if found and found.get(cv_field) is not None:
            run.values[key] = Value(value.mean, value.mean * found[cv_field])


def benchmark_units(results_dir: str) -> Dict[str, str]:
    """Benchmark name -> asv unit, from asv's results/benchmarks.json."""
    path = os.path.join(results_dir, "benchmarks.json")
    if not os.path.exists(path):
        return {}
    return {name: info.get("unit", "") for name, info in load_benchmarks(path).items()
            if isinstance(info, dict) and name.startswith(BENCHMARK_PREFIX)}


def load_benchmarks(path: str) -> Dict[str, Any]:
    """asv's benchmarks.json: benchmark name -> its description."""
    data = load_json(path)
    if not isinstance(data, dict):
        raise ResultsError(f"{path}: not asv's benchmarks.json: the file holds {_kind(data)}, "
                           "not an object")
    return data


def higher_is_better(unit: str) -> bool:
    return unit in HIGHER_IS_BETTER_UNITS


def machines(runs: List[Run]) -> List[str]:
    return sorted({r.machine for r in runs})


def commits_by_date(runs: List[Run]) -> List[str]:
    """Commits oldest first (asv's commit date, then the order results were written)."""
    order: Dict[str, int] = {}
    for run in runs:
        order[run.commit] = max(order.get(run.commit, 0), run.date)
    return sorted(order, key=lambda c: order[c])


def select(runs: List[Run], machine: Optional[str] = None, commit: Optional[str] = None) -> List[Run]:
    """The runs of one machine at one commit or release (a hash prefix or a release tag such as
    torch-2.14.1), or at several (comma list); by default the newest release of each framework
    (before the ledger: the latest commit)."""
    if machine is not None:
        chosen = [r for r in runs if r.machine == machine]
        if not chosen:
            raise ResultsError(f"no results for machine {machine!r}; machines with results: "
                               f"{', '.join(machines(runs)) or 'none'}")
        runs = chosen
    if commit:
        names = [c.strip() for c in commit.split(",") if c.strip()]
        for name in names:
            if not any(r.release == name or r.commit.startswith(name) for r in runs):
                raise ResultsError(f"no results for commit or release {name!r}; with results: "
                                   f"{', '.join(run_names(runs))}")
        return [r for r in runs if any(r.release == n or r.commit.startswith(n) for n in names)]
    return newest(runs)


def newest(runs: List[Run]) -> List[Run]:
    """The runs of each framework's newest release (by release date); runs before the ledger: of
    the latest commit."""
    released = [r for r in runs if r.release]
    if not released:
        latest = commits_by_date(runs)[-1] if runs else None
        return [r for r in runs if r.commit == latest]
    by_framework: Dict[str, Run] = {}
    for run in released:
        known = by_framework.get(run.framework or "")
        if known is None or run.date > known.date:
            by_framework[run.framework or ""] = run
    commits = {run.commit for run in by_framework.values()}
    return [r for r in released if r.commit in commits]


def run_names(runs: List[Run]) -> List[str]:
    """Releases (or commits, before the ledger) with results, oldest first."""
    order = {r.commit: r.name for r in runs}
    return [order[c] for c in commits_by_date(runs)]


def widen_benchmark_grids(results_dir: str) -> List[str]:
    """Make results/benchmarks.json's parameter grids cover every stored result.

    asv's discovery writes the grid of the profile that ran last (the FWKERNELS_*
    variables), and `asv publish` drops the results outside it: another machine's
    precisions, another profile's frameworks.  Each result file keeps its own grid;
    the union keeps them all.  Returns the benchmarks whose grid grew.
    """
    if not os.path.isdir(results_dir):
        raise ResultsError(f"no results directory {results_dir!r}")
    path = os.path.join(results_dir, "benchmarks.json")
    if not os.path.exists(path):  # nothing discovered yet: nothing to publish either
        return []
    benchmarks = load_benchmarks(path)
    widened = []
    for result_path in sorted(glob.glob(os.path.join(results_dir, "*", "*.json"))):
        if os.path.basename(result_path) == "machine.json":
            continue
        data = load_result_file(result_path)
        columns = data.get("result_columns", [])
        for name, entry in (data.get("results") or {}).items():
            grid = dict(zip(columns, entry)).get("params") or []
            info = benchmarks.get(name)
            known_grid = info.get("params") if isinstance(info, dict) else None
            if not isinstance(known_grid, list) or len(grid) != len(known_grid):
                continue
            for values, known in zip(grid, known_grid):
                new = [v for v in values if v not in known]
                if new:
                    known.extend(new)
                    widened.append(name)
    write_atomically(path, json.dumps(benchmarks, indent=4, sort_keys=True))
    return sorted(set(widened))


def write_atomically(path: str, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a reader or a kill sees the old file)."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise

