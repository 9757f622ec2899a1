"""Tables without a model, from rows of several cells.

A run of >= 3 consecutive rows of >= 2 cells each whose cells start in the same columns (the first
row's cells define them, tolerance 0.8 body line heights), rows no further apart than 2.5 line
heights, becomes one table line (``Line.table``: its rows, the first row the header); a row of fewer
cells right under a row (tighter than a row gap) continues that row's cells (wrapped cells), unless a
cell of it runs on past the start of the next column: then it is a row of its own whose cells the
text layer ran together (docling-parse merges cells a narrow gap apart), kept whole in the column it
starts in. Before, such a line was joined to the row above, mixing two rows' text (``Bdale Garbee
Martin Michlmayr March 2003 | April 2002``; code lines after a table were swallowed the same way).
Table-of-contents rows never start or join a table. Not done: ruled tables whose rows are single
cells.
"""

from __future__ import annotations

from kb_assets.parsing.layout.lines import TOC_ENTRY, Line, Part
from kb_assets.parsing.model import join_lines

TABLE_MIN_ROWS = 3


def find_tables(lines: list[Line], body_h: float) -> list[Line]:
    """Runs of aligned multi-cell rows become one table line each (see the module docstring)."""
    out: list[Line] = []
    i = 0
    while i < len(lines):
        found = _table_run(lines, i, body_h)
        if found is None:
            out.append(lines[i])
            i += 1
            continue
        end, rows, boxes = found
        run = lines[i:end]
        header_font = run[0].font
        table = Line(
            text=" ".join(" ".join(r) for r in rows),
            l=min(ln.l for ln in run),
            t=min(ln.t for ln in run),
            r=max(ln.r for ln in run),
            b=max(ln.b for ln in run),
            font=header_font,
            size=max(ln.size for ln in run),
            cells=max(len(r) for r in rows),
            table=rows,
            row_boxes=boxes,
        )
        out.append(table)
        i = end
    return out


def _grow(box: tuple[float, float, float, float], line: Line) -> tuple[float, float, float, float]:
    return min(box[0], line.l), min(box[1], line.t), max(box[2], line.r), max(box[3], line.b)


def _table_run(lines: list[Line], start: int, body_h: float) -> tuple[int, list[list[str]], list] | None:
    """(end, rows, each row's box) of the table starting at ``start``, or None."""
    first = lines[start]
    if len(first.parts) < 2 or first.table is not None or TOC_ENTRY.search(first.text):
        return None
    tol = 0.8 * body_h
    starts = [part.l for part in first.parts]
    rows = [[part.text for part in first.parts]]
    boxes = [(first.l, first.t, first.r, first.b)]
    full_rows = 1
    prev = first
    end = start + 1
    while end < len(lines):
        line = lines[end]
        gap = line.t - prev.b
        if gap < -0.3 * body_h or gap > 2.5 * body_h or TOC_ENTRY.search(line.text) or line.table is not None:
            break
        if abs(line.size - first.size) > 0.35 * max(line.size, first.size):
            break
        columns = _columns_of(line.parts, starts, tol)
        if columns is None:
            break
        short = len(line.parts) < 2 or len(line.parts) < len(starts) - 1
        if short and gap > 0.6 * body_h:
            break  # a lone line after the table, not a wrapped cell
        if short and not _crosses(line.parts, columns, starts, tol):
            for column, part in zip(columns, line.parts, strict=False):  # wrapped cells continue the row above
                rows[-1][column] = join_lines(rows[-1][column], part.text)
            boxes[-1] = _grow(boxes[-1], line)
        else:  # a row; a short one running on into the next column is a row whose cells ran together
            row = [""] * len(starts)
            for column, part in zip(columns, line.parts, strict=False):
                row[column] = part.text
            rows.append(row)
            boxes.append((line.l, line.t, line.r, line.b))
            if not short:
                full_rows += 1
        prev = line
        end += 1
    if full_rows < TABLE_MIN_ROWS:
        return None
    return end, rows, boxes


def _columns_of(parts: list[Part], starts: list[float], tol: float) -> list[int] | None:
    """The column of each cell (cells start within a column's band), or None when they do not fit."""
    columns: list[int] = []
    for part in parts:
        column = None
        for index, left in enumerate(starts):
            next_left = starts[index + 1] if index + 1 < len(starts) else float("inf")
            if left - tol <= part.l < next_left - tol:
                column = index
                break
        if column is None or (columns and column <= columns[-1]):
            return None
        columns.append(column)
    return columns


def _crosses(parts: list[Part], columns: list[int], starts: list[float], tol: float) -> bool:
    """A cell that runs on past the start of the next column."""
    return any(
        column + 1 < len(starts) and part.r > starts[column + 1] + 0.25 * tol
        for column, part in zip(columns, parts, strict=False)
    )
