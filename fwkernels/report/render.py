"""The report as text: numbers formatted once, tables for the terminal and as Markdown."""
from __future__ import annotations

from typing import List, Optional

from fwkernels.report.model import Report
from fwkernels.report.table import Cell, Table


def format_value(value: float, std: Optional[float] = None) -> str:
    if abs(value) >= 1e6:
        text = f"{value:.3g}".replace("e+0", "e").replace("e+", "e")
        return text + (f" ± {100 * std / value:.1f}%" if std is not None and value else "")
    text = f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    if std is not None:
        text += f" ± {std:,.2g}" if std < 100 else f" ± {std:,.0f}"
    return text


def _cell_text(cell: Cell, markdown: bool) -> str:
    text = cell.text
    if cell.note is not None:
        text += f" [{cell.note}]"
    if cell.best:
        text = f"**{text}**" if markdown else f"{text} *"
    return text


def render_text(table: Table) -> str:
    """A plain aligned table for the terminal; the best of a column is marked with *."""
    body = [[_cell_text(c, False) for c in row] for row in table.rows]
    grid = [table.headers] + body
    widths = [max(len(row[i]) for row in grid) for i in range(len(table.headers))]
    line = lambda row: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                 for i, (c, w) in enumerate(zip(row, widths))).rstrip()
    out = [table.title, "=" * len(table.title)]
    if table.caption:
        out.append(table.caption)
    out += [line(table.headers), "  ".join("-" * w for w in widths)]
    out += [line(row) for row in body]
    if any(c.best for row in table.rows for c in row):
        out.append("* fastest of the column")
    out += [f"[{i}] {note}" for i, note in enumerate(table.notes, 1)]
    out += table.summary
    return "\n".join(out)


def _escape_markdown(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(table: Table) -> str:
    out = [f"### {table.title}", ""]
    if table.caption:
        out += [table.caption.replace("\n", "\n\n"), ""]
    out.append("| " + " | ".join(_escape_markdown(h) for h in table.headers) + " |")
    out.append("|" + "|".join(["---"] + ["---:"] * (len(table.headers) - 1)) + "|")
    for row in table.rows:
        out.append("| " + " | ".join(_escape_markdown(_cell_text(c, True)) for c in row) + " |")
    if any(c.best for row in table.rows for c in row):
        out += ["", "Bold: the fastest of the column."]
    if table.notes:
        out.append("")
        out += [f"{i}. {_escape_markdown(note)}" for i, note in enumerate(table.notes, 1)]
    if table.summary:
        out.append("")
        out += [f"- {line}" for line in table.summary]
    return "\n".join(out)


def header_lines(report: Report) -> List[str]:
    notes = [note for note in (report.harness_note(), report.allocator_note(),
                               report.mkl_note(), report.beside_note(),
                               report.host_speed_note()) if note]
    return ([f"fwkernels report: machine {report.machine}, {report.commit}",
             f"device: {report.device}"] + [f"environment {line}" for line in report.environment]
            + notes)


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
