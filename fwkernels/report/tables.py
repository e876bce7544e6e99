"""The report's tables: Table 1 of the PyTorch paper, the spread, the MXNet paper's
forward-backward time and memory, achieved TFLOP/s and the derived epoch time, and the
published figures as ratios beside ours."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from fwkernels.frameworks import FRAMEWORKS
from fwkernels.models import CONVNET_BENCHMARKS, MODELS, PYTORCH_TABLE1
from fwkernels.report import published
from fwkernels.report.model import Outcome, Report, Row, select_report
from fwkernels.report.render import format_value
from fwkernels.report.results import (FORWARD_BACKWARD, PEAK_MEMORY_FORWARD, PEAK_MEMORY_TRAIN,
                                      THROUGHPUT, Run)
from fwkernels.report.table import Cell, Table
from fwkernels.request import split_target

MIB = 2 ** 20


def build_report(runs: List[Run], machine: str, commit: Optional[str] = None,
                 asv_links: bool = False, run_to_run: float = 0.0) -> Report:
    """The report of one machine at one commit with its sections; asv_links: cells link to
    asv's graphs (the report's pages live one folder below asv's published site); run_to_run:
    the machine's run-to-run spread (fwkernels.report.noise), 0 where not measured."""
    report = select_report(runs, machine, commit, asv_links)
    report.run_to_run = run_to_run
    precisions = report.precisions
    for precision in precisions:
        report.sections.append((f"Training throughput ({precision})",
                                [table1(report, precision), best_mode_table(report, precision)]))
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

FORWARD_BACKWARD_CAPTION = (
    "One forward and backward pass, no update, mean over the timed steps (the convnet-benchmarks "
    "figure the MXNet paper uses); batch per cell as measured.")

MEMORY_CAPTION = (
    "The MXNet paper's memory figure: forward-only (prediction) / training (forward, backward and "
    "update). GPU: the framework allocator's peak, forward read before training in one process; "
    "CPU: each phase in its own process, peak RSS above the baseline after import (so it "
    "includes weights, inputs and the allocator's slack).")

TFLOPS_CAPTION = (
    "Model FLOPs of one training step (forward + backward, as counted by the backend) / mean step "
    "time. Fraction of the device's measured dense-matmul ceiling in parentheses.")


def model_table(models: List[str], title: str, caption: str, anchor: str) -> Table:
    """A table with a column per model after the framework's."""
    return Table(title=title, headers=["framework"] + [MODELS[m].title for m in models],
                 caption=caption, anchor=anchor)


def fill(table: Table, report: Report, models: List[str],
         cell: Callable[[Row, str], Cell]) -> None:
    """A row per framework row of the report: its label, then ``cell(row, model)`` per model."""
    for row in report.rows:
        table.rows.append([Cell(row.label)] + [cell(row, m) for m in models])


def _outcome_cell(table: Table, row: Row, outcome: Outcome, model: str) -> Cell:
    note = table.footnote(f"{row.label} × {MODELS[model].title}: {outcome.reason}") \
        if outcome.status not in ("not installed", "not run") else None
    return Cell(outcome.short, note=note, muted=True)


def _units(models: List[str]) -> str:
    return ", ".join(f"{MODELS[m].title} {MODELS[m].unit}/s" for m in models)


def default_rows(report: Report) -> List[Row]:
    """Each framework version's row in its default mode (docs/fairness.md)."""
    return [row for row in report.rows if row.target == row.framework]


def best_outcomes(report: Report, row: Row, model: str, precision: str,
                  benchmark: str = THROUGHPUT) -> Tuple[Row, Outcome]:
    """The fastest figure of ``row``'s framework version over all its modes, with the row that
    measured it; the default row's outcome where no mode has a figure."""
    same = [r for r in report.rows if (r.framework, r.version, r.suffix)
            == (row.framework, row.version, row.suffix)]
    measured = [(r, o) for r in same
                if (o := report.outcome(r, benchmark, model, precision)).value]
    if not measured:
        return row, report.outcome(row, benchmark, model, precision)
    return max(measured, key=lambda pair: pair[1].value.mean)


def _throughput_table(report: Report, precision: str, table: Table, models: List[str],
                      best_mode: bool) -> Table:
    rows = default_rows(report)
    chosen = {(i, m): best_outcomes(report, row, m, precision) if best_mode
              else (row, report.outcome(row, THROUGHPUT, m, precision))
              for i, row in enumerate(rows) for m in models}
    outcomes = {key: outcome for key, (_, outcome) in chosen.items()}
    fastest = {m: max((o.value.mean for (_, mm), o in outcomes.items()
                       if mm == m and o.value), default=None) for m in models}
    for i, row in enumerate(rows):
        cells = [Cell(row.label)]
        for m in models:
            measured_by, o = chosen[(i, m)]
            if o.value:
                mode = split_target(measured_by.target)[1]
                text = format_value(o.value.mean, o.value.std)
                cells.append(Cell(f"{text} [{mode}]" if best_mode else text,
                                  best=o.value.mean == fastest[m],
                                  link=report.graph_link(THROUGHPUT, measured_by.target, m,
                                                         precision)))
            else:
                cells.append(_outcome_cell(table, row, o, m))
        table.rows.append(cells)
    table.summary = within_lines(rows, outcomes, fastest, models)
    if not any(o.value for o in outcomes.values()):
        table.summary.append("No throughput measured at this precision.")
    return table


def table1(report: Report, precision: str) -> Table:
    """Table 1 of the PyTorch paper: training throughput of each framework's default mode,
    rows = frameworks, fastest marked."""
    models = list(PYTORCH_TABLE1)
    table = model_table(models, f"Table 1: training throughput, {precision}, {report.machine}",
                        f"Mean ± std over timing windows ({_units(models)}); {report.device}. "
                        "Each framework in its default mode (docs/fairness.md). Same layout as "
                        "Table 1 of the PyTorch paper (arXiv:1912.01703).",
                        f"table1-{precision}")
    return _throughput_table(report, precision, table, models, best_mode=False)


def best_mode_table(report: Report, precision: str) -> Table:
    """Table 1 with each framework's fastest measured mode per model, the mode in the cell."""
    models = list(PYTORCH_TABLE1)
    table = model_table(models, f"Best measured mode: training throughput, {precision}, "
                        f"{report.machine}",
                        f"As Table 1 ({_units(models)}; {report.device}), each cell the fastest "
                        "of the framework's measured modes, named in brackets; a mode that was "
                        "not run cannot be the best.", f"best-mode-{precision}")
    return _throughput_table(report, precision, table, models, best_mode=True)


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
    title = f"Forward-backward time per batch (ms), {precision}, {report.machine}"
    table = model_table(models, title, FORWARD_BACKWARD_CAPTION, f"fwbw-{precision}")
    _fill_min_table(report, table, FORWARD_BACKWARD, models, precision,
                    lambda o: f"{1e3 * o.value.mean:,.1f} ms @{o.record.get('batch') if o.record else '?'}")
    return table


def memory_table(report: Report, precision: str) -> Table:
    models = list(CONVNET_BENCHMARKS)
    title = f"Peak memory, forward-only / training step (MiB), {precision}, {report.machine}"
    table = model_table(models, title, MEMORY_CAPTION, f"memory-{precision}")

    def cell(row: Row, m: str) -> Cell:
        fwd = report.outcome(row, PEAK_MEMORY_FORWARD, m, precision)
        train = report.outcome(row, PEAK_MEMORY_TRAIN, m, precision)
        if fwd.value and train.value:
            return Cell(f"{fwd.value.mean / MIB:,.0f} / {train.value.mean / MIB:,.0f}",
                        link=report.graph_link(PEAK_MEMORY_TRAIN, row.target, m, precision))
        return _outcome_cell(table, row, train if not train.value else fwd, m)

    fill(table, report, models, cell)
    return table


def _fill_min_table(report: Report, table: Table, benchmark: str, models: List[str],
                    precision: str, text) -> None:
    """Rows of one lower-is-better figure; the smallest of each column marked."""
    best = {m: min((o.value.mean for row in report.rows
                    if (o := report.outcome(row, benchmark, m, precision)).value), default=None)
            for m in models}

    def cell(row: Row, m: str) -> Cell:
        o = report.outcome(row, benchmark, m, precision)
        if not o.value:
            return _outcome_cell(table, row, o, m)
        return Cell(text(o), best=o.value.mean == best[m],
                    link=report.graph_link(benchmark, row.target, m, precision))

    fill(table, report, models, cell)


def tflops_table(report: Report, precision: str) -> Table:
    models = list(MODELS)
    title = f"Achieved model TFLOP/s and fraction of peak, {precision}, {report.machine}"
    table = model_table(models, title, TFLOPS_CAPTION, f"tflops-{precision}")
    peak_notes: List[str] = []

    def cell(row: Row, m: str) -> Cell:
        o = report.outcome(row, THROUGHPUT, m, precision)
        record = o.record or {}
        if not o.value:
            return _outcome_cell(table, row, o, m)
        if not record.get("achieved_tflops"):
            why = record.get("flops_note") or "the backend does not count the FLOPs"
            return Cell("FLOPs unknown", muted=True,
                        note=table.footnote(f"{row.label}, {MODELS[m].title}: {why}"))
        achieved = record["achieved_tflops"]
        peak = published.device_peak(record.get("device_name"), precision) \
            if record.get("device") == "cuda" else None
        if not peak:
            return Cell(f"{achieved:.3g}")
        peak_notes.append(f"Peak {precision}: {peak.tflops:g} TFLOP/s, {peak.source}.")
        return Cell(f"{achieved:.3g} ({100 * achieved / peak.tflops:.1f}%)")

    fill(table, report, models, cell)
    peak_note = peak_notes[-1] if peak_notes else None
    if peak_note:
        table.summary.append(peak_note)
    elif report.device.startswith("CPU"):
        table.summary.append("No fraction of peak: no peak figure is known for this CPU.")
    else:
        table.summary.append(f"No fraction of peak: no measured {precision} ceiling is known for "
                             f"{report.device} (fwkernels/report/published.py DEVICE_PEAKS).")
    return table


def epoch_table(report: Report, precision: str) -> Table:
    models = [m for m in MODELS if MODELS[m].unit == "images"]
    table = model_table(models, f"Derived: one ILSVRC12 epoch (hours), {precision}, {report.machine}",
                        f"DERIVED, not measured: {published.ILSVRC12_TRAIN_IMAGES:,} images / measured "
                "synthetic-data throughput; excludes data loading and augmentation.",
                        f"epoch-{precision}")
    def cell(row: Row, m: str) -> Cell:
        o = report.outcome(row, THROUGHPUT, m, precision)
        if not o.value:
            return _outcome_cell(table, row, o, m)
        return Cell(f"{published.ILSVRC12_TRAIN_IMAGES / o.value.mean / 3600:,.3g} h")

    fill(table, report, models, cell)
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
    table = model_table(models, "Table 1 as ratios to PyTorch: paper | ours (fp32)",
                        f"Throughput / PyTorch's throughput on the same machine. Paper: "
                f"{published.PYTORCH_TABLE1_SOURCE}. Ours: {report.machine}, fp32, against "
                f"{ref.label if ref else 'PyTorch (not measured)'}. – = not available.",
                        "ratios-table1")
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
    table.summary = table1_conclusions(report, models, ours_by_framework,
                                       _best_ours(report, models, "fp32", best_mode=True))
    return table


def _best_ours(report: Report, models: List[str], precision: str, benchmark: str = THROUGHPUT,
               best_mode: bool = False) -> Dict[Tuple[str, str], float]:
    """(framework, model) -> our figure from its newest version in its default mode, or in
    its fastest measured mode."""
    out: Dict[Tuple[str, str], float] = {}
    for row in default_rows(report):
        if row.run is None:
            continue
        for m in models:
            o = best_outcomes(report, row, m, precision, benchmark)[1] if best_mode \
                else report.outcome(row, benchmark, m, precision)
            if o.value and (row.framework, m) not in out:
                out[(row.framework, m)] = o.value.mean
    return out


def _claim_line(models: List[str], ours: Dict[Tuple[str, str], float], which: str) -> str:
    """The paper's "within 17%" checked on ``ours``, the figures of ``which`` modes and
    frameworks."""
    contested = [m for m in models if ("torch", m) in ours
                 and sum(1 for (f, mm) in ours if mm == m) >= 2]
    distances = {m: published.distance_from_fastest(
        ours[("torch", m)], max(v for (f, mm), v in ours.items() if mm == m)) for m in contested}
    if not distances:
        return (f"Here, {which}: no model ran at fp32 in PyTorch and another of these "
                "frameworks, so the claim cannot be checked.")
    worst = max(distances.values())
    holds = worst <= published.PYTORCH_TABLE1_CLAIM_PERCENT + 0.5
    furthest = MODELS[max(distances, key=distances.get)].title
    return (f"Here, {which}: PyTorch is within {max(worst, 0):.0f}% of the fastest framework on "
            f"the {len(distances)} of {len(models)} models where at least two frameworks ran "
            f"(furthest behind on {furthest}): the claim {'holds' if holds else 'does not hold'} "
            "here.")


def _paper_frameworks(ours: Dict[Tuple[str, str], float]) -> Dict[Tuple[str, str], float]:
    return {k: v for k, v in ours.items() if k[0] in published.PYTORCH_TABLE1_FRAMEWORKS}


def table1_conclusions(report: Report, models: List[str], ours: Dict[Tuple[str, str], float],
                       ours_best: Dict[Tuple[str, str], float]) -> List[str]:
    """Which of the paper's statements still hold on this machine: the "within" claim on the
    default modes (``ours``) and on the best measured modes (``ours_best``); the fastest
    framework per model on the default modes."""
    paper_distance = _paper_pytorch_distance(models)
    paper_six = f"the paper's {len(published.PYTORCH_TABLE1_FRAMEWORKS)} frameworks"
    peers = sorted({FRAMEWORKS[f].title for f, _ in ours
                    if f not in published.PYTORCH_TABLE1_FRAMEWORKS})
    lines = [f"Paper: \"{published.PYTORCH_TABLE1_CLAIM}\" (computed from its table: "
             f"{paper_distance:.0f}%)."]
    for figures, which in ((ours, "default modes (Table 1)"), (ours_best, "best measured modes")):
        lines.append(_claim_line(models, _paper_frameworks(figures), f"{which}, {paper_six}"))
        if peers:
            lines.append(_claim_line(models, figures, f"{which}, with today's peers too "
                                                      f"({', '.join(peers)})"))
    lines.append(_noise_line(report))
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
            lines.append(f"{MODELS[m].title}, default modes: fastest of "
                         f"{', '.join(FRAMEWORKS[f].title for f in both)} "
                         f"was {FRAMEWORKS[paper_among].title} in the paper, is "
                         f"{FRAMEWORKS[ours_fastest].title} here ({verdict}).")
        else:
            lines.append(f"{MODELS[m].title}: paper's fastest {FRAMEWORKS[paper_fastest].title}; "
                         f"fewer than two of the paper's frameworks measured here, no comparison.")
    return lines


def _noise_line(report: Report) -> str:
    machine, spread = report.machine, report.run_to_run
    if not spread:
        return (f"The run-to-run spread of {machine} is not measured (noise.toml): a distance "
                "is as certain as one run of each figure.")
    return (f"Separate runs of one figure on {machine} land up to {100 * spread:.0f}% apart "
            "(noise.toml): a distance or a change of fastest framework smaller than that is not "
            "a difference.")


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
