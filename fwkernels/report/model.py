"""The report's data: for one machine and commit, a row per framework version and mode, and
for each figure of a row its value or why there is none (``Outcome``).

The tables are built from it in tables.py and written out by render.py (terminal, Markdown)
and html.py (pages inside asv's site).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple
from urllib.parse import quote

from fwkernels import site
from fwkernels.frameworks import FRAMEWORKS
from fwkernels.frameworks.base import PRECISIONS
from fwkernels.record import BESIDE_TOLERANCE, share_beside
from fwkernels.report.results import Run, Value, run_names, select
from fwkernels.report.table import Table
from fwkernels.request import DEFAULT_MODE, split_target

# Host speeds further apart than this are named in the report and compare (docs/reports.md)
HOST_SPEED_TOLERANCE = 0.10


def host_speeds_apart(slow: float, fast: float) -> Optional[float]:
    """How far apart (percent) two host speeds are, where beyond HOST_SPEED_TOLERANCE."""
    apart = fast / slow - 1
    return 100 * apart if apart > HOST_SPEED_TOLERANCE else None

NOT_INSTALLED = "no release of it measured in this run"
ALLOCATOR_EFFECT = ("on the CPU the allocator alone moved PyTorch's training throughput by up to "
                    "1.55x (docs/reports.md, *Page faults*)")


MKL_EFFECT = ("on an AMD processor MKL's AVX2 kernels trained PaddlePaddle and CNTK, whose wheels "
              "bundle an MKL that reads the variable, up to 2.24x as fast as its own choice did "
              "(docs/fairness.md, *Intel MKL on a non-Intel processor*)")


def mkl_kernels(record: Mapping[str, Any]) -> Optional[str]:
    """The MKL_DEBUG_CPU_TYPE a CPU record's worker ran with, e.g. "MKL_DEBUG_CPU_TYPE=5", or
    "MKL's own choice" where none was set (None: not a CPU record)."""
    if record.get("device", "cpu") != "cpu":
        return None
    value = record.get("mkl_debug_cpu_type")
    return f"MKL_DEBUG_CPU_TYPE={value}" if value else "MKL's own choice"


def allocator_name(record: Mapping[str, Any]) -> Optional[str]:
    """The memory allocator a record's worker ran with and the variables that tuned it, e.g.
    "glibc GLIBC_TUNABLES=..." (None: a record measured before records said)."""
    if not record.get("allocator"):
        return None
    settings = sorted((record.get("allocator_settings") or {}).items())
    return " ".join([record["allocator"]] + [f"{name}={value}" for name, value in settings])


@dataclass
class Row:
    """One framework (version, mode) of the run; frameworks absent everywhere keep a row too."""
    framework: str
    target: str  # asv's parameter: "torch" or "torch:compile"
    version: str
    runs: List[Run]  # newest first; several where a suite ran in slices; none: not installed
    suffix: str = ""  # the environment, where two environments hold the same version

    @property
    def run(self) -> Optional[Run]:
        return self.runs[0] if self.runs else None

    @property
    def label(self) -> str:
        info = FRAMEWORKS.get(self.framework)
        title = info.title if info else self.framework
        _, mode = split_target(self.target)
        text = f"{title} {self.version}".strip()
        if info and mode != info.default_mode:
            text += f" [{mode}]"
        return text + self.suffix


@dataclass
class Outcome:
    """One figure of one row: a value, or why there is none."""
    status: str  # ok, n/a, oom, nan, error, crashed, timeout, not installed, not run, no result
    value: Optional[Value] = None
    reason: str = ""
    record: Optional[Dict[str, Any]] = None

    @property
    def short(self) -> str:
        return {"n/a": "N/A", "oom": "OOM", "nan": "NaN loss", "not installed": "not measured",
                "not run": "not run", "no result": "no result"}.get(self.status,
                                                                      f"failed ({self.status})")


@dataclass
class Report:
    machine: str
    commit: str  # the releases (before the ledger: short hashes), comma-separated
    runs: List[Run]
    rows: List[Row]
    precisions: List[str]
    device: str
    environment: List[str]
    history: List[Run]  # every run of this machine, for the history charts
    sections: List[Tuple[str, List[Table]]] = field(default_factory=list)
    asv_links: bool = False
    run_to_run: float = 0.0  # the machine's run-to-run spread (noise.toml); 0: not measured

    def outcome(self, row: Row, benchmark: str, model: str, precision: str) -> Outcome:
        if row.run is None:
            return Outcome("not installed", reason=NOT_INSTALLED)
        failure = row.run.install_failure()
        if failure is not None:
            return Outcome("error", reason=failure.get("error") or "failed to install",
                           record=failure)
        key = (benchmark, row.target, model, precision)
        run = next((r for r in row.runs if key in r.values), None) or next(
            (r for r in row.runs if r.record(row.target, model, precision)), row.run)
        record = run.record(row.target, model, precision)
        value = run.values.get(key)
        if value is not None:
            return Outcome("ok", value, record=run.record(row.target, model, precision, True))
        invalid = next((r.invalid[key] for r in row.runs if key in r.invalid), None)
        if invalid:
            return Outcome("no result", reason=f"not a figure: in asv's results, {invalid}",
                           record=record)
        if record is not None and record.get("status") != "ok":
            return Outcome(record["status"], reason=record.get("error") or record["status"],
                           record=record)
        if not any(key in r.attempted for r in row.runs):
            return Outcome("not run", reason="not in this run's profile (FWKERNELS_MODELS, "
                                             "FWKERNELS_PRECISIONS, FWKERNELS_MODES)")
        if precision == "tf32" and record is None and self.device.startswith("CPU"):
            return Outcome("n/a", reason="tf32 is a GPU tensor-core mode")
        if record is None:  # asv skipped it before any measurement: a profile filter
            return Outcome("not run", reason="skipped before measuring (FWKERNELS_SELECT "
                                             "profile; asv's log says why)")
        return Outcome("no result", reason="measured, but asv kept no value (see asv's log)")

    def _run_names_by(self, key: Callable[[Mapping[str, Any]], Optional[str]]
                      ) -> Dict[str, List[str]]:
        """The names of the runs shown, by ``key`` of their records (None: left out)."""
        by_key: Dict[str, List[str]] = {}
        for run in self.history:
            for value in filter(None, map(key, run.records)):
                names = by_key.setdefault(value, [])
                if run.name not in names:
                    names.append(run.name)
        return by_key

    def harness_note(self) -> Optional[str]:
        """Which fwkernels commits measured the runs shown, when there are several: figures of
        different harness versions side by side (in a table or a history graph)."""
        by_commit = self._run_names_by(
            lambda r: (r.get("harness_commit") or r.get("asv_commit") or "")[:8] or None)
        if len(by_commit) < 2:
            return None
        return ("The graphs mix harness versions: " + "; ".join(
            f"fwkernels {commit} measured {', '.join(names)}"
            for commit, names in sorted(by_commit.items())) + ".")

    def allocator_note(self) -> Optional[str]:
        """Which memory allocators the runs shown ran with, when more than one."""
        return self._settings_note(allocator_name, "used different memory allocators",
                                   ALLOCATOR_EFFECT)

    def mkl_note(self) -> Optional[str]:
        """Which MKL kernels the runs shown asked for, when more than one setting."""
        return self._settings_note(mkl_kernels, "asked MKL for different kernels", MKL_EFFECT)

    def _settings_note(self, setting: Callable[[Mapping[str, Any]], Optional[str]], what: str,
                       effect: str) -> Optional[str]:
        by_setting = self._run_names_by(setting)
        if len(by_setting) < 2:
            return None
        return (f"The runs {what}: " + "; ".join(
            f"{value} ({', '.join(names)})"
            for value, names in sorted(by_setting.items())) + f"; {effect}.")

    def beside_note(self) -> Optional[str]:
        """Which measurements shown ran beside other work (``share_beside`` above
        BESIDE_TOLERANCE): their figures are not the framework's alone."""
        busy = sorted(((share, run.name, r["model"], r["precision"])
                       for run in self.history for r in run.records
                       for share in [share_beside(r) or 0.0] if share > BESIDE_TOLERANCE),
                      reverse=True)
        if not busy:
            return None
        share, name, model, precision = busy[0]
        return (f"{len(busy)} of the measurements shown ran beside other work: up to "
                f"{100 * share:.0f}% of the machine's CPU time went to other processes or other "
                f"guests during the timed windows ({name} {model} {precision}; the records' "
                "other_cpu_share and steal_share); their figures are not the framework's alone.")

    def host_speed_note(self) -> Optional[str]:
        """How far apart the host's speed was (``host_speed`` of the records) among the runs
        shown, when more than HOST_SPEED_TOLERANCE: their figures differ by about as much
        whatever the frameworks did. It adds how far the two probes of one measurement
        disagreed, where also more than the tolerance: the probe's own spread."""
        speeds = sorted((r["host_speed"], run.name) for run in self.history for r in run.records
                        if r.get("host_speed"))
        if not speeds:
            return None
        (slow, slow_run), (fast, fast_run) = speeds[0], speeds[-1]
        apart = host_speeds_apart(slow, fast)
        if apart is None:
            return None
        note = (f"The host ran at different speeds during these runs: {slow:.1f} ({slow_run}) "
                f"to {fast:.1f} ({fast_run}) million loop iterations/s, "
                f"{apart:.0f}% apart (fwkernels.runner.host_speed, the slower "
                "of its probes before and after each measurement); compare figures of runs "
                "taken at the same speed.")
        probes = [r["host_speed_probes"] for run in self.history for r in run.records
                  if len(r.get("host_speed_probes") or []) > 1 and min(r["host_speed_probes"]) > 0]
        within = max((host_speeds_apart(min(p), max(p)) or 0.0 for p in probes), default=0.0)
        if within:
            note += (f" The two probes of one measurement differed by up to {within:.0f}%: "
                     "differences of host speed smaller than that are the probe's own spread.")
        return note

    def graph_link(self, benchmark: str, target: str, model: str, precision: str,
                   root: str = "../") -> Optional[str]:
        """asv's graph page of this figure, relative to the report page (one folder below the
        site's root; ``root=""``: relative to the root)."""
        if not self.asv_links:
            return None
        framework, _, mode = target.partition(":")
        if any(run.release for run in self.runs):  # the ledger: a branch per framework
            params = {"machine": self.machine, "branch": framework,
                      "p-mode": f"'{mode or DEFAULT_MODE}'"}
        else:
            params = {"machine": self.machine, "p-framework": f"'{target}'"}
        params.update({"p-model": f"'{model}'", "p-precision": f"'{precision}'"})
        return f"{root}{site.ASV_PAGE}#" + benchmark + "?" + "&".join(
            f"{k}={quote(v, safe='')}" for k, v in params.items())


# ---------------------------------------------------------------------------------------------
# Building


def select_report(runs: List[Run], machine: str, commit: Optional[str] = None,
                  asv_links: bool = False) -> Report:
    """One machine at one commit, without its tables yet; asv_links: cells link to asv's
    graphs (the report's pages live one folder below asv's published site)."""
    chosen = select(runs, machine, commit)
    precisions = sorted({key[3] for run in chosen for key in run.attempted},
                        key=lambda p: PRECISIONS.index(p) if p in PRECISIONS else len(PRECISIONS))
    return Report(machine=machine, commit=", ".join(run_names(chosen)),
                  runs=chosen, rows=_rows(chosen), precisions=precisions,
                  device=_device(chosen), environment=_environment(chosen),
                  history=[r for r in runs if r.machine == machine], asv_links=asv_links)


def _rows(runs: List[Run]) -> List[Row]:
    """A row per framework target and version present in the runs (one row for the slices of
    a suite run in several environments); absent frameworks keep one."""
    rows: List[Row] = []
    for run in sorted(runs, key=lambda r: r.date, reverse=True):
        versions = run.framework_versions()
        if run.install_failure() is not None and run.release:
            versions = {run.framework: run.release.rpartition("-")[2]}
        failed = run.install_failure() is not None and run.framework
        present = ({run.framework} if failed else set()) | {
            key[1] for key in run.values} | {
            t for t in run.targets() if any(r.get("framework") == split_target(t)[0]
                                            and r.get("mode") == split_target(t)[1]
                                            for r in run.records)}
        for target in present:
            framework = split_target(target)[0]
            version = versions.get(framework, "")
            row = next((r for r in rows if (r.target, r.version) == (target, version)), None)
            if row:
                row.runs.append(run)
            else:
                rows.append(Row(framework, target, version, [run]))
    for name in FRAMEWORKS:
        if not any(r.framework == name for r in rows):
            rows.append(Row(name, name, "", []))
    order = list(FRAMEWORKS)

    def sort_key(row: Row) -> Tuple:
        framework, mode = split_target(row.target)
        modes = FRAMEWORKS[framework].modes if framework in FRAMEWORKS else ()
        version = tuple(-int(p) if p.isdigit() else 0 for p in row.version.split("+")[0].split("."))
        return (order.index(framework) if framework in order else len(order), version,
                modes.index(mode) if mode in modes else 0)

    rows.sort(key=sort_key)
    labels = [row.label for row in rows]
    for row in rows:
        if labels.count(row.label) > 1 and row.run:
            row.suffix = f" ({row.run.env.replace('virtualenv-py3.11-', '')})"
    return rows


def _device(runs: List[Run]) -> str:
    for run in runs:
        for r in run.records:
            if r.get("device") == "cuda" and r.get("device_name"):
                return r["device_name"]
    for run in runs:
        for r in run.records:
            if r.get("device") == "cpu":
                return f"CPU: {r.get('cpu', '?')}, {r.get('threads', '?')} threads"
    return "unknown device (no records)"


def _environment(runs: List[Run]) -> List[str]:
    lines = []
    for run in runs:
        versions = ", ".join(f"{k} {v}" for k, v in sorted(run.framework_versions().items()))
        lines.append(f"{run.env}: {versions or 'no framework measured'}")
    lines = list(dict.fromkeys(lines))  # one environment name at several commits: once
    extras = {}
    for run in runs:
        for r in run.records:
            for key in ("cuda_version", "cudnn_version", "driver_version"):
                if r.get(key):
                    extras.setdefault(key.replace("_version", ""), set()).add(str(r[key]))
    if extras:
        lines.append("; ".join(f"{k} {', '.join(sorted(v))}" for k, v in sorted(extras.items())))
    return lines
