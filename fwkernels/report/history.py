"""``fwkernels history FRAMEWORK``: training throughput per release of one framework on one
machine, each release against the one before it, as a Markdown page.

A change is called beyond the noise where the two means differ by more than the larger of the
sum of their timing windows' standard deviations and the machine's run-to-run spread
(noise.toml; the rule of ``fwkernels compare``). Each row names the Python its records ran on,
and a change across two Pythons says so.
"""
from __future__ import annotations

from typing import Callable, List, Optional

from fwkernels.frameworks import get_framework
from fwkernels.models import MODELS
from fwkernels.record import Record
from fwkernels.report import noise
from fwkernels.report.render import format_value
from fwkernels.report.results import THROUGHPUT, Run, Value
from fwkernels.report.table import Cell, Table


def releases_of(runs: List[Run], machine: str, framework: str) -> List[Run]:
    """The runs of the framework's releases on the machine in version order (a patch of an older
    line can come out the day of a newer release, or after it)."""
    chosen = [r for r in runs if r.machine == machine and r.framework == framework]
    return sorted(chosen, key=lambda r: (_version_key(r.release), r.date))


def _version_key(release: Optional[str]) -> tuple:
    version = (release or "").rpartition("-")[2]
    return tuple(int(part) if part.isdigit() else -1 for part in version.split("."))


def change(before: Optional[Value], after: Optional[Value], run_to_run: float = 0.0,
           also: str = "") -> str:
    """The change in percent and whether it is beyond the noise; ``also`` joins the verdict."""
    if before is None or after is None or not before.mean:
        return "–"
    ratio = after.mean / before.mean - 1
    real = noise.beyond(before.mean, before.std or 0.0, after.mean, after.std or 0.0, run_to_run)
    judged = "beyond the noise" if real else "within the noise"
    return f"{100 * ratio:+.1f}% ({judged}{'; ' + also if also else ''})"


def history_table(runs: List[Run], machine: str, framework: str, precision: str,
                  mode: str = "", run_to_run: float = 0.0) -> Table:
    """One row per release: throughput per model (mean ± std over the windows) and the change
    from the release above it."""
    target = framework if not mode else f"{framework}:{mode}"
    chosen = releases_of(runs, machine, framework)
    # a history needs two releases: a model measured for one release of several has no column
    models = [m for m in MODELS if sum((THROUGHPUT, target, m, precision) in r.values
                                       or r.record(target, m, precision) is not None
                                       for r in chosen) >= min(2, len(chosen))]
    headers = ["release", "date", "Python"]
    for m in models:
        headers += [f"{MODELS[m].title} {MODELS[m].unit}/s", "change"]
    headers.append("measured by fwkernels")
    title = get_framework(framework).title + (f" [{mode}]" if mode else "")
    each_run = [[run.record(target, m, precision) for m in models] for run in chosen]
    pythons = [_each_once(records, lambda r: r.get("python") or "?") for records in each_run]
    caption = ("Mean ± std over the timing windows; change from the release above (beyond the "
               "noise: the means differ by more than the larger of the sum of the two standard "
               "deviations and the run-to-run spread, "
               + (f"{100 * run_to_run:.1f}% on this machine (noise.toml))."
                  if run_to_run else "not measured on this machine (noise.toml))."))
    if len(set(pythons) - {"–"}) > 1:
        caption += (" The releases ran on different Pythons (a release's wheels need the Python "
                    "they were built for): a change across two of them is the Python's too.")
    table = Table(title=f"{title}: training throughput per release, {precision}, {machine}",
                  caption=caption, headers=headers)
    previous: dict = {}
    for run, records, python in zip(chosen, each_run, pythons):
        row = [Cell(run.release.rpartition("-")[2] if run.release else run.short_commit),
               Cell(_date(run)), Cell(python)]
        for m in models:
            value = run.values.get((THROUGHPUT, target, m, precision))
            found = run.record(target, m, precision)
            if value is None:
                failed = found is not None and found.status != "ok"
                note = table.footnote(f"{run.name} {m}: {found.error}") if failed else None
                shown = found.status if failed else "no result" if found else "not run"
                row += [Cell(shown, note=note, muted=True),
                        Cell("–")]
                continue
            before, python_before = previous.get(m, (None, python))
            also = f"Python {python_before} → {python}" if python_before != python else ""
            row += [Cell(format_value(value.mean, value.std)),
                    Cell(change(before, value, run_to_run, also))]
            previous[m] = (value, python)
        row.append(Cell(_each_once(records, lambda r: (r.get("harness_commit")
                                                       or r.get("asv_commit") or "?")[:8])))
        table.rows.append(row)
    return table


def _each_once(records: List[Optional[Record]], value: Callable[[Record], str]) -> str:
    return ", ".join(sorted({value(r) for r in records if r is not None})) or "–"


def _date(run: Run) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(run.date / 1000, datetime.timezone.utc).date().isoformat()
