"""Running headers and footers, left out of the page text (``PageLines.removed`` keeps them).

Lines among the 3 outermost of a page, within 12% of the top or bottom edge, whose text (digits and
roman numerals ignored) recurs in that zone on >= 50% of the pages with text and on at least 3 pages,
or (plain lines only) on >= 3 pages making up >= 50% of the pages from its first to its last
occurrence (per-chapter headers). Lines taller than body text (headings) must recur verbatim, and
only the first rule applies to them. This runs on the cells before rows are merged, so a page number
set apart on a header line is a line of its own; the page number printed in a removed line is kept
for the page label (labels.py).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict

from kb_assets.parsing.layout.headings import HEADING_SIZE_RATIO
from kb_assets.parsing.layout.labels import printed_number
from kb_assets.parsing.layout.lines import Line, PageLines

MARGIN_ZONE = 0.12  # fraction of the page height searched for running headers/footers
ZONE_LINES = 3
REPEAT_SHARE = 0.5
REPEAT_MIN_PAGES = 3

_DIGITS = re.compile(r"\d+")
_ROMAN = re.compile(r"\b[ivxlc]+\b")


def drop_running_lines(pages: dict[int, PageLines], body_h: float) -> None:
    """Drop running headers/footers: see the module docstring. Besides lines on >= 50% of all text
    pages, a plain (non-heading) line also goes when it recurs on >= 3 pages and on >= 50% of the
    pages between its first and last occurrence (per-chapter headers such as "Chapter 3: Storage
    17")."""
    text_pages = sorted((i, pl) for i, pl in pages.items() if pl.lines)
    if len(text_pages) < REPEAT_MIN_PAGES:
        return
    threshold = max(REPEAT_MIN_PAGES, math.ceil(REPEAT_SHARE * len(text_pages)))

    def zone_lines(pl: PageLines):
        ordered = sorted(pl.lines, key=lambda ln: ln.t)
        for line in ordered[:ZONE_LINES]:
            if line.t <= MARGIN_ZONE * pl.height:
                yield "top", line
        for line in ordered[-ZONE_LINES:]:
            if line.b >= (1 - MARGIN_ZONE) * pl.height:
                yield "bottom", line

    def key(zone: str, line: Line) -> tuple[str, str]:
        text = line.text.lower()
        if line.size >= body_h * HEADING_SIZE_RATIO:
            return zone, "=" + text  # heading-size text: must recur verbatim
        return zone, _ROMAN.sub("#", _DIGITS.sub("#", text))

    seen: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, pl in text_pages:
        for k in {key(zone, line) for zone, line in zone_lines(pl)}:
            seen[k].append(index)
    repeated = set()
    for k, where in seen.items():
        if len(where) >= threshold:
            repeated.add(k)
        elif not k[1].startswith("=") and len(where) >= REPEAT_MIN_PAGES:
            if len(where) >= REPEAT_SHARE * (where[-1] - where[0] + 1):
                repeated.add(k)
    if not repeated:
        return
    for _, pl in text_pages:
        dropped = [line for zone, line in zone_lines(pl) if key(zone, line) in repeated]
        pl.printed_number = printed_number(dropped)
        pl.removed = [line.text for line in dropped]
        drop = {id(line) for line in dropped}
        pl.lines = [ln for ln in pl.lines if id(ln) not in drop]
