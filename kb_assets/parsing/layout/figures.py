"""Figures: bitmaps of at least 5% of the page (and 50 pt a side), not page-sized scans, become
figure lines at their place in the flow; the text is the caption ("Figure 2: ...") found just below
or above, else ``[Figure]``. The reader renders the crops (``figure_boxes``: where they are).
"""

from __future__ import annotations

import re

from kb_assets.parsing.layout.lines import Line, PageLines

FIGURE_MIN_SHARE = 0.05  # of the page area
FIGURE_MIN_SIDE = 50.0  # points
SCAN_SHARE = 0.6  # a bitmap covering this much of a page is the page itself (a scan), not a figure

FIGURE_TEXT = "[Figure]"
_FIGURE_CAPTION = re.compile(r"^(?:fig\.|figure|image|diagram|chart|图)\s*[\d:.\s]", re.IGNORECASE)


def place_figures(pl: PageLines, body_h: float) -> None:
    """Figure lines at their place in the flow, each taking its caption line (see the docstring)."""
    area = pl.width * pl.height or 1.0
    for box in sorted(pl.pictures, key=lambda b: b[1]):
        left, top, right, bottom = box
        w, h = right - left, bottom - top
        if w * h < FIGURE_MIN_SHARE * area or min(w, h) < FIGURE_MIN_SIDE or w * h >= SCAN_SHARE * area:
            continue
        caption = None
        for line in pl.lines:
            if line.table is not None or line.figure is not None or not _FIGURE_CAPTION.match(line.text):
                continue
            overlaps = min(line.r, right) - max(line.l, left) > 0
            below = -2.0 <= line.t - bottom <= 2.5 * body_h
            above = -2.0 <= top - line.b <= 2.5 * body_h
            if overlaps and (below or above):
                caption = line
                break
        if caption is not None:
            pl.lines.remove(caption)
        figure = Line(
            text=caption.text if caption is not None else FIGURE_TEXT,
            l=left,
            t=top,
            r=right,
            b=bottom,
            font="",
            size=body_h,
            figure=box,
        )
        at = next((i for i, ln in enumerate(pl.lines) if ln.t >= top), len(pl.lines))
        pl.lines.insert(at, figure)


def figure_boxes(pages: dict[int, PageLines]) -> dict[int, list[tuple[float, float, float, float]]]:
    """Per page, the boxes of its figure lines in flow order (one figure block each)."""
    return {i: [ln.figure for ln in pl.lines if ln.figure is not None] for i, pl in pages.items()}
