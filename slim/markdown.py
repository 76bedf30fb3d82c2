"""GitHub-flavoured Markdown tables, written one way for every page the project generates (cleaning
reports, the results page, the tuning summary, the README's tables)."""

from __future__ import annotations

from typing import Iterable, Sequence


def markdown_table(header: Sequence[object], rows: Iterable[Sequence[object]]) -> list[str]:
    """The lines of a table: the header, the ``|---|`` rule, one line per row (cells as given, by
    `str`)."""
    lines = ["| " + " | ".join(str(cell) for cell in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines
