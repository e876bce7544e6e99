"""A small table model shared by the terminal, Markdown and HTML outputs of the report
(rendered by render.py and html.py)."""
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
