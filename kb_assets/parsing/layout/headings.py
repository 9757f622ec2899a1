"""Headings among the rows, and their levels.

Candidates are short lines (<= 20 words, <= 100 characters with CJK counted double, not starting
with a lowercase letter, not ending in ``.``, ``,``, ``;`` or a word like "the"/"and", not a list
item, a table-of-contents entry or a "Figure/Table ..." caption) with space above them (more than
between the lines of a paragraph) that are either taller than the body (>= 1.12x) or set in a rare
non-body font (<30% of characters, <= 80 characters with CJK counted double) and are no more than
two lines of that font in a row, all qualifying. Level: the numbering depth for numbered headings
("2.1 Object Storage" -> 2), else the rank of the heading height (largest = 1); body-size headings
without numbers sit one level below the smallest size level. Headings from the PDF outline
(bookmarks) win: a line whose text equals a bookmark title on the bookmark's page is a heading at
the bookmark's depth.
"""

from __future__ import annotations

import re

from kb_assets.parsing.layout.lines import (
    LIST_MARKER,
    TOC_ENTRY,
    Line,
    PageLines,
    font_shares,
)

HEADING_SIZE_RATIO = 1.12

_NUMBERED = re.compile(r"^(\d{1,2}(?:\.\d{1,2})*)\.?\s+(?=[^\W\d_])")
_CAPTION = re.compile(r"^(?:fig\.|figure|table|tab\.|source|note|图|表)\s*[\d:.\s]", re.IGNORECASE)
_CJK_CHAR = re.compile("[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
_NO_HEADING_END = ".,;。，；、"
_DANGLING_END = re.compile(r"\b(?:a|an|the|and|or|of|to|in|for|with|by|from|as|at|is|are)$", re.IGNORECASE)


def mark_headings(
    pages: dict[int, PageLines], outline: dict[int, dict[str, int]], body_h: float, line_gap: float
) -> None:
    """Set ``heading`` ("size" | "font" | "outline") and ``level`` on the heading rows of every page.
    ``outline``: page index -> lowercased bookmark title -> level; ``line_gap``: the usual gap
    between the lines of a paragraph."""
    font_share = font_shares(pages.values())
    doc_font = max(font_share, key=font_share.__getitem__) if font_share else None
    for pl in pages.values():
        # a page with little text (a title page) says little about its body font
        body_font = pl.body_font if sum(len(ln.text) for ln in pl.lines) >= 300 else doc_font
        prev: Line | None = None
        for line in pl.lines:
            kind = _heading_kind(line, body_h, body_font, font_share)
            if kind is not None and not _space_above(prev, line, line_gap, body_h):
                kind = None
            line.heading = kind
            prev = line
        _limit_font_heading_runs(pl.lines)
    for index, entries in outline.items():
        for line in pages[index].lines if index in pages else []:
            level = entries.get(line.text.lower())
            if level is not None and line.table is None:
                line.heading, line.level = "outline", level
    _assign_levels([ln for pl in pages.values() for ln in pl.lines])


def _visual_length(text: str) -> float:
    """Characters, with CJK ideographs counted double (they are about twice as wide)."""
    return sum(2 if _CJK_CHAR.match(ch) else 1 for ch in text)


def _heading_kind(line: Line, body_h: float, body_font: str | None, font_share: dict[str, float]) -> str | None:
    text = line.text
    if line.table is not None or line.figure is not None:
        return None
    if len(text) > 150 or len(text.split()) > 20 or not any(ch.isalpha() for ch in text):
        return None
    if LIST_MARKER.match(text) and not _NUMBERED.match(text):
        return None
    if _CAPTION.match(text) or text[-1] in _NO_HEADING_END or line.cells > 2 or TOC_ENTRY.search(text):
        return None
    if text[0].isascii() and text[0].islower():  # a heading does not start mid-sentence
        return None
    if _visual_length(text) > 100 or _DANGLING_END.search(text):  # nor end mid-sentence
        return None
    if line.size >= body_h * HEADING_SIZE_RATIO and line.size - body_h >= 0.8:
        return "size"
    if (
        body_font is not None
        and line.font != body_font
        and font_share.get(line.font, 0.0) < 0.3
        and line.cells == 1
        and not text.endswith((":", "："))
        and _visual_length(text) <= 80
        and (_NUMBERED.match(text) or len(text.split()) <= 12)
        and (text[0].isupper() or text[0].isdigit() or not text[0].isascii())
    ):
        return "font"
    return None


def _limit_font_heading_runs(lines: list[Line]) -> None:
    """A run of consecutive rows in one non-body font is a heading only when every row of it
    qualifies and it has at most two rows; otherwise it is text set in that font (a quote, code,
    a paragraph in another script)."""
    i = 0
    while i < len(lines):
        j = i
        while j + 1 < len(lines) and lines[j + 1].font == lines[i].font:
            j += 1
        run = lines[i : j + 1]
        if len(run) >= 3 or any(line.heading != "font" for line in run):
            for line in run:
                if line.heading == "font":
                    line.heading = None
        i = j + 1


def _assign_levels(lines: list[Line]) -> None:
    sizes = sorted({round(ln.size, 1) for ln in lines if ln.heading == "size"}, reverse=True)
    clusters: list[float] = []
    for size in sizes:
        if not clusters or clusters[-1] - size > 0.6:
            clusters.append(size)

    def size_rank(h: float) -> int:
        for rank, size in enumerate(clusters):
            if h >= size - 0.6:
                return rank + 1
        return len(clusters)

    for line in lines:
        if line.heading is None or line.heading == "outline":
            continue
        numbered = _NUMBERED.match(line.text)
        if numbered:
            level = numbered.group(1).count(".") + 1
        elif line.heading == "size":
            level = size_rank(line.size)
        else:
            level = len(clusters) + 1
        line.level = min(max(level, 1), 6)


def _space_above(prev: Line | None, line: Line, line_gap: float, body_h: float) -> bool:
    """Headings stand apart: first on the page (or in a new column), below a heading of the same
    size (a wrapped heading), or with more space above than between the lines of a paragraph. A
    tall formula or superscript line inside a paragraph has less."""
    if prev is None or line.t < prev.t - 0.5 * prev.size:
        return True
    if prev.heading is not None and abs(prev.size - line.size) < 0.5:
        return True
    return line.t - prev.b >= line_gap + 0.3 * body_h
