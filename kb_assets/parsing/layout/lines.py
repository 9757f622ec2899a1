"""Positioned lines, what the layout pass works on, and the document-wide measures it takes of them.

A reader (the PDF text layer, OCR of a scan or an image file) makes one ``PageLines`` per page, of
``Line`` cells in reading order. ``merge_rows`` joins cells on one baseline into rows; the measures
(body text height, font shares, the usual gap between the lines of a paragraph) are taken over all
pages of the document.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from kb_assets.parsing.model import join_lines

# a list item's marker (bullet, dash, "1.", "a)"), and a table-of-contents entry
LIST_MARKER = re.compile(
    r"^(?:[\u2022\u25e6\u25aa\u25ab\u25cf\u25cb\u25a0\u25a1\u27a2\u25ba\u25b8\u2023\u2043\u2219\u00b7]\s*(?=\S)"
    r"|[*\-\u2013\u2014]\s+(?=\S)|\(?\d{1,2}[.)]\s+|\(?[a-z][.)]\s+)"
)
TOC_ENTRY = re.compile(r"(?:\.\s?){4,}\s*[\divxlcIVXLC]+(?:,\s*[\divxlcIVXLC]+)*$")  # "Storage . . . . 14, 17"


@dataclass
class Part:
    """One cell of a merged row."""

    text: str
    l: float  # noqa: E741 (l, t, r, b: a box's edges, as docling names them)
    r: float


@dataclass
class Line:
    """A positioned line of text in page units, top-left origin (PDF points, or pixels for OCR):
    one text-layer or OCR cell, later a merged row, a table or a figure."""

    text: str
    l: float  # noqa: E741 (l, t, r, b: a box's edges, as docling names them)
    t: float
    r: float
    b: float
    font: str
    size: float = 0.0  # the tallest cell's height (a merged row's box can be taller than its text)
    heading: str | None = None  # "size" | "font" | "outline" (after classification)
    level: int | None = None
    cells: int = 1
    parts: list[Part] = field(default_factory=list)  # the cells of a merged row, left to right
    table: list[list[str]] | None = None  # a detected table (this line stands for all its rows)
    row_boxes: list[tuple[float, float, float, float]] | None = None  # a table: each row's box
    figure: tuple[float, float, float, float] | None = None  # a figure: its box (l, t, r, b)

    def __post_init__(self) -> None:
        if not self.size:
            self.size = self.b - self.t
        if not self.parts:
            self.parts = [Part(self.text, self.l, self.r)]


@dataclass
class PageLines:
    """One page's lines and pictures, what a reader hands to ``layout_pages``."""

    width: float
    height: float
    lines: list[Line] = field(default_factory=list)
    body_font: str | None = None
    pictures: list[tuple[float, float, float, float]] = field(default_factory=list)  # (l, t, r, b)
    ocr: bool = False  # the lines come from OCR
    printed_number: str | None = None  # a page number found in a removed header/footer
    removed: list[str] = field(default_factory=list)  # the running header/footer lines dropped


def merge_rows(lines: list[Line]) -> list[Line]:
    """Consecutive cells on one baseline (left to right) become one row."""
    rows: list[Line] = []
    for line in lines:
        prev = rows[-1] if rows else None
        if prev is not None and line.l >= prev.r - 1.0:
            overlap = min(prev.b, line.b) - max(prev.t, line.t)
            if overlap >= 0.5 * min(prev.size, line.size) > 0:
                prev.text = join_lines(prev.text, line.text)
                prev.parts.append(Part(line.text, line.l, line.r))
                prev.r = max(prev.r, line.r)
                prev.t = min(prev.t, line.t)
                prev.b = max(prev.b, line.b)
                prev.size = max(prev.size, line.size)
                prev.cells += 1
                continue
        rows.append(Line(line.text, line.l, line.t, line.r, line.b, line.font, size=line.size))
    return rows


def _weighted_median(values: list[tuple[float, int]]) -> float:
    values = sorted(values)
    total = sum(w for _, w in values)
    acc = 0
    for value, weight in values:
        acc += weight
        if acc * 2 >= total:
            return value
    return values[-1][0] if values else 0.0


def body_height(pages) -> float:
    weights: Counter[float] = Counter()
    for pl in pages:
        for line in pl.lines:
            if line.size > 0:
                weights[round(line.size * 4) / 4] += len(line.text)
    return _weighted_median(list(weights.items())) if weights else 10.0


def font_shares(pages) -> dict[str, float]:
    chars: Counter[str] = Counter()
    for pl in pages:
        for line in pl.lines:
            chars[line.font] += len(line.text)
    total = sum(chars.values()) or 1
    return {font: n / total for font, n in chars.items()}


def line_gap(pages, body_h: float) -> float:
    """The usual gap between two lines of one paragraph: the tight end (20th percentile) of the gaps
    between consecutive body-size rows (documents of one-line paragraphs have mostly paragraph
    gaps, so not the median). A row starts a new paragraph at a gap of 1.8x this (at most one body
    line height)."""
    gaps = []
    for pl in pages:
        for prev, line in zip(pl.lines, pl.lines[1:], strict=False):
            if abs(prev.size - body_h) > 0.2 * body_h or abs(line.size - body_h) > 0.2 * body_h:
                continue
            gap = line.t - prev.b
            if -0.2 * body_h <= gap <= 1.5 * body_h:
                gaps.append(gap)
    return sorted(gaps)[len(gaps) // 5] if gaps else 0.3 * body_h
