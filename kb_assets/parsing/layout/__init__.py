"""The layout pass: positioned lines of text -> headings, paragraphs, lists, tables and figures.

Used by every reader that has positioned text but no structure: the PDF text layer (docling-parse's
text-line cells, pdf/native.py), OCR of scanned PDF pages (pdf/scans.py) and image files (images.py).
A reader builds one ``PageLines`` per page (``Line`` cells: text, box, font key) and calls
``layout_pages``; PDFs then add their printed page labels (``add_printed_labels``) and render the
figure crops (``figure_boxes``).

What it uses: text, box and font key of each cell. docling-parse names no real font (no "Bold"), so
"bold" is approximated by "a font other than the page's body font"; OCR cells all have the font
``ocr``, so OCR headings come from size alone.

- Body text height: the character-weighted median line height of the document; body font: the
  page's most used font key (the document's on pages with under 300 characters) (lines.py).
- Running headers/footers are dropped first, on the cells (running.py), and the page numbers
  printed in them kept for labels (labels.py).
- Cells on one baseline merge into one row (docling-parse splits a line at wide gaps); rows that
  were several cells (table-like) never merge into paragraphs (lines.py). Runs of aligned multi-cell
  rows become tables (tables.py).
- Headings by size, rare font and the PDF outline, with levels (headings.py).
- Figures at their place in the flow with their captions (figures.py; text-layer pages only).
- Paragraphs, lists, tables and figures as blocks (blocks.py).

Not done: multi-column reading order beyond the reader's content order.
"""

from __future__ import annotations

from kb_assets.parsing.layout.blocks import page_blocks
from kb_assets.parsing.layout.figures import (
    FIGURE_TEXT,
    SCAN_SHARE,
    figure_boxes,
    place_figures,
)
from kb_assets.parsing.layout.headings import mark_headings
from kb_assets.parsing.layout.labels import add_printed_labels
from kb_assets.parsing.layout.lines import (
    Line,
    PageLines,
    body_height,
    line_gap,
    merge_rows,
)
from kb_assets.parsing.layout.running import drop_running_lines
from kb_assets.parsing.layout.tables import find_tables
from kb_assets.parsing.model import Block

__all__ = [
    "FIGURE_TEXT",
    "SCAN_SHARE",
    "Line",
    "PageLines",
    "add_printed_labels",
    "figure_boxes",
    "layout_pages",
]


def layout_pages(pages: dict[int, PageLines], outline: dict[int, dict[str, int]]) -> dict[int, list[Block]]:
    """Blocks per page from positioned lines (text-layer cells or OCR lines): the heuristics above.
    ``outline``: page index -> lowercased bookmark title -> heading level (PDF bookmarks; ``{}``
    without). The pages' lines are rewritten in place (rows, tables, figures, headings marked)."""
    body_h = body_height(pages.values())
    drop_running_lines(pages, body_h)  # on the cells: a page number is its own cell
    for pl in pages.values():
        pl.lines = find_tables(merge_rows(pl.lines), body_h)
    usual_gap = line_gap(pages.values(), body_h)
    mark_headings(pages, outline, body_h, usual_gap)
    for pl in pages.values():
        if not pl.ocr:
            place_figures(pl, body_h)
    gap = min(max(usual_gap * 1.8, usual_gap + 0.45 * body_h), 1.0 * body_h)
    return {index: page_blocks(pl, body_h, gap) for index, pl in pages.items()}
