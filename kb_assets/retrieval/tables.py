"""A table page's passage for a question: its head and the rows and columns asked for (issues 44, 53).

``table_passage`` is what ``context.passages`` gives a result on a page that is mostly a table of figures
(``context.is_table``): see its docstring.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Sequence

from kb_assets.retrieval.windows import CHUNK_WEIGHT, FIGURE, Term, occurrences, window

HEADER_CHARS = 400  # at most this much of a table page's head (its title, units and column periods) is kept


def table_header(page_text: str) -> tuple[int, int]:
    """(start, end) of a table page's head: the lines before its first row of figures (the statement's title,
    its units, the periods its columns are for), the last ``HEADER_CHARS`` of them when longer."""
    offset = 0
    for line in page_text.splitlines(keepends=True):
        cells = [c.strip() for c in line.strip().strip("|").split("|")[1:] if c.strip()]
        if line.lstrip().startswith("|") and any(FIGURE.match(c) for c in cells):
            break
        offset += len(line)
    start = max(0, offset - HEADER_CHARS)
    if start:
        newline = page_text.find("\n", start, offset)
        start = newline + 1 if newline >= 0 else start
    return start, offset


def compact_row(line: str) -> str:
    """A Markdown row without its empty and lone currency cells: "| Inventories |  | $ | 7,351 | 4,946 |" ->
    "| Inventories | 7,351 | 4,946 |" (the same words and figures, a third shorter: more rows fit the budget)."""
    stripped = line.strip()
    if not stripped.startswith("|"):
        return stripped
    cells = [c.strip() for c in stripped.strip("|").split("|")]
    kept = [c for c in cells if c and c not in ("$", "€", "£", "%")]
    return "| " + " | ".join(kept) + " |" if kept else ""


@functools.lru_cache(maxsize=256)
def line_items(words_asked: tuple[str, ...]) -> list[str]:
    """The printed labels of the rows an analysis the question asks for reads ("total current assets" for a
    quick ratio: ``structure/analyses.py``), from its words (in the question's order)."""
    from kb_assets.structure.analyses import analyses_asked, expansion

    words = " ".join(words_asked)
    return [item.lower() for item in expansion(analyses_asked(words), words, limit=12)]


def table_passage(
    page_text: str,
    content: str,
    terms: list[Term],
    budget: int,
    weights: dict[tuple[str, ...], float] | None = None,
    shown: Sequence[tuple[int, int]] = (),
    chunk_weight: float = CHUNK_WEIGHT,
    found: dict[tuple[str, ...], list[tuple[int, int]]] | None = None,
) -> tuple[str, tuple[int, int]]:
    """(text, shown span) of a table page for the chunk and the terms (issue 53): the page's head
    (``table_header``: title, units, the periods of the columns) and its rows made compact (``compact_row``); the
    whole table when it fits ``budget``, else the rows that hold the question's terms and its analyses' line items
    (``line_items``), the matched chunk's rows, then their neighbours, in page order ("…" where rows are left
    out). Rows already shown by the page's earlier result count for nothing."""
    head_start, head_end = table_header(page_text)
    head = "\n".join(compact_row(line) for line in page_text[head_start:head_end].splitlines() if line.strip())
    rows: list[tuple[int, int, str]] = []  # (start, end, compact text) of the lines after the head
    offset = head_end
    for line in page_text[head_end:].splitlines(keepends=True):
        if line.strip() and (text := compact_row(line)):
            rows.append((offset, offset + len(line), text))
        offset += len(line)
    if not rows:
        text, a, b = window(page_text, content, terms, budget, weights, shown, chunk_weight, found)
        return text[a:b].strip(), (a, b)
    room = budget - len(head) - 3
    if sum(len(r[2]) + 1 for r in rows) <= room:
        whole = "\n".join(r[2] for r in rows)
        return (f"{head}\n…\n{whole}" if head else whole), (rows[0][0], rows[-1][1])
    found = found if found is not None else occurrences(terms, page_text)
    value = _row_values(rows, found, content, terms, weights, shown, chunk_weight)
    wanted = sum(len(r[2]) + 3 for r, v in zip(rows, value, strict=True) if v > 0)
    if wanted > room and (keep := asked_columns(head, rows, terms)) is not None:
        rows = [(a, b, _cells(text, keep)) for a, b, text in rows]  # the rows asked do not fit: the periods asked
    chosen: set[int] = set()
    used = 0
    for number in sorted(range(len(rows)), key=lambda n: (-value[n], n)):
        if value[number] <= 0:
            break
        if used + len(rows[number][2]) + 3 <= room:
            chosen.add(number)
            used += len(rows[number][2]) + 3
    distance = 1  # then the neighbours of the rows chosen, nearest first (a statement's rows read together)
    while chosen and distance < len(rows):
        grown = False
        for number in sorted(chosen):
            for near in (number - distance, number + distance):
                if 0 <= near < len(rows) and near not in chosen and used + len(rows[near][2]) + 3 <= room:
                    chosen.add(near)
                    used += len(rows[near][2]) + 3
                    grown = True
        if not grown and used + 40 > room:
            break
        distance += 1
    if not chosen:
        text, a, b = window(page_text, content, terms, budget, weights, shown, chunk_weight, found)
        return text[a:b].strip(), (a, b)
    lines, previous = [], None
    for number in sorted(chosen):
        if previous is not None and number != previous + 1:
            lines.append("…")
        lines.append(rows[number][2])
        previous = number
    order = sorted(chosen)
    return (f"{head}\n…\n" if head else "") + "\n".join(lines), (rows[order[0]][0], rows[order[-1]][1])


def asked_columns(head: str, rows: list[tuple[int, int, str]], terms: list[Term]) -> set[int] | None:
    """The figure columns of the periods the question names and the one before each (what it is compared with),
    where the head prints one year a column in the order of the rows' figures (None: keep every column)."""
    from kb_assets.retrieval.scope import _years

    asked = _years(" ".join(t if isinstance(t, str) else t[0] for t in terms))
    years_row = next((text for _, _, text in rows if _is_years(text)), "")
    printed = [int(y) for y in re.findall(r"(?<!\d)((?:19|20)\d\d)(?!\d)", years_row or head)]
    widths = [len(_figures(text)) for _, _, text in rows if _figures(text) and not _is_years(text)]
    if not asked or not widths or len(set(printed)) != len(printed) or len(printed) < 3:
        return None
    width = max(set(widths), key=widths.count)
    if width != len(printed) or not asked & set(printed):
        return None
    keep = {printed.index(y) for y in asked if y in printed}
    keep |= {printed.index(y - 1) for y in asked if y - 1 in printed}
    return keep if len(keep) < width else None


def _is_years(row: str) -> bool:
    """A row of column headings that are years ("|  | 2023 | 2022 | 2021 |")."""
    cells = [c.strip() for c in row.strip().strip("|").split("|") if c.strip()]
    return len(cells) >= 2 and all(re.fullmatch(r"(?:19|20)\d\d", c) for c in cells)


def _figures(row: str) -> list[str]:
    return [c for c in (c.strip() for c in row.strip("|").split("|")[1:]) if c and FIGURE.match(c)]


def _cells(row: str, keep: set[int]) -> str:
    """A compact row with only the figure columns kept (its label and any row of another shape as it is)."""
    cells = [c.strip() for c in row.strip().strip("|").split("|")]
    if _is_years(row):  # the column headings: one a column, in order
        return "| " + " | ".join(c for n, c in enumerate(c for c in cells if c) if n in keep) + " |"
    figures = [n for n, c in enumerate(cells) if n > 0 and FIGURE.match(c)]
    if not row.startswith("|") or len(figures) != len(cells) - 1:
        return row
    return "| " + " | ".join([cells[0]] + [cells[n] for i, n in enumerate(figures) if i in keep]) + " |"


def _row_values(
    rows: list[tuple[int, int, str]],
    found: dict[tuple[str, ...], list[tuple[int, int]]],
    content: str,
    terms: list[Term],
    weights: dict[tuple[str, ...], float] | None,
    shown: Sequence[tuple[int, int]],
    chunk_weight: float,
) -> list[float]:
    """Each row's worth for the question: the weight of the question's terms it holds, a line item of the asked
    analyses in its label, being one of the matched chunk's rows; nothing for a row a page's earlier result showed."""
    items = line_items(tuple(t if isinstance(t, str) else t[0] for t in terms))
    flat = " ".join(content.split()).lower()
    average = sum((weights or {}).values()) / len(weights) if weights else 1.0
    starts = [start for start, _, _ in rows]
    held: list[set[tuple[str, ...]]] = [set() for _ in rows]  # the terms each row holds (the page's hits, by place)
    for key, hits in found.items():
        for hit, _ in hits:
            number = bisect.bisect_right(starts, hit) - 1
            if number >= 0 and hit < rows[number][1]:
                held[number].add(key)
    values = []
    for (start, end, text), keys in zip(rows, held, strict=True):
        if any(s <= start and end <= e for s, e in shown):
            values.append(0.0)
            continue
        value = sum((weights or {}).get(key, 1.0) for key in keys)
        label = text.strip("| ").split("|")[0].strip().lower()
        if any(item in label for item in items):
            value += 2 * average
        if len(text) > 8 and " ".join(text.split()).lower() in flat:
            value += chunk_weight * average
        if _is_years(text):  # the periods of the columns: read with every row
            value += 10 * average
        values.append(value)
    return values
