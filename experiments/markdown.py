"""Markdown tables as rows of cells, both ways: `table` writes the tables of the
experiments' summaries and of the generated README and docs blocks; `table_rows` reads one
back (the claims compare tables cell by cell). A leaf: it imports nothing of the project."""

from __future__ import annotations


def table(rows: list[list[str]]) -> str:
    """A markdown table of `rows`, the first row the header."""
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows[1:]])


def table_rows(markdown: str) -> list[list[str]]:
    """Cells of a markdown table (header first, the --- line dropped): `table`'s inverse."""
    rows = []
    for line in markdown.strip().splitlines():
        if not line.startswith("|") or set(line.replace("|", "").strip()) <= {"-"}:
            continue
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows
