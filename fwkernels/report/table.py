"""A small table model shared by the terminal, Markdown and HTML outputs of the report."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional


@dataclass
class Cell:
    text: str
    best: bool = False  # the fastest (or smallest) of its column: bold / marked with *
    link: Optional[str] = None  # asv graph of this figure, where the report lives in the asv site
    note: Optional[int] = None  # footnote number (N/A and failure reasons)
    muted: bool = False  # N/A, failed, not run


@dataclass
class Table:
    title: str
    headers: List[str]
    rows: List[List[Cell]] = field(default_factory=list)  # first cell: the row label
    notes: List[str] = field(default_factory=list)  # footnotes, numbered from 1
    caption: str = ""  # what the numbers are and where they come from
    summary: List[str] = field(default_factory=list)  # lines under the table
    anchor: str = ""  # HTML id

    def footnote(self, text: str) -> int:
        """The number of this footnote, added once."""
        if text not in self.notes:
            self.notes.append(text)
        return self.notes.index(text) + 1

    def is_empty(self) -> bool:
        return not self.rows


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
