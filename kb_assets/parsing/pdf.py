"""PDF: physical pages from docling's model-free ``NativePdfPipeline``, with a small layout pass.

The standard docling PDF pipeline needs layout and table models from a model hub, which are not
available here, so every page records ``mode="docling-native-pdf"``: docling-parse text lines, then
the heuristics below (not a layout model).

What the heuristics use: the text-line cells docling-parse reports per page
(``ConversionResult.pages[i].parsed_page.textline_cells``): text, bounding box and the PDF font
resource key (``/F1``...). docling-parse names no real font (no "Bold"), so "bold" is approximated
by "a font other than the page's body font".

- Lines on one baseline are merged into one row (docling-parse splits a line at wide gaps);
  rows that were several cells (table-like) never merge into paragraphs.
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
- Headings from the PDF outline (bookmarks, via pypdfium2) win: a line whose text equals a
  bookmark title on the bookmark's page is a heading at the bookmark's depth.
- PDFs are converted ``PAGES_PER_BATCH`` pages at a time (docling holds every page's cell objects
  until a conversion ends: ~4.5 MB a page with word cells, less with lines only).
- Not done: tables (table rows come out as paragraph text, one row per line group), figures and
  captions, OCR of scanned pages (a page without a text layer is recorded as
  ``docling-native-pdf-no-text``), multi-column reading order beyond the parser's content order.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from kb_assets.parsing.converter import convert
from kb_assets.parsing.model import (
    Block,
    DocumentParseError,
    ParsedDocument,
    ParsedPage,
    clean_inline,
    join_lines,
)

PARSER = "docling"
MODE = "docling-native-pdf"
MODE_FAILED = "docling-native-pdf-failed"  # docling-parse could not read this page
MODE_NO_TEXT = "docling-native-pdf-no-text"  # no text layer (scanned page: would need OCR)

HEADING_SIZE_RATIO = 1.12
MARGIN_ZONE = 0.12  # fraction of the page height searched for running headers/footers
ZONE_LINES = 3
REPEAT_SHARE = 0.5
REPEAT_MIN_PAGES = 3
PAGES_PER_BATCH = 50

_NUMBERED = re.compile(r"^(\d{1,2}(?:\.\d{1,2})*)\.?\s+(?=[^\W\d_])")
_LIST_MARKER = re.compile(
    r"^(?:[\u2022\u25e6\u25aa\u25ab\u25cf\u25cb\u25a0\u25a1\u27a2\u25ba\u25b8\u2023\u2043\u2219\u00b7]\s*(?=\S)"
    r"|[*\-\u2013\u2014]\s+(?=\S)|\(?\d{1,2}[.)]\s+|\(?[a-z][.)]\s+)"
)
_CAPTION = re.compile(r"^(?:fig\.|figure|table|tab\.|source|note|图|表)\s*[\d:.\s]", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?:。！？：]$")
_DIGITS = re.compile(r"\d+")
_ROMAN = re.compile(r"\b[ivxlc]+\b")
_TOC_ENTRY = re.compile(r"(?:\.\s?){4,}\s*[\divxlcIVXLC]+$")  # "2.1 Storage . . . . . 14"
_CJK_CHAR = re.compile("[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
_NO_HEADING_END = ".,;。，；、"
_DANGLING_END = re.compile(r"\b(?:a|an|the|and|or|of|to|in|for|with|by|from|as|at|is|are)$", re.IGNORECASE)


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

    def __post_init__(self) -> None:
        if not self.size:
            self.size = self.b - self.t


@dataclass
class _PageLines:
    width: float
    height: float
    lines: list[_Line] = field(default_factory=list)
    body_font: str | None = None
    has_pictures: bool = False


# ------------------------------------------------------------------------------------- entry


def parse_pdf(path: Path, name: str) -> ParsedDocument:
    page_count, meta_title, labels, outline = _pdfium_facts(path, name)
    warnings: list[str] = []
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

    body_h = _body_height(pages.values())
    _drop_running_lines(pages, body_h)  # on the cells: a page number is its own cell
    for pl in pages.values():
        pl.lines = _merge_rows(pl.lines)
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
            if level is not None:
                line.heading, line.level = "outline", level
    _assign_levels([ln for pl in pages.values() for ln in pl.lines])
    gap = min(max(line_gap * 1.8, line_gap + 0.45 * body_h), 1.0 * body_h)

    parsed: list[ParsedPage] = []
    for index in range(page_count):
        label = labels[index] if index < len(labels) else None
        pl = pages.get(index)
        if pl is None:
            parsed.append(ParsedPage(index, [], PARSER, MODE_FAILED, label))
            warnings.append(f"page {index + 1}: docling-parse could not read the page")
            continue
        blocks = _blocks(pl, body_h, gap)
        mode = MODE if blocks or not pl.has_pictures else MODE_NO_TEXT
        if mode == MODE_NO_TEXT:
            warnings.append(f"page {index + 1}: images but no text layer (OCR is not available)")
        parsed.append(ParsedPage(index, blocks, PARSER, mode, label))

    title = meta_title or _first_heading(parsed) or Path(name).stem
    return ParsedDocument(title=title, mime="application/pdf", source_kind="pdf", pages=parsed, warnings=warnings)


def _pdfium_facts(path: Path, name: str) -> tuple[int, str | None, list[str | None], dict[int, dict[str, int]]]:
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
        return count, title, labels, _outline(pdf)
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
    pl.has_pictures = bool(getattr(parsed_page, "bitmap_resources", None))
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
                prev.r = max(prev.r, line.r)
                prev.t = min(prev.t, line.t)
                prev.b = max(prev.b, line.b)
                prev.size = max(prev.size, line.size)
                prev.cells += 1
                continue
        rows.append(_Line(line.text, line.l, line.t, line.r, line.b, line.font, size=line.size))
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
        drop = {id(line) for zone, line in zone_lines(pl) if key(zone, line) in repeated}
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
    body = [ln for ln in pl.lines if ln.heading is None]
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
