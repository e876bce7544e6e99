"""``fwkernels report``: the papers' tables from asv results, for one machine and commit.

    fwkernels report                                # every machine, its latest commit
    fwkernels report --machine h200 --commit 62d2aa7d
    fwkernels report --format markdown > report.md

Prints the report (terminal or Markdown) and writes the HTML pages into the
asv site (``--html-dir``, default asv's html_dir), linked both ways with asv's
graphs (docs/reports.md).  Sections: Table 1 of the PyTorch paper, the MXNet
paper's forward-backward time and memory on the convnet-benchmarks models,
achieved TFLOP/s with the fraction of the device's peak, the derived ILSVRC12
epoch time, and the published figures as ratios to PyTorch beside ours.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import quote

from fwkernels import published, site
from fwkernels.frameworks import FRAMEWORKS
from fwkernels.frameworks.base import PRECISIONS
from fwkernels.models import CONVNET_BENCHMARKS, MODELS, PYTORCH_TABLE1
from fwkernels.results import (BENCHMARK_PREFIX, THROUGHPUT, ResultsError, Run, Value,
                               commits_by_date, load_runs, machines, select, split_target)
from fwkernels.tables import Cell, Table, render_markdown, render_text

FORWARD_BACKWARD = BENCHMARK_PREFIX + "track_forward_backward_time"
PEAK_MEMORY_TRAIN = BENCHMARK_PREFIX + "track_peak_memory_train"
PEAK_MEMORY_FORWARD = BENCHMARK_PREFIX + "track_peak_memory_forward"
NOT_INSTALLED = "not installed in any environment of this run"
MIB = 2 ** 20


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
        return {"n/a": "N/A", "oom": "OOM", "nan": "NaN loss", "not installed": "not installed",
                "not run": "not run", "no result": "no result"}.get(self.status,
                                                                      f"failed ({self.status})")


@dataclass
class Report:
    machine: str
    commit: str  # short hashes, comma-separated where several
    runs: List[Run]
    rows: List[Row]
    precisions: List[str]
    device: str
    environment: List[str]
    history: List[Run]  # every run of this machine, for the history charts
    sections: List[Tuple[str, List[Table]]] = field(default_factory=list)
    asv_links: bool = False

    def outcome(self, row: Row, benchmark: str, model: str, precision: str) -> Outcome:
        if row.run is None:
            return Outcome("not installed", reason=NOT_INSTALLED)
        key = (benchmark, row.target, model, precision)
        run = next((r for r in row.runs if key in r.values), None) or next(
            (r for r in row.runs if r.record(row.target, model, precision)), row.run)
        record = run.record(row.target, model, precision)
        value = run.values.get(key)
        if value is not None:
            return Outcome("ok", value, record=record)
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

    def graph_link(self, benchmark: str, target: str, model: str, precision: str) -> Optional[str]:
        """asv's graph page of this figure, relative to the report page (one folder down)."""
        if not self.asv_links:
            return None
        params = {"machine": self.machine, "p-framework": f"'{target}'",
                  "p-model": f"'{model}'", "p-precision": f"'{precision}'"}
        return "../index.html#" + benchmark + "?" + "&".join(
            f"{k}={quote(v, safe='')}" for k, v in params.items())


# ---------------------------------------------------------------------------------------------
# Building


def build_report(runs: List[Run], machine: str, commit: Optional[str] = None,
                 asv_links: bool = False) -> Report:
    """The report of one machine at one commit; asv_links: cells link to asv's graphs (the
    report's pages live one folder below asv's published index.html)."""
    chosen = select(runs, machine, commit)
    rows = _rows(chosen)
    precisions = sorted({key[3] for run in chosen for key in run.attempted},
                        key=lambda p: PRECISIONS.index(p) if p in PRECISIONS else len(PRECISIONS))
    commits = ", ".join(c[:8] for c in commits_by_date(chosen))
    report = Report(machine=machine, commit=commits, runs=chosen, rows=rows,
                    precisions=precisions, device=_device(chosen),
                    environment=_environment(chosen),
                    history=[r for r in runs if r.machine == machine], asv_links=asv_links)
    for precision in precisions:
        report.sections.append((f"Training throughput ({precision})",
                                [table1(report, precision)]))
    report.sections.append(("Spread", [spread_table(report)]))
    report.sections.append(("MXNet paper: convnet-benchmarks time and memory",
                            [forward_backward_table(report, p) for p in precisions]
                            + [memory_table(report, p) for p in precisions]))
    report.sections.append(("Achieved TFLOP/s and derived epoch time",
                            [tflops_table(report, p) for p in precisions]
                            + [epoch_table(report, p) for p in precisions]))
    report.sections.append(("Published figures beside ours (ratios)",
                            [table1_ratios(report), convnet_ratios(report)]
                            + ([modern_ratios(report)] if "tf32" in precisions else [])))
    return report


def _rows(runs: List[Run]) -> List[Row]:
    """A row per framework target and version present in the runs (one row for the slices of
    a suite run in several environments); absent frameworks keep one."""
    rows: List[Row] = []
    for run in sorted(runs, key=lambda r: r.date, reverse=True):
        versions = run.framework_versions()
        present = {key[1] for key in run.values} | {
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


def _outcome_cell(table: Table, row: Row, outcome: Outcome, model: str) -> Cell:
    note = table.footnote(f"{row.label} × {MODELS[model].title}: {outcome.reason}") \
        if outcome.status not in ("not installed", "not run") else None
    return Cell(outcome.short, note=note, muted=True)


def format_value(value: float, std: Optional[float] = None) -> str:
    if abs(value) >= 1e6:
        text = f"{value:.3g}".replace("e+0", "e").replace("e+", "e")
        return text + (f" ± {100 * std / value:.1f}%" if std is not None and value else "")
    text = f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    if std is not None:
        text += f" ± {std:,.2g}" if std < 100 else f" ± {std:,.0f}"
    return text


def table1(report: Report, precision: str) -> Table:
    """Table 1 of the PyTorch paper: training throughput, rows = frameworks, fastest marked."""
    models = list(PYTORCH_TABLE1)
    units = ", ".join(f"{MODELS[m].title} {MODELS[m].unit}/s" for m in models)
    table = Table(
        title=f"Table 1: training throughput, {precision}, {report.machine}",
        headers=["framework"] + [MODELS[m].title for m in models],
        caption=f"Mean ± std over timing windows ({units}); {report.device}. "
                f"Same layout as Table 1 of the PyTorch paper (arXiv:1912.01703).",
        anchor=f"table1-{precision}")
    outcomes = {(i, m): report.outcome(row, THROUGHPUT, m, precision)
                for i, row in enumerate(report.rows) for m in models}
    fastest = {m: max((o.value.mean for (_, mm), o in outcomes.items()
                       if mm == m and o.value), default=None) for m in models}
    for i, row in enumerate(report.rows):
        cells = [Cell(row.label)]
        for m in models:
            o = outcomes[(i, m)]
            if o.value:
                cells.append(Cell(format_value(o.value.mean, o.value.std),
                                  best=o.value.mean == fastest[m],
                                  link=report.graph_link(THROUGHPUT, row.target, m, precision)))
            else:
                cells.append(_outcome_cell(table, row, o, m))
        table.rows.append(cells)
    table.summary = within_lines(report.rows, outcomes, fastest, models)
    if not any(o.value for o in outcomes.values()):
        table.summary.append("No throughput measured at this precision.")
    return table


SPREAD_TARGET = 0.01  # the coefficient of variation each throughput figure should stay within


def spread_table(report: Report) -> Table:
    """Per framework and precision: how many throughput figures stay within the spread target,
    and which do not."""
    table = Table(
        title=f"Spread of the throughput figures, {report.machine}",
        headers=["framework", "precision", "figures", f"CV ≤ {SPREAD_TARGET:.0%}", "above it (CV)"],
        caption="Coefficient of variation (std / mean over the timing windows) of each training "
                "throughput figure, all models.",
        anchor="spread")
    for row in report.rows:
        for precision in report.precisions:
            values = {m: o.value for m in MODELS
                      if (o := report.outcome(row, THROUGHPUT, m, precision)).value}
            if not values:
                continue
            above = {m: v.std / v.mean for m, v in values.items()
                     if v.std is not None and v.std > SPREAD_TARGET * v.mean}
            table.rows.append([
                Cell(row.label), Cell(precision), Cell(str(len(values))),
                Cell(str(len(values) - len(above))),
                Cell(", ".join(f"{MODELS[m].title} {cv:.1%}" for m, cv in above.items()) or "–")])
    return table


def within_lines(rows: List[Row], outcomes: Dict[Tuple[int, str], Outcome],
                 fastest: Dict[str, Optional[float]], models: List[str]) -> List[str]:
    """Each measured row's distance from the fastest: the paper's "within 17%" statement."""
    lines = []
    for i, row in enumerate(rows):
        measured = [(m, outcomes[(i, m)].value) for m in models if outcomes[(i, m)].value]
        if not measured:
            continue
        distances = {m: published.distance_from_fastest(v.mean, fastest[m]) for m, v in measured}
        worst = max(distances, key=distances.get)
        scope = f"every model it ran ({len(measured)} of {len(models)})"
        if distances[worst] <= 0:
            lines.append(f"{row.label}: the fastest on {scope}.")
        else:
            lines.append(f"{row.label}: within {distances[worst]:.0f}% of the fastest on "
                         f"{scope}; furthest behind on {MODELS[worst].title}.")
    return lines


def forward_backward_table(report: Report, precision: str) -> Table:
    models = list(CONVNET_BENCHMARKS)
    table = Table(
        title=f"Forward-backward time per batch (ms), {precision}, {report.machine}",
        headers=["framework"] + [f"{MODELS[m].title}" for m in models],
        caption="One forward and backward pass, no update, mean over the timed steps (the "
                "convnet-benchmarks figure the MXNet paper uses); batch per cell as measured.",
        anchor=f"fwbw-{precision}")
    _fill_min_table(report, table, FORWARD_BACKWARD, models, precision,
                    lambda o: f"{1e3 * o.value.mean:,.1f} ms @{o.record.get('batch') if o.record else '?'}")
    return table


def memory_table(report: Report, precision: str) -> Table:
    models = list(CONVNET_BENCHMARKS)
    table = Table(
        title=f"Peak memory, forward-only / training step (MiB), {precision}, {report.machine}",
        headers=["framework"] + [MODELS[m].title for m in models],
        caption="The MXNet paper's memory figure: forward-only (prediction) / training "
                "(forward, backward and update). GPU: the framework allocator's peak, forward "
                "read before training in one process; CPU: each phase in its own process, peak "
                "RSS above the baseline after import (so it includes weights, inputs and the "
                "allocator's slack).",
        anchor=f"memory-{precision}")
    for row in report.rows:
        cells = [Cell(row.label)]
        for m in models:
            fwd = report.outcome(row, PEAK_MEMORY_FORWARD, m, precision)
            train = report.outcome(row, PEAK_MEMORY_TRAIN, m, precision)
            if fwd.value and train.value:
                cells.append(Cell(f"{fwd.value.mean / MIB:,.0f} / {train.value.mean / MIB:,.0f}",
                                  link=report.graph_link(PEAK_MEMORY_TRAIN, row.target, m, precision)))
            else:
                cells.append(_outcome_cell(table, row, train if not train.value else fwd, m))
        table.rows.append(cells)
    return table


def _fill_min_table(report: Report, table: Table, benchmark: str, models: List[str],
                    precision: str, text) -> None:
    """Rows of one lower-is-better figure; the smallest of each column marked."""
    outcomes = {(i, m): report.outcome(row, benchmark, m, precision)
                for i, row in enumerate(report.rows) for m in models}
    best = {m: min((o.value.mean for (_, mm), o in outcomes.items() if mm == m and o.value),
                   default=None) for m in models}
    for i, row in enumerate(report.rows):
        cells = [Cell(row.label)]
        for m in models:
            o = outcomes[(i, m)]
            if o.value:
                cells.append(Cell(text(o), best=o.value.mean == best[m],
                                  link=report.graph_link(benchmark, row.target, m, precision)))
            else:
                cells.append(_outcome_cell(table, row, o, m))
        table.rows.append(cells)


def tflops_table(report: Report, precision: str) -> Table:
    models = list(MODELS)
    peak_note = None
    table = Table(
        title=f"Achieved model TFLOP/s and fraction of peak, {precision}, {report.machine}",
        headers=["framework"] + [MODELS[m].title for m in models],
        caption="Model FLOPs of one training step (forward + backward, as counted by the "
                "backend) / mean step time. Fraction of the device's measured dense-matmul "
                "ceiling in parentheses.",
        anchor=f"tflops-{precision}")
    for row in report.rows:
        cells = [Cell(row.label)]
        for m in models:
            o = report.outcome(row, THROUGHPUT, m, precision)
            record = o.record or {}
            if not o.value:
                cells.append(_outcome_cell(table, row, o, m))
            elif not record.get("achieved_tflops"):
                why = record.get("flops_note") or "the backend does not count the FLOPs"
                cells.append(Cell("FLOPs unknown", muted=True,
                                  note=table.footnote(f"{row.label}, {MODELS[m].title}: {why}")))
            else:
                achieved = record["achieved_tflops"]
                peak = published.device_peak(record.get("device_name"), precision) \
                    if record.get("device") == "cuda" else None
                text = f"{achieved:.3g}"
                if peak:
                    text += f" ({100 * achieved / peak.tflops:.1f}%)"
                    peak_note = (f"Peak {precision}: {peak.tflops:g} TFLOP/s, {peak.source}.")
                cells.append(Cell(text))
        table.rows.append(cells)
    if peak_note:
        table.summary.append(peak_note)
    elif report.device.startswith("CPU"):
        table.summary.append("No fraction of peak: no peak figure is known for this CPU.")
    else:
        table.summary.append(f"No fraction of peak: no measured {precision} ceiling is known for "
                             f"{report.device} (fwkernels/published.py DEVICE_PEAKS).")
    return table


def epoch_table(report: Report, precision: str) -> Table:
    models = [m for m in MODELS if MODELS[m].unit == "images"]
    table = Table(
        title=f"Derived: one ILSVRC12 epoch (hours), {precision}, {report.machine}",
        headers=["framework"] + [MODELS[m].title for m in models],
        caption=f"DERIVED, not measured: {published.ILSVRC12_TRAIN_IMAGES:,} images / measured "
                "synthetic-data throughput; excludes data loading and augmentation.",
        anchor=f"epoch-{precision}")
    for row in report.rows:
        cells = [Cell(row.label)]
        for m in models:
            o = report.outcome(row, THROUGHPUT, m, precision)
            if o.value:
                hours = published.ILSVRC12_TRAIN_IMAGES / o.value.mean / 3600
                cells.append(Cell(f"{hours:,.3g} h"))
            else:
                cells.append(_outcome_cell(table, row, o, m))
        table.rows.append(cells)
    return table


# ---------------------------------------------------------------------------------------------
# Published figures as ratios


def reference_row(report: Report, framework: str = "torch") -> Optional[Row]:
    """The newest version of a framework in its default mode: the denominator of ratios."""
    for row in report.rows:
        if row.framework == framework and row.target == framework and row.run is not None:
            return row
    return None


def _ratio_text(paper: Optional[float], ours: Optional[float]) -> str:
    left = f"{paper:.2f}" if paper is not None else "–"
    right = f"{ours:.2f}" if ours is not None else "–"
    return f"{left} | {right}"


def table1_ratios(report: Report) -> Table:
    models = list(PYTORCH_TABLE1)
    ref = reference_row(report)
    table = Table(
        title="Table 1 as ratios to PyTorch: paper | ours (fp32)",
        headers=["framework"] + [MODELS[m].title for m in models],
        caption=f"Throughput / PyTorch's throughput on the same machine. Paper: "
                f"{published.PYTORCH_TABLE1_SOURCE}. Ours: {report.machine}, fp32, against "
                f"{ref.label if ref else 'PyTorch (not measured)'}. – = not available.",
        anchor="ratios-table1")
    ours_by_framework = _best_ours(report, models, "fp32")
    for framework in published.PYTORCH_TABLE1_FRAMEWORKS:
        paper = published.PYTORCH_TABLE1[framework]
        cells = [Cell(FRAMEWORKS[framework].title)]
        for m in models:
            paper_ratio = paper[m].mean / published.PYTORCH_TABLE1["torch"][m].mean \
                if m in paper else None
            ours = ours_by_framework.get((framework, m))
            ref_value = ours_by_framework.get(("torch", m))
            ours_ratio = ours / ref_value if ours and ref_value else None
            cells.append(Cell(_ratio_text(paper_ratio, ours_ratio)))
        table.rows.append(cells)
    table.summary = table1_conclusions(report, models, ours_by_framework)
    return table


def _best_ours(report: Report, models: List[str], precision: str,
               benchmark: str = THROUGHPUT) -> Dict[Tuple[str, str], float]:
    """(framework, model) -> our figure from its newest version in its default mode."""
    out: Dict[Tuple[str, str], float] = {}
    for row in report.rows:
        if row.target != row.framework or row.run is None:
            continue
        for m in models:
            o = report.outcome(row, benchmark, m, precision)
            if o.value and (row.framework, m) not in out:
                out[(row.framework, m)] = o.value.mean
    return out


def table1_conclusions(report: Report, models: List[str],
                       ours: Dict[Tuple[str, str], float]) -> List[str]:
    """Which of the paper's statements still hold on this machine."""
    lines = []
    paper_distance = _paper_pytorch_distance(models)
    contested = [m for m in models if ("torch", m) in ours
                 and sum(1 for (f, mm) in ours if mm == m) >= 2]
    ours_distance = [published.distance_from_fastest(
        ours[("torch", m)], max(v for (f, mm), v in ours.items() if mm == m)) for m in contested]
    claim = f"Paper: \"{published.PYTORCH_TABLE1_CLAIM}\" (computed from its table: {paper_distance:.0f}%)."
    lines.append(claim)
    if ours_distance:
        worst = max(ours_distance)
        holds = worst <= published.PYTORCH_TABLE1_CLAIM_PERCENT + 0.5
        lines.append(f"Here: PyTorch is within {max(worst, 0):.0f}% of the fastest framework "
                     f"on the {len(ours_distance)} of {len(models)} models where at least two "
                     f"frameworks ran: the claim {'holds' if holds else 'does not hold'} here.")
    else:
        lines.append("Here: no model ran at fp32 in PyTorch and another framework, so the claim "
                     "cannot be checked.")
    for m in models:
        paper_fastest = max(published.PYTORCH_TABLE1_FRAMEWORKS,
                            key=lambda f: published.PYTORCH_TABLE1[f][m].mean
                            if m in published.PYTORCH_TABLE1[f] else -1)
        both = [f for f in published.PYTORCH_TABLE1_FRAMEWORKS
                if m in published.PYTORCH_TABLE1[f] and (f, m) in ours]
        if len(both) >= 2:
            ours_fastest = max(both, key=lambda f: ours[(f, m)])
            paper_among = max(both, key=lambda f: published.PYTORCH_TABLE1[f][m].mean)
            verdict = "same" if ours_fastest == paper_among else "changed"
            lines.append(f"{MODELS[m].title}: fastest of {', '.join(FRAMEWORKS[f].title for f in both)} "
                         f"was {FRAMEWORKS[paper_among].title} in the paper, is "
                         f"{FRAMEWORKS[ours_fastest].title} here ({verdict}).")
        else:
            lines.append(f"{MODELS[m].title}: paper's fastest {FRAMEWORKS[paper_fastest].title}; "
                         f"fewer than two of the paper's frameworks measured here, no comparison.")
    return lines


def _paper_pytorch_distance(models: List[str]) -> float:
    table = published.PYTORCH_TABLE1
    return max(published.distance_from_fastest(
        table["torch"][m].mean, max(table[f][m].mean for f in table if m in table[f]))
        for m in models)


def convnet_ratios(report: Report) -> Table:
    """convnet-benchmarks forward-backward times as ratios to TensorFlow (its only framework
    column that we also run; the table has no PyTorch column)."""
    models = list(CONVNET_BENCHMARKS)
    ours = _best_ours(report, models, "fp32", FORWARD_BACKWARD)
    table = Table(
        title="convnet-benchmarks forward-backward time as ratios to TensorFlow: paper | ours (fp32)",
        headers=["library"] + [MODELS[m].title for m in models],
        caption=f"Time per batch / TensorFlow's (lower is faster). Paper: "
                f"{published.CONVNET_BENCHMARKS_SOURCE}. The table has no PyTorch column, so the "
                f"denominator is TensorFlow. Ours: {report.machine}, fp32; batch sizes differ "
                f"from the paper's on CPU (see the forward-backward table).",
        anchor="ratios-convnet")
    paper_tf = published.CONVNET_BENCHMARKS_MS["TensorFlow"]
    for column, values in published.CONVNET_BENCHMARKS_MS.items():
        framework = published.CONVNET_BENCHMARKS_FRAMEWORK.get(column)
        cells = [Cell(column)]
        for m in models:
            paper_ratio = values[m] / paper_tf[m] if values.get(m) else None
            mine = ours.get((framework, m)) if framework else None
            ref = ours.get(("tensorflow", m))
            cells.append(Cell(_ratio_text(paper_ratio, mine / ref if mine and ref else None)))
        table.rows.append(cells)
    for framework in FRAMEWORKS:
        if framework in published.CONVNET_BENCHMARKS_FRAMEWORK.values():
            continue
        cells = [Cell(FRAMEWORKS[framework].title)]
        for m in models:
            mine, ref = ours.get((framework, m)), ours.get(("tensorflow", m))
            cells.append(Cell(_ratio_text(None, mine / ref if mine and ref else None)))
        if any(c.text != "– | –" for c in cells[1:]):
            table.rows.append(cells)
    table.summary = [f"MXNet paper: {published.MXNET_PAPER_CLAIMS[0]}"]
    return table


def modern_ratios(report: Report) -> Table:
    ours = _best_ours(report, ["resnet50"], "tf32")
    ours_bf16 = _best_ours(report, ["resnet50"], "bf16")
    table = Table(
        title="ResNet-50 on one A100 (DeepLearningExamples) as ratios to PyTorch: published | ours",
        headers=["framework", "TF32 | ours tf32", "AMP | ours bf16"],
        caption=f"{published.MODERN_ANCHORS_SOURCE}. Ours: {report.machine}, same batch for "
                f"every framework; our bf16 is not their fp16 AMP.",
        anchor="ratios-modern")
    for framework in ("torch", "mxnet", "paddle"):
        cells = [Cell(FRAMEWORKS[framework].title)]
        for paper_key, mine in (("tf32", ours), ("amp", ours_bf16)):
            paper = published.MODERN_RESNET50[paper_key]
            value, ref = mine.get((framework, "resnet50")), mine.get(("torch", "resnet50"))
            cells.append(Cell(_ratio_text(paper[framework] / paper["torch"],
                                          value / ref if value and ref else None)))
        table.rows.append(cells)
    return table


# ---------------------------------------------------------------------------------------------
# Output


def header_lines(report: Report) -> List[str]:
    return [f"fwkernels report: machine {report.machine}, commit {report.commit}",
            f"device: {report.device}"] + [f"environment {line}" for line in report.environment]


def render_report_text(report: Report) -> str:
    parts = ["\n".join(header_lines(report))]
    for title, tables in report.sections:
        parts.append(f"## {title}")
        parts += [render_text(t) for t in tables if not t.is_empty()]
    return "\n\n".join(parts) + "\n"


def render_report_markdown(report: Report) -> str:
    parts = [f"# fwkernels report: {report.machine} at {report.commit}",
             "\n".join(f"- {line}" for line in header_lines(report)[1:])]
    for title, tables in report.sections:
        parts.append(f"## {title}")
        parts += [render_markdown(t) for t in tables if not t.is_empty()]
    return "\n\n".join(parts) + "\n"


def default_html_dir() -> str:
    """asv's html_dir from asv.conf.json in the current directory, else .asv/html."""
    try:
        with open("asv.conf.json") as f:
            text = "\n".join(line for line in f if not line.lstrip().startswith("//"))
        return json.loads(text).get("html_dir", ".asv/html")
    except (OSError, ValueError):
        return ".asv/html"


def cmd_report(args: argparse.Namespace) -> int:
    try:
        runs = load_runs(args.results, args.records)
        if not runs:
            raise ResultsError(f"no asv results under {args.results!r}: run the main job "
                               f"(scripts/bench) first")
        wanted = [args.machine] if args.machine else machines(runs)
        html_dir = None if args.no_html else (args.html_dir or default_html_dir())
        links = bool(html_dir) and site.is_asv_site(html_dir)
        reports = [build_report(runs, m, args.commit, links)
                   for m in wanted]
    except ResultsError as error:
        print(f"fwkernels report: error: {error}", file=sys.stderr)
        return 2
    render = render_report_markdown if args.format == "markdown" else render_report_text
    print("\n".join(render(r) for r in reports))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(render_report_markdown(r) for r in reports))
        print(f"Markdown: {args.markdown}")
    if html_dir:
        try:
            from fwkernels import html_report
        except ImportError as error:
            print(f"fwkernels report: error: the HTML report needs matplotlib and jinja2 "
                  f"(pip install 'fwkernels[report]'): {error}", file=sys.stderr)
            return 1
        # Every machine gets its page (its latest commit, or --commit for --machine).
        by_machine = {m: build_report(runs, m, asv_links=links) for m in machines(runs)
                      if m not in wanted}
        by_machine.update({r.machine: r for r in reports})
        pages = html_report.write_site(list(by_machine.values()), html_dir)
        print(f"HTML: {pages[0]} ({len(pages)} pages; see docs/reports.md to view offline)")
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="the papers' tables from asv results, terminal/Markdown/HTML",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default="results", help="asv results directory (default: results)")
    p.add_argument("--records", help="fwkernels records directory (default: records beside --results)")
    p.add_argument("--machine", help="asv machine name (default: every machine with results)")
    p.add_argument("--commit", help="commit hash prefix, or a comma list of them (default: "
                                    "each machine's latest)")
    p.add_argument("--format", choices=("terminal", "markdown"), default="terminal",
                   help="what to print (default: terminal)")
    p.add_argument("--markdown", metavar="FILE", help="also write the Markdown report to FILE")
    p.add_argument("--html-dir", help="site folder for the HTML pages (default: asv's html_dir)")
    p.add_argument("--no-html", action="store_true", help="print only, write no HTML")
    p.set_defaults(func=cmd_report)

    from fwkernels import compare  # the report's sibling command, registered through this hook

    compare.add_parser(sub)
