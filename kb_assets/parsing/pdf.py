"""PDF: physical pages, read by docling and a small layout pass of our own, OCR where text is missing.

Which pipeline (``choose_pdf_pipeline`` in converter.py): where docling's layout model is on disk
(``DOCLING_ARTIFACTS_PATH``, or docling's model cache) and its Python dependencies import, docling's
standard pipeline reads the pages (mode ``docling-layout``, see ``_parse_layout``); if that pipeline
cannot start or fails, the document falls back to the native path below with a warning naming the
cause. Otherwise (this project's default, offline) docling's model-free ``NativePdfPipeline`` gives
text-line cells and the heuristics below lay them out (mode ``docling-native-pdf``, not a layout
model). Pages without a text layer are OCRed (ocr.py: ``KB_OCR_ENGINE``, mode ``ocr-rapidocr``, parser
``rapidocr`` by default, or ``ocr-tesseract``; the OCR lines go through the same layout pass); a page
that needed OCR but could not get it is ``docling-native-pdf-no-text``, one docling-parse could not
read ``docling-native-pdf-failed``.

What the heuristics use: the text-line cells docling-parse reports per page
(``ConversionResult.pages[i].parsed_page.textline_cells``): text, bounding box and the PDF font
resource key (``/F1``...). docling-parse names no real font (no "Bold"), so "bold" is approximated
by "a font other than the page's body font".

- Lines on one baseline are merged into one row (docling-parse splits a line at wide gaps);
  rows that were several cells (table-like) never merge into paragraphs.
- Tables (no model): a run of >= 3 consecutive rows of >= 2 cells each whose cells start in the same
  columns (the first row's cells define them, tolerance 0.8 body line heights), rows no further
  apart than 2.5 line heights, becomes one ``table`` block with the first row as header; a row of
  fewer cells right under a row (tighter than a row gap) continues that row's cells (wrapped cells).
  Table-of-contents rows never start or join a table.
- Figures: bitmaps of at least 5% of the page (and 50 pt a side), not page-sized scans, become
  ``figure`` blocks at their place in the flow; the text is the caption ("Figure 2: ...") found
  just below or above, else ``[Figure]``. The crop is rendered (144 dpi) into ``Block.image_png``.
- Body text height: the character-weighted median line height of the document; body font: the
  page's most used font key (the document's on pages with under 300 characters).
- Headings: short lines (<= 20 words, <= 100 characters with CJK counted double, not starting
  with a lowercase letter, not ending in ``.``, ``,``, ``;`` or a word like "the"/"and", not a
  list item, a table-of-contents entry or a "Figure/Table ..." caption) with space above them
  (more than between the lines of a paragraph) that are either taller than the body (>= 1.12x) or set in a
  rare non-body font (<30% of characters, <= 80 characters with CJK counted double) and are no
  more than two lines of that font in a row, all qualifying. Level: the numbering
  depth for numbered headings ("2.1 Object Storage" -> 2), else the rank of the heading height
  (largest = 1); body-size headings without numbers sit one level below the smallest size level.
- Paragraphs: consecutive rows join until a vertical gap larger than the usual line gap (1.8x the
  tight-end gap, at most one body line height), a change of line height (or of font together
  with height), a jump up (next column), or a short line ending a sentence. Wrapped lines join
  with a space, without one between CJK characters, and ``infor-``/``mation`` de-hyphenated.
- Lists: rows starting with a bullet or ``1.``/``a)`` marker; continuation rows join the item;
  consecutive items make one ``list`` block, one item per line.
- Running headers/footers: lines among the 3 outermost of a page, within 12% of the top or bottom
  edge, whose text (digits and roman numerals ignored) recurs in that zone on >= 50% of the pages
  with text and on at least 3 pages, or (plain lines only) on >= 3 pages making up >= 50% of the
  pages from its first to its last occurrence (per-chapter headers). Lines taller than body text
  (headings) must recur verbatim, and only the first rule applies to them. This runs on docling's
  cells before rows are merged, so a page number set apart on a header line is a line of its own.
- Page labels: the PDF's own labels (``/PageLabels``, via pypdfium2); without them, the page number
  printed in a removed header/footer ("12", "Page 4 of 6", "iv") when it counts up by one from a
  neighbouring page.
- Headings from the PDF outline (bookmarks, via pypdfium2) win: a line whose text equals a
  bookmark title on the bookmark's page is a heading at the bookmark's depth.
- Page images: every page rendered at 72 dpi (PNG) into ``ParsedPage.image_png``
  (``ParseOptions.images``).
- PDFs are converted ``PAGES_PER_BATCH`` pages at a time (docling holds every page's cell objects
  until a conversion ends: ~4.5 MB a page with word cells, less with lines only).
- Not done: ruled tables whose rows are single cells, tables inside the layout-model path without
  TableFormer, multi-column reading order beyond the parser's content order.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from kb_assets.parsing.converter import PdfPipeline, choose_pdf_pipeline, convert
from kb_assets.parsing.model import (
    Block,
    DocumentParseError,
    ParsedDocument,
    ParsedPage,
    clean_inline,
    join_lines,
    table_block,
)
from kb_assets.parsing.options import (
    FIGURE_IMAGE_SCALE,
    MAX_RENDER_PIXELS,
    OCR_DPI,
    PAGE_IMAGE_SCALE,
    ParseOptions,
)

PARSER = "docling"
MODE = "docling-native-pdf"
MODE_LAYOUT = "docling-layout"
MODE_FAILED = "docling-native-pdf-failed"  # docling-parse could not read this page
MODE_NO_TEXT = "docling-native-pdf-no-text"  # no text layer and no OCR available

HEADING_SIZE_RATIO = 1.12
MARGIN_ZONE = 0.12  # fraction of the page height searched for running headers/footers
ZONE_LINES = 3
REPEAT_SHARE = 0.5
REPEAT_MIN_PAGES = 3
PAGES_PER_BATCH = 50
TABLE_MIN_ROWS = 3
FIGURE_MIN_SHARE = 0.05  # of the page area
FIGURE_MIN_SIDE = 50.0  # points
SCAN_SHARE = 0.6  # a bitmap covering this much of a page is the page itself (a scan), not a figure
OCR_MAX_CHARS = 20  # a page with fewer text-layer characters than this and a scan-sized bitmap is OCRed
FIGURE_TEXT = "[Figure]"

_NUMBERED = re.compile(r"^(\d{1,2}(?:\.\d{1,2})*)\.?\s+(?=[^\W\d_])")
_LIST_MARKER = re.compile(
    r"^(?:[\u2022\u25e6\u25aa\u25ab\u25cf\u25cb\u25a0\u25a1\u27a2\u25ba\u25b8\u2023\u2043\u2219\u00b7]\s*(?=\S)"
    r"|[*\-\u2013\u2014]\s+(?=\S)|\(?\d{1,2}[.)]\s+|\(?[a-z][.)]\s+)"
)
_CAPTION = re.compile(r"^(?:fig\.|figure|table|tab\.|source|note|图|表)\s*[\d:.\s]", re.IGNORECASE)
_FIGURE_CAPTION = re.compile(r"^(?:fig\.|figure|image|diagram|chart|图)\s*[\d:.\s]", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?:。！？：]$")
_DIGITS = re.compile(r"\d+")
_ROMAN = re.compile(r"\b[ivxlc]+\b")
_TOC_ENTRY = re.compile(r"(?:\.\s?){4,}\s*[\divxlcIVXLC]+(?:,\s*[\divxlcIVXLC]+)*$")  # "Storage . . . . 14, 17"
_CJK_CHAR = re.compile("[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
_NO_HEADING_END = ".,;。，；、"
_DANGLING_END = re.compile(r"\b(?:a|an|the|and|or|of|to|in|for|with|by|from|as|at|is|are)$", re.IGNORECASE)
_PAGE_NUMBER = re.compile(
    r"^(?:(?:page|p\.|seite|第)\s*)?[-\u2013\u2014]?\s*(\d{1,5}|[ivxlcdm]{1,8})\s*[-\u2013\u2014]?"
    r"(?:\s*(?:of|/|页)\s*\d+)?\s*页?$",
    re.IGNORECASE,
)
_EDGE_NUMBER = re.compile(r"(?:^(\d{1,5})\s+\S|\S\s+(\d{1,5})$)")


@dataclass
class _Part:
    text: str
    l: float
    r: float


@dataclass
class _Line:
    text: str
    l: float
    t: float
    r: float
    b: float
    font: str
    size: float = 0.0  # the tallest cell's height (a merged row's box can be taller than its text)
    heading: str | None = None  # "size" | "font" | "outline" (after classification)
    level: int | None = None
    cells: int = 1
    parts: list[_Part] = field(default_factory=list)  # the cells of a merged row, left to right
    table: list[list[str]] | None = None  # a detected table (this line stands for all its rows)
    figure: tuple[float, float, float, float] | None = None  # a figure: its box (l, t, r, b)

    def __post_init__(self) -> None:
        if not self.size:
            self.size = self.b - self.t
        if not self.parts:
            self.parts = [_Part(self.text, self.l, self.r)]


@dataclass
class _PageLines:
    width: float
    height: float
    lines: list[_Line] = field(default_factory=list)
    body_font: str | None = None
    has_pictures: bool = False
    pictures: list[tuple[float, float, float, float]] = field(default_factory=list)  # (l, t, r, b)
    ocr: bool = False  # the lines come from OCR
    printed_number: str | None = None  # a page number found in a removed header/footer
    removed: list[str] = field(default_factory=list)  # the running header/footer lines dropped


@dataclass
class _Facts:
    page_count: int
    title: str | None
    labels: list[str | None]
    outline: dict[int, dict[str, int]]


# ------------------------------------------------------------------------------------- entry


def parse_pdf(path: Path, name: str, options: ParseOptions | None = None) -> ParsedDocument:
    import pypdfium2 as pdfium

    options = options or ParseOptions()
    facts = _pdfium_facts(path, name, options.max_pages)
    warnings: list[str] = []
    pipeline = choose_pdf_pipeline(options.docling_artifacts_path)
    if pipeline.kind == "layout":
        try:
            return _parse_layout(path, name, facts, pipeline, options)
        except Exception as exc:  # the model pipeline could not start or run: native path, said so
            warnings.append(
                f"docling layout pipeline failed ({type(exc).__name__}: {exc}); "
                f"parsed with the model-free native pipeline instead"
            )
    elif options.docling_artifacts_path is not None:
        warnings.append(pipeline.reason)

    pages = _native_lines(path, name, facts.page_count, warnings)
    pdf = pdfium.PdfDocument(str(path))
    try:
        _ocr_pages(pdf, pages, options, warnings)
        blocks = _layout_pages(pages, facts.outline)
        _add_printed_labels(pages, facts.labels)
        parsed: list[ParsedPage] = []
        for index in range(facts.page_count):
            label = facts.labels[index] if index < len(facts.labels) else None
            pl = pages.get(index)
            if pl is None:
                parsed.append(ParsedPage(index, [], PARSER, MODE_FAILED, label))
                warnings.append(f"page {index + 1}: docling-parse could not read the page")
                continue
            label = label or pl.printed_number
            page_blocks = blocks.get(index, [])
            removed = tuple(pl.removed)
            if pl.ocr:
                parsed.append(ParsedPage(index, page_blocks, *_ocr_parser(options), label, removed=removed))
                continue
            mode = MODE
            if not page_blocks and _needs_ocr(pl):
                mode = MODE_NO_TEXT
            parsed.append(ParsedPage(index, page_blocks, PARSER, mode, label, removed=removed))
        if options.images:
            color = {i for i, pl in pages.items() if pl.pictures}
            _render_images(pdf, parsed, _figure_boxes(pages), color)
    finally:
        pdf.close()

    title = facts.title or _first_heading(parsed) or Path(name).stem
    return ParsedDocument(title=title, mime="application/pdf", source_kind="pdf", pages=parsed, warnings=warnings)


def _native_lines(path: Path, name: str, page_count: int, warnings: list[str]) -> dict[int, _PageLines]:
    # docling keeps every parsed page (all its cells as pydantic objects) until the
    # conversion ends: convert in batches and keep only the light line records
    pages: dict[int, _PageLines] = {}
    for start in range(1, page_count + 1, PAGES_PER_BATCH):
        end = min(start + PAGES_PER_BATCH - 1, page_count)
        result = convert(path, name, ".pdf", page_range=(start, end))
        if result.input.page_count and result.input.page_count != page_count:
            warnings.append(f"page count: pdfium reads {page_count} pages, docling {result.input.page_count}")
        for page in result.pages:
            if page.parsed_page is not None and page.size is not None:
                pages[page.page_no - 1] = _read_lines(page.parsed_page, page.size.width, page.size.height)
        del result
    return pages


def _layout_pages(pages: dict[int, _PageLines], outline: dict[int, dict[str, int]]) -> dict[int, list[Block]]:
    """Blocks per page from positioned lines (text-layer cells or OCR lines): the heuristics above."""
    body_h = _body_height(pages.values())
    _drop_running_lines(pages, body_h)  # on the cells: a page number is its own cell
    for pl in pages.values():
        pl.lines = _find_tables(_merge_rows(pl.lines), body_h)
    line_gap = _line_gap(pages.values(), body_h)
    font_share = _font_shares(pages.values())
    doc_font = max(font_share, key=font_share.get) if font_share else None
    for pl in pages.values():
        # a page with little text (a title page) says little about its body font
        body_font = pl.body_font if sum(len(ln.text) for ln in pl.lines) >= 300 else doc_font
        prev: _Line | None = None
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
    for pl in pages.values():
        if not pl.ocr:
            _place_figures(pl, body_h)
    gap = min(max(line_gap * 1.8, line_gap + 0.45 * body_h), 1.0 * body_h)
    return {index: _blocks(pl, body_h, gap) for index, pl in pages.items()}


def _pdfium_facts(path: Path, name: str, max_pages: int) -> _Facts:
    """Page count, metadata title, page labels and the outline (bookmarks: page -> lowercased
    title -> level, 1 = top), read with pypdfium2 (also a cheap validity check)."""
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        text = str(exc).lower()
        if "password" in text:
            raise DocumentParseError(name, "encrypted PDF (a password is required)") from exc
        raise DocumentParseError(name, f"not a valid PDF (file is truncated or corrupt: {exc})") from exc
    try:
        count = len(pdf)
        if count == 0:
            raise DocumentParseError(name, "PDF has no pages")
        if count > max_pages:
            raise DocumentParseError(name, f"PDF has {count} pages, over the limit of {max_pages} (KB_PARSE_MAX_PAGES)")
        try:
            title = _clean_title(pdf.get_metadata_dict().get("Title", ""))
        except Exception:
            title = None
        labels: list[str | None] = []
        for i in range(count):
            try:
                label = clean_inline(pdf.get_page_label(i))
            except Exception:
                label = ""
            labels.append(label or None)
        return _Facts(count, title, labels, _outline(pdf))
    finally:
        pdf.close()


def _outline(pdf) -> dict[int, dict[str, int]]:
    entries: dict[int, dict[str, int]] = defaultdict(dict)
    try:
        for n, bookmark in enumerate(pdf.get_toc(max_depth=6)):
            if n >= 5000:
                break
            dest = bookmark.get_dest()
            index = dest.get_index() if dest is not None else None
            title = clean_inline(bookmark.get_title() or "").lower()
            if index is not None and title:
                entries[index].setdefault(title, min(bookmark.level + 1, 6))
    except Exception:  # a broken outline is no reason to fail the document
        return {}
    return dict(entries)


def _clean_title(raw: str) -> str | None:
    title = clean_inline(raw or "")
    title = re.sub(r"^Microsoft (Word|PowerPoint|Excel) - ", "", title)
    if not title or title.lower() in {"untitled", "unknown", "title", "document", "anonymous", "(anonymous)"}:
        return None
    if re.search(r"\.(docx?|pptx?|xlsx?|pdf|odt|rtf|tex|indd)$", title, re.IGNORECASE):
        return None
    return title


def _first_heading(pages: list[ParsedPage]) -> str | None:
    headings = [b for p in pages[:3] for b in p.blocks if b.kind == "heading"]
    if not headings:
        return None
    top = min(b.level or 99 for b in headings)
    return next(b.text for b in headings if (b.level or 99) == top)


# ------------------------------------------------------------------------------------- lines


def _read_lines(parsed_page, width: float, height: float) -> _PageLines:
    from docling_core.types.doc import CoordOrigin

    pl = _PageLines(width=width, height=height)
    for bitmap in getattr(parsed_page, "bitmap_resources", None) or []:
        rect = bitmap.rect
        if rect.coord_origin != CoordOrigin.TOPLEFT:
            rect = rect.to_top_left_origin(page_height=height)
        box = rect.to_bounding_box()
        left, right = max(0.0, min(box.l, box.r)), min(width, max(box.l, box.r))
        top, bottom = max(0.0, min(box.t, box.b)), min(height, max(box.t, box.b))
        if right > left and bottom > top:
            pl.pictures.append((left, top, right, bottom))
    pl.has_pictures = bool(pl.pictures)
    fonts: Counter[str] = Counter()
    for cell in parsed_page.textline_cells:
        text = clean_inline(cell.text)
        if not text:
            continue
        rect = cell.rect
        if rect.coord_origin != CoordOrigin.TOPLEFT:
            rect = rect.to_top_left_origin(page_height=height)
        box = rect.to_bounding_box()
        top, bottom = min(box.t, box.b), max(box.t, box.b)
        font = getattr(cell, "font_key", "") or getattr(cell, "font_name", "") or ""
        pl.lines.append(_Line(text=text, l=box.l, t=top, r=box.r, b=bottom, font=font))
        fonts[font] += len(text)
    if fonts:
        pl.body_font = fonts.most_common(1)[0][0]
    return pl


def _merge_rows(lines: list[_Line]) -> list[_Line]:
    """Consecutive cells on one baseline (left to right) become one row."""
    rows: list[_Line] = []
    for line in lines:
        prev = rows[-1] if rows else None
        if prev is not None and line.l >= prev.r - 1.0:
            overlap = min(prev.b, line.b) - max(prev.t, line.t)
            if overlap >= 0.5 * min(prev.size, line.size) > 0:
                prev.text = join_lines(prev.text, line.text)
                prev.parts.append(_Part(line.text, line.l, line.r))
                prev.r = max(prev.r, line.r)
                prev.t = min(prev.t, line.t)
                prev.b = max(prev.b, line.b)
                prev.size = max(prev.size, line.size)
                prev.cells += 1
                continue
        rows.append(_Line(line.text, line.l, line.t, line.r, line.b, line.font, size=line.size))
    return rows


def _find_tables(lines: list[_Line], body_h: float) -> list[_Line]:
    """Runs of aligned multi-cell rows become one table line each (see the module docstring)."""
    out: list[_Line] = []
    i = 0
    while i < len(lines):
        found = _table_run(lines, i, body_h)
        if found is None:
            out.append(lines[i])
            i += 1
            continue
        end, rows = found
        run = lines[i:end]
        header_font = run[0].font
        table = _Line(
            text=" ".join(" ".join(r) for r in rows),
            l=min(ln.l for ln in run),
            t=min(ln.t for ln in run),
            r=max(ln.r for ln in run),
            b=max(ln.b for ln in run),
            font=header_font,
            size=max(ln.size for ln in run),
            cells=max(len(r) for r in rows),
            table=rows,
        )
        out.append(table)
        i = end
    return out


def _table_run(lines: list[_Line], start: int, body_h: float) -> tuple[int, list[list[str]]] | None:
    first = lines[start]
    if len(first.parts) < 2 or first.table is not None or _TOC_ENTRY.search(first.text):
        return None
    tol = 0.8 * body_h
    starts = [part.l for part in first.parts]
    rows = [[part.text for part in first.parts]]
    full_rows = 1
    prev = first
    end = start + 1
    while end < len(lines):
        line = lines[end]
        gap = line.t - prev.b
        if gap < -0.3 * body_h or gap > 2.5 * body_h or _TOC_ENTRY.search(line.text) or line.table is not None:
            break
        if abs(line.size - first.size) > 0.35 * max(line.size, first.size):
            break
        columns = _columns_of(line.parts, starts, tol)
        if columns is None:
            break
        if len(line.parts) < 2 or len(line.parts) < len(starts) - 1:
            if gap > 0.6 * body_h or len(rows) < 1:
                break  # a lone line after the table, not a wrapped cell
            for column, part in zip(columns, line.parts):  # wrapped cells continue the row above
                rows[-1][column] = join_lines(rows[-1][column], part.text)
        else:
            row = [""] * len(starts)
            for column, part in zip(columns, line.parts):
                row[column] = part.text
            rows.append(row)
            full_rows += 1
        prev = line
        end += 1
    if full_rows < TABLE_MIN_ROWS:
        return None
    return end, rows


def _columns_of(parts: list[_Part], starts: list[float], tol: float) -> list[int] | None:
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


def _weighted_median(values: list[tuple[float, int]]) -> float:
    values = sorted(values)
    total = sum(w for _, w in values)
    acc = 0
    for value, weight in values:
        acc += weight
        if acc * 2 >= total:
            return value
    return values[-1][0] if values else 0.0


def _body_height(pages) -> float:
    weights: Counter[float] = Counter()
    for pl in pages:
        for line in pl.lines:
            if line.size > 0:
                weights[round(line.size * 4) / 4] += len(line.text)
    return _weighted_median(list(weights.items())) if weights else 10.0


def _font_shares(pages) -> dict[str, float]:
    chars: Counter[str] = Counter()
    for pl in pages:
        for line in pl.lines:
            chars[line.font] += len(line.text)
    total = sum(chars.values()) or 1
    return {font: n / total for font, n in chars.items()}


# ----------------------------------------------------------------------------------- headings


def _visual_length(text: str) -> float:
    """Characters, with CJK ideographs counted double (they are about twice as wide)."""
    return sum(2 if _CJK_CHAR.match(ch) else 1 for ch in text)


def _heading_kind(line: _Line, body_h: float, body_font: str | None, font_share: dict[str, float]) -> str | None:
    text = line.text
    if line.table is not None or line.figure is not None:
        return None
    if len(text) > 150 or len(text.split()) > 20 or not any(ch.isalpha() for ch in text):
        return None
    if _LIST_MARKER.match(text) and not _NUMBERED.match(text):
        return None
    if _CAPTION.match(text) or text[-1] in _NO_HEADING_END or line.cells > 2 or _TOC_ENTRY.search(text):
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


def _limit_font_heading_runs(lines: list[_Line]) -> None:
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


def _assign_levels(lines: list[_Line]) -> None:
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


# -------------------------------------------------------------------- running headers/footers


def _drop_running_lines(pages: dict[int, _PageLines], body_h: float) -> None:
    """Drop running headers/footers: see the module docstring. Besides lines on >= 50% of all text
    pages, a plain (non-heading) line also goes when it recurs on >= 3 pages and on >= 50% of the
    pages between its first and last occurrence (per-chapter headers such as "Chapter 3: Storage
    17")."""
    text_pages = sorted((i, pl) for i, pl in pages.items() if pl.lines)
    if len(text_pages) < REPEAT_MIN_PAGES:
        return
    threshold = max(REPEAT_MIN_PAGES, math.ceil(REPEAT_SHARE * len(text_pages)))

    def zone_lines(pl: _PageLines):
        ordered = sorted(pl.lines, key=lambda ln: ln.t)
        for line in ordered[:ZONE_LINES]:
            if line.t <= MARGIN_ZONE * pl.height:
                yield "top", line
        for line in ordered[-ZONE_LINES:]:
            if line.b >= (1 - MARGIN_ZONE) * pl.height:
                yield "bottom", line

    def key(zone: str, line: _Line) -> tuple[str, str]:
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
        pl.printed_number = _printed_number(dropped)
        pl.removed = [line.text for line in dropped]
        drop = {id(line) for line in dropped}
        pl.lines = [ln for ln in pl.lines if id(ln) not in drop]


# ------------------------------------------------------------------------------------- blocks


def _line_gap(pages, body_h: float) -> float:
    """The usual gap between two lines of one paragraph: the tight end (20th percentile) of the gaps
    between consecutive body-size rows (documents of one-line paragraphs have mostly paragraph
    gaps, so not the median). A row starts a new paragraph at a gap of 1.8x this (at most one body
    line height)."""
    gaps = []
    for pl in pages:
        for prev, line in zip(pl.lines, pl.lines[1:]):
            if abs(prev.size - body_h) > 0.2 * body_h or abs(line.size - body_h) > 0.2 * body_h:
                continue
            gap = line.t - prev.b
            if -0.2 * body_h <= gap <= 1.5 * body_h:
                gaps.append(gap)
    return sorted(gaps)[len(gaps) // 5] if gaps else 0.3 * body_h


def _space_above(prev: _Line | None, line: _Line, line_gap: float, body_h: float) -> bool:
    """Headings stand apart: first on the page (or in a new column), below a heading of the same
    size (a wrapped heading), or with more space above than between the lines of a paragraph. A
    tall formula or superscript line inside a paragraph has less."""
    if prev is None or line.t < prev.t - 0.5 * prev.size:
        return True
    if prev.heading is not None and abs(prev.size - line.size) < 0.5:
        return True
    return line.t - prev.b >= line_gap + 0.3 * body_h


def _continues(prev: _Line, line: _Line, gap_limit: float, right_edge: float, left_edge: float) -> bool:
    gap = line.t - prev.b
    if gap > gap_limit or gap < -0.5 * max(prev.size, line.size):
        return False
    if abs(line.size - prev.size) > 0.25 * max(prev.size, line.size):
        return False
    if line.font != prev.font and abs(line.size - prev.size) > 0.05 * max(prev.size, line.size):
        return False  # another font at another size: another block
    width = max(right_edge - left_edge, 1.0)
    if _SENTENCE_END.search(prev.text) and prev.r < right_edge - 0.15 * width:
        return False
    return True


def _blocks(pl: _PageLines, body_h: float, gap_limit: float) -> list[Block]:
    if not pl.lines:
        return []
    body = [ln for ln in pl.lines if ln.heading is None and ln.table is None and ln.figure is None]
    right_edge = max((ln.r for ln in body), default=pl.width)
    left_edge = min((ln.l for ln in body), default=0.0)

    blocks: list[Block] = []
    kind: str | None = None  # "heading" | "paragraph" | "list"
    parts: list[str] = []  # heading/paragraph: text so far; list: one entry per item
    level: int | None = None
    last: _Line | None = None
    item_left = 0.0
    cont_left: float | None = None

    def flush() -> None:
        nonlocal kind, parts
        if kind == "list":
            text = "\n".join(p for p in parts if p)
        else:
            text = parts[0] if parts else ""
        if text:
            blocks.append(Block(kind=kind, text=text, level=level if kind == "heading" else None))
        kind, parts = None, []

    for line in pl.lines:
        if line.table is not None or line.figure is not None:
            flush()
            if line.table is not None:
                block = table_block(line.table)
            else:
                block = Block("figure", line.text or FIGURE_TEXT)
            if block is not None:
                blocks.append(block)
            last = None
            continue
        if line.heading is not None:
            if (
                kind == "heading"
                and level == line.level
                and last is not None
                and last.heading is not None
                and 0 <= line.t - last.b <= gap_limit
                and abs(line.size - last.size) < 0.5
                and len(parts[0]) + len(line.text) <= 200
            ):
                parts[0] = join_lines(parts[0], line.text)  # a heading wrapped over two lines
            else:
                flush()
                kind, parts, level = "heading", [line.text], line.level
        elif _TOC_ENTRY.search(line.text):  # table-of-contents entries: one list line each
            if kind != "list":
                flush()
                kind, parts = "list", []
            parts.append(line.text)
            item_left, cont_left = line.l, None
        elif _LIST_MARKER.match(line.text):
            if not (kind == "list" and last is not None and line.t - last.b <= gap_limit * 1.5):
                flush()
                kind, parts = "list", []
            parts.append(line.text)
            item_left, cont_left = line.l, None
        elif (
            kind == "list"
            and last is not None
            and line.cells == 1
            and item_left + 1.0 < line.l < item_left + 4 * body_h
            and (cont_left is None or abs(line.l - cont_left) <= 3.0)
            and _continues(last, line, gap_limit, right_edge, left_edge)
        ):
            parts[-1] = join_lines(parts[-1], line.text)
            cont_left = line.l
        elif (
            kind == "paragraph"
            and last is not None
            and line.cells == 1
            and last.cells == 1
            and _continues(last, line, gap_limit, right_edge, left_edge)
        ):
            parts[0] = join_lines(parts[0], line.text)
        else:
            flush()
            kind, parts = "paragraph", [line.text]
        last = line
    flush()
    return blocks


# ------------------------------------------------------------------------------------- figures


def _place_figures(pl: _PageLines, body_h: float) -> None:
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
        figure = _Line(
            text=caption.text if caption is not None else FIGURE_TEXT,
            l=left, t=top, r=right, b=bottom, font="", size=body_h, figure=box,
        )
        at = next((i for i, ln in enumerate(pl.lines) if ln.t >= top), len(pl.lines))
        pl.lines.insert(at, figure)


# ------------------------------------------------------------------------------------- labels


def _printed_number(dropped: list[_Line]) -> str | None:
    """The page number printed in removed header/footer lines ("12", "Page 4 of 6", "iv")."""
    for line in dropped:
        match = _PAGE_NUMBER.match(line.text)
        if match:
            return match.group(1)
    for line in dropped:
        match = _EDGE_NUMBER.search(line.text)
        if match:
            return match.group(1) or match.group(2)
    return None


def _number_value(text: str | None) -> int | None:
    if not text:
        return None
    if text.isdigit():
        return int(text)
    values = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}
    total, prev = 0, 0
    for ch in reversed(text.lower()):
        value = values.get(ch)
        if value is None:
            return None
        total += -value if value < prev else value
        prev = max(prev, value)
    return total


def _add_printed_labels(pages: dict[int, _PageLines], labels: list[str | None]) -> None:
    """Keep a printed page number only where the PDF has no labels and a neighbouring page's number
    is one less or one more (so a stray number in a header is not taken for the page number)."""
    if any(labels):
        for pl in pages.values():
            pl.printed_number = None
        return
    values = {i: _number_value(pl.printed_number) for i, pl in pages.items()}
    for index, pl in pages.items():
        value = values[index]
        if value is None or not (values.get(index - 1) == value - 1 or values.get(index + 1) == value + 1):
            pl.printed_number = None


# ------------------------------------------------------------------------------------------ OCR


def _needs_ocr(pl: _PageLines) -> bool:
    """No (or almost no) text layer, and a bitmap as large as a scanned page."""
    if sum(len(line.text) for line in pl.lines) >= OCR_MAX_CHARS:
        return False
    area = pl.width * pl.height or 1.0
    return any((r - l) * (b - t) >= SCAN_SHARE * area for l, t, r, b in pl.pictures)


def _ocr_pages(pdf, pages: dict[int, _PageLines], options: ParseOptions, warnings: list[str]) -> None:
    """Replace the lines of scanned pages with OCR lines (in PDF points, top-left origin)."""
    from kb_assets.parsing.ocr import ocr_lines, ocr_unavailable

    todo = [i for i, pl in sorted(pages.items()) if _needs_ocr(pl)]
    if not todo:
        return
    reason = "OCR is switched off" if not options.ocr else ocr_unavailable(options.ocr_engine, options.ocr_languages, options.tessdata_dir)
    if reason:
        warnings.append(f"pages {', '.join(str(i + 1) for i in todo)}: no text layer and {reason}")
        return
    for index in todo:
        pl = pages[index]
        scale = _safe_scale(pl.width, pl.height, OCR_DPI / 72)
        image = pdf[index].render(scale=scale, grayscale=True).to_pil()
        lines = []
        for cell in ocr_lines(image, options.ocr_engine, options.ocr_languages, options.tessdata_dir):
            lines.append(_Line(cell.text, cell.l / scale, cell.t / scale, cell.r / scale, cell.b / scale, "ocr"))
        pl.lines = lines
        pl.body_font = "ocr"
        pl.ocr = True


def _ocr_parser(options: ParseOptions) -> tuple[str, str]:
    """(parser, mode) of a page read by OCR."""
    from kb_assets.parsing.ocr import page_mode

    return options.ocr_engine, page_mode(options.ocr_engine)


# --------------------------------------------------------------------------------------- images


def _safe_scale(width: float, height: float, scale: float) -> float:
    """The scale, lowered so that the render stays under MAX_RENDER_PIXELS (giant page boxes)."""
    pixels = max(width, 1.0) * max(height, 1.0) * scale * scale
    if pixels > MAX_RENDER_PIXELS:
        scale *= math.sqrt(MAX_RENDER_PIXELS / pixels)
    return scale


def png_bytes(image) -> bytes:
    from io import BytesIO

    buffer = BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def _figure_boxes(pages: dict[int, _PageLines]) -> dict[int, list[tuple[float, float, float, float]]]:
    """Per page, the boxes of its figure lines in flow order (one figure block each)."""
    return {i: [ln.figure for ln in pl.lines if ln.figure is not None] for i, pl in pages.items()}


def _render_images(
    pdf, parsed: list[ParsedPage], boxes: dict[int, list[tuple[float, float, float, float]]], color: set[int]
) -> None:
    """Page renders (72 dpi) and figure crops (144 dpi) as PNG, into the parsed pages and blocks.
    Pages without pictures (``color``: the pages with some) are rendered in grayscale: PNG encoding
    of a grayscale page costs a third of an RGB one (measured 16 vs 40 ms a page) and text loses
    nothing but the colour of links."""
    import dataclasses

    for page in parsed:
        pdf_page = pdf[page.page_index]
        width, height = pdf_page.get_size()
        scale = _safe_scale(width, height, PAGE_IMAGE_SCALE)
        grayscale = page.page_index not in color
        page.image_png = png_bytes(pdf_page.render(scale=scale, grayscale=grayscale).to_pil())
        figures = iter(boxes.get(page.page_index, []))
        for n, block in enumerate(page.blocks):
            if block.kind != "figure":
                continue
            box = next(figures, None)
            if box is None:
                break
            left, top, right, bottom = box
            crop = (max(left, 0.0), max(height - bottom, 0.0), max(width - right, 0.0), max(top, 0.0))
            crop_scale = _safe_scale(right - left, bottom - top, FIGURE_IMAGE_SCALE)
            image = pdf_page.render(scale=crop_scale, crop=crop).to_pil()
            page.blocks[n] = dataclasses.replace(block, image_png=png_bytes(image))


# --------------------------------------------------------------------------- layout-model path


def _parse_layout(path: Path, name: str, facts: _Facts, pipeline: PdfPipeline, options: ParseOptions) -> ParsedDocument:
    """docling's standard pipeline (layout model; TableFormer when present): its body items, page by
    page (running headers/footers are docling's furniture layer, left out), pictures as figures with
    crops; pages without text and with a scan-sized image are OCRed as on the native path."""
    import pypdfium2 as pdfium
    from docling_core.types.doc import ContentLayer

    from kb_assets.parsing.converter import get_layout_converter

    converter = get_layout_converter(pipeline)
    blocks: dict[int, list[Block]] = defaultdict(list)
    boxes: dict[int, list[tuple[float, float, float, float]]] = defaultdict(list)
    for start in range(1, facts.page_count + 1, PAGES_PER_BATCH):
        end = min(start + PAGES_PER_BATCH - 1, facts.page_count)
        result = convert(path, name, ".pdf", page_range=(start, end), converter=converter)
        walker = _layout_walker(result.document, {ContentLayer.BODY})
        walker.walk(result.document.body)
        page = start - 1
        for (block, page_no, _layer), box in zip(walker.out, walker.boxes):
            page = page_no - 1 if page_no else page  # items without provenance stay with the page before
            blocks[page].append(block)
            if block.kind == "figure" and box is not None:
                boxes[page].append(box)
        del result

    warnings: list[str] = []
    pdf = pdfium.PdfDocument(str(path))
    try:
        scanned: dict[int, _PageLines] = {}
        for index in range(facts.page_count):
            if not blocks.get(index):
                pl = _pdfium_scan_page(pdf, index)
                if pl is not None:
                    scanned[index] = pl
        _ocr_pages(pdf, scanned, options, warnings)
        ocr_blocks = _layout_pages({i: pl for i, pl in scanned.items() if pl.ocr}, {})
        parsed: list[ParsedPage] = []
        for index in range(facts.page_count):
            label = facts.labels[index]
            if index in ocr_blocks:
                parsed.append(ParsedPage(index, ocr_blocks[index], *_ocr_parser(options), label))
            else:
                parsed.append(ParsedPage(index, blocks.get(index, []), PARSER, MODE_LAYOUT, label))
        if options.images:
            _render_images(pdf, parsed, dict(boxes), set(boxes) | set(scanned))
    finally:
        pdf.close()
    title = facts.title or _first_heading(parsed) or Path(name).stem
    return ParsedDocument(title=title, mime="application/pdf", source_kind="pdf", pages=parsed, warnings=warnings)


def _pdfium_scan_page(pdf, index: int) -> _PageLines | None:
    """A page without a text layer, with its image boxes (for the OCR decision), or None."""
    import pypdfium2.raw as pdfium_c

    page = pdf[index]
    if page.get_textpage().count_chars() >= OCR_MAX_CHARS:
        return None
    width, height = page.get_size()
    pl = _PageLines(width=width, height=height)
    for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=2):
        left, bottom, right, top = obj.get_pos()
        pl.pictures.append((left, height - top, right, height - bottom))
    pl.has_pictures = bool(pl.pictures)
    return pl


def _layout_walker(doc, layers):
    """structured._Walker, with pictures as figure blocks and every block's box (top-left origin)."""
    from docling_core.types.doc import PictureItem

    from kb_assets.parsing.structured import _Walker

    class LayoutWalker(_Walker):
        def __init__(self, doc, layers) -> None:
            super().__init__(doc, layers)
            self.boxes: list[tuple[float, float, float, float] | None] = []

        def _emit(self, block, item) -> None:
            before = len(self.out)
            super()._emit(block, item)
            if len(self.out) > before:
                self.boxes.append(_item_box(self.doc, item))

        def visit(self, item) -> None:
            if isinstance(item, PictureItem) and item.content_layer in self.layers:
                caption = clean_inline(item.caption_text(self.doc))
                self._emit(Block("figure", caption or FIGURE_TEXT), item)
                return
            super().visit(item)

    return LayoutWalker(doc, layers)


def _item_box(doc, item) -> tuple[float, float, float, float] | None:
    prov = getattr(item, "prov", None)
    if not prov:
        return None
    page = doc.pages.get(prov[0].page_no)
    if page is None or page.size is None:
        return None
    box = prov[0].bbox.to_top_left_origin(page_height=page.size.height)
    return (box.l, min(box.t, box.b), box.r, max(box.t, box.b))
