"""How the command line shows what a person reads (issue 54): a passage's Markdown tables as aligned rows
(a compact row a line where the columns would not fit), its paragraphs a line each; a document's
organisation, period and kind labelled; the score a result is ranked by, named."""

from __future__ import annotations

import re
import textwrap

from kb_assets.retrieval.scope import SHOWN_CONFIDENCE

_RULE = re.compile(r"^\|[\s:|-]+\|$")  # a Markdown header rule: |---|:--:|
_FIGURE = re.compile(r"^[$€£(\s-]*\d[\d,.]*\)?\s*%?$")  # 7,351 · (530.8) · $ 28,408 · 12%
COMPACT = " · "  # between the cells of a row too wide to align


def labelled(metadata: dict | None) -> str:
    """A document's organisation, period and kind, those read with confidence, named: "organisation: ACME
    Corp · period: FY2023 · kind: annual report" ("" when none is)."""
    metadata = metadata or {}
    sure = metadata.get("confidence") or {}
    fields = {
        "organisation": metadata.get("organisation"),
        "period": (metadata.get("period") or {}).get("label"),
        "kind": metadata.get("kind"),
    }
    return " · ".join(f"{k}: {v}" for k, v in fields.items() if v and sure.get(k, 1.0) >= SHOWN_CONFIDENCE)


def passage_lines(text: str, width: int | None = None) -> list[str]:
    """A passage as lines to print: each paragraph whitespace-collapsed on one line (wrapped to ``width`` when
    given), each Markdown table's rows aligned in columns, or, wider than ``width`` (or than 160 characters
    when None), a row a line with its cells between `` · ``."""
    out: list[str] = []
    paragraph: list[str] = []
    table: list[str] = []

    def flush() -> None:
        if paragraph:
            line = " ".join(" ".join(paragraph).split())
            out.extend(textwrap.wrap(line, width, break_on_hyphens=False) if width else [line])
            paragraph.clear()
        if table:
            out.extend(table_lines(table, width or 160))
            table.clear()

    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("|") and line.endswith("|") and len(line) > 1:
            if paragraph:
                flush()
            table.append(line)
        elif not line:
            flush()
        else:
            if table:
                flush()
            paragraph.append(line)
    flush()
    return out


def table_lines(rows: list[str], width: int) -> list[str]:
    """Markdown table rows as aligned columns (figures right-aligned; a rule under a header row), or as
    compact rows where the aligned table is wider than ``width``."""
    headed = len(rows) > 1 and bool(_RULE.match(rows[1]))
    cells = [_cells(row) for row in rows if not _RULE.match(row)]
    columns = max(len(row) for row in cells)
    cells = [row + [""] * (columns - len(row)) for row in cells]
    widths = [max(len(row[i]) for row in cells) for i in range(columns)]
    if sum(widths) + 2 * (columns - 1) > width:
        return [COMPACT.join(cell for cell in row if cell) for row in cells]
    lines = [
        "  ".join(
            cell.rjust(w) if _FIGURE.match(cell) else cell.ljust(w) for cell, w in zip(row, widths, strict=True)
        ).rstrip()
        for row in cells
    ]
    if headed:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def _cells(row: str) -> list[str]:
    """A row's cells (an escaped ``\\|`` stays in its cell, as a pipe)."""
    inner = row.strip()[1:-1].replace("\\|", "\x00")
    return [" ".join(cell.replace("\x00", "|").split()) for cell in inner.split("|")]
