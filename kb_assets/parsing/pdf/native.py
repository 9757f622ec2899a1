"""The native PDF path (the default, model-free): docling's ``NativePdfPipeline`` (docling-parse,
lines-only backend: converter.py) gives each page's text-line cells and bitmap boxes, pdfium the text
past the page's edges that docling-parse drops (overflow.py), our layout pass
(layout/) lays them out, scanned pages are OCRed (scans.py), and pypdfium2 renders the figure crops
(render.py; page images are rendered apart from the parse).

Modes: ``docling-native-pdf`` (parser ``docling``); ``ocr-<engine>`` for OCRed pages;
``docling-native-pdf-no-text`` for a page that needed OCR but could not get it;
``docling-native-pdf-failed`` for a page docling-parse could not read (with a warning).

What a cell carries: text, bounding box and the PDF font resource key (``/F1``...), from
``ConversionResult.pages[i].parsed_page.textline_cells``. Page labels: the PDF's own (facts.py), else
the page number printed in a removed header/footer (layout/labels.py).
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from kb_assets.parsing.converter import convert, pdf_page_batches
from kb_assets.parsing.layout import (
    Line,
    PageLines,
    add_printed_labels,
    figure_boxes,
    layout_pages,
)
from kb_assets.parsing.model import ParsedDocument, ParsedPage, SourceFile, clean_inline
from kb_assets.parsing.pdf.facts import PdfFacts, document_title
from kb_assets.parsing.pdf.overflow import recover_overflow
from kb_assets.parsing.pdf.scans import needs_ocr, ocr_pages, ocr_parser
from kb_assets.parsing.pool import drop_pool, parse_pool
from kb_assets.parsing.render import render_figure_crops

PARSER = "docling"
MODE = "docling-native-pdf"
MODE_FAILED = "docling-native-pdf-failed"  # docling-parse could not read this page
MODE_NO_TEXT = "docling-native-pdf-no-text"  # no text layer and no OCR available
POOL_MIN_PAGES = 16  # a PDF this long or longer is converted by the parsing pool (when there is one)


def parse_native(file: SourceFile, facts: PdfFacts, warnings: list[str]) -> ParsedDocument:
    """The whole PDF on the native path; ``warnings``: those so far (the pipeline choice), added to."""
    import pypdfium2 as pdfium

    path, name, options = file.path, file.name, file.options
    pages = _native_lines(path, name, facts.page_count, warnings, options.workers)
    pdf = pdfium.PdfDocument(str(path))
    try:
        ocr_pages(pdf, pages, options, warnings)
        recover_overflow(pdf, pages, warnings)
        blocks = layout_pages(pages, facts.outline)
        add_printed_labels(pages, facts.labels)
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
                parsed.append(
                    ParsedPage(
                        index,
                        page_blocks,
                        *ocr_parser(options),
                        label,
                        removed=removed,
                        width=pl.width,
                        height=pl.height,
                    )
                )
                continue
            mode = MODE
            if not page_blocks and needs_ocr(pl):
                mode = MODE_NO_TEXT
            parsed.append(
                ParsedPage(index, page_blocks, PARSER, mode, label, removed=removed, width=pl.width, height=pl.height)
            )
        if options.images:
            render_figure_crops(pdf, parsed, figure_boxes(pages))
    finally:
        pdf.close()

    title = document_title(facts, parsed, name)
    return ParsedDocument(title=title, mime=file.mime, source_kind=file.source_kind, pages=parsed, warnings=warnings)


def _native_lines(
    path: Path, name: str, page_count: int, warnings: list[str], workers: int = 1
) -> dict[int, PageLines]:
    """Every page's lines. docling keeps every parsed page (all its cells as pydantic objects) until
    the conversion ends: convert in batches and keep only the light line records. With ``workers``
    > 1 and enough pages the batches are converted by the parsing pool (pool.py), one batch a process
    at a time; if the pool breaks, in this process."""
    batches = pdf_page_batches(page_count, parts=workers if page_count >= POOL_MIN_PAGES else 1)
    pool = parse_pool(workers) if len(batches) > 1 else None
    if pool is not None:
        try:
            converted = list(pool.map(convert_lines, [(path, name, page_count, batch) for batch in batches]))
        except BrokenProcessPool:
            drop_pool()
            warnings.append("the parsing processes stopped: parsed in one process")
        else:
            pages: dict[int, PageLines] = {}
            for batch_pages, batch_warnings in converted:
                pages.update(batch_pages)
                warnings.extend(w for w in batch_warnings if w not in warnings)
            return pages
    pages = {}
    for batch in batches:
        batch_pages, batch_warnings = convert_lines((path, name, page_count, batch))
        pages.update(batch_pages)
        warnings.extend(w for w in batch_warnings if w not in warnings)
    return pages


def convert_lines(job: tuple[Path, str, int, tuple[int, int]]) -> tuple[dict[int, PageLines], list[str]]:
    """The lines of a page range (1-based, inclusive) of a PDF, and warnings (in a pool worker or here)."""
    path, name, page_count, (start, end) = job
    warnings: list[str] = []
    pages: dict[int, PageLines] = {}
    result = convert(path, name, ".pdf", page_range=(start, end))
    if result.input.page_count and result.input.page_count != page_count:
        warnings.append(f"page count: pdfium reads {page_count} pages, docling {result.input.page_count}")
    for page in result.pages:
        if page.parsed_page is not None and page.size is not None:
            pages[page.page_no - 1] = _read_lines(page.parsed_page, page.size.width, page.size.height)
    return pages, warnings


def _read_lines(parsed_page, width: float, height: float) -> PageLines:
    """One page's text-line cells and bitmap boxes (top-left origin, PDF points); its body font is
    its most used font key."""
    from docling_core.types.doc import CoordOrigin

    pl = PageLines(width=width, height=height)
    for bitmap in getattr(parsed_page, "bitmap_resources", None) or []:
        rect = bitmap.rect
        if rect.coord_origin != CoordOrigin.TOPLEFT:
            rect = rect.to_top_left_origin(page_height=height)
        box = rect.to_bounding_box()
        left, right = max(0.0, min(box.l, box.r)), min(width, max(box.l, box.r))
        top, bottom = max(0.0, min(box.t, box.b)), min(height, max(box.t, box.b))
        if right > left and bottom > top:
            pl.pictures.append((left, top, right, bottom))
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
        pl.lines.append(Line(text=text, l=box.l, t=top, r=box.r, b=bottom, font=font))
        fonts[font] += len(text)
    if fonts:
        pl.body_font = fonts.most_common(1)[0][0]
    return pl
