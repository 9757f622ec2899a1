"""PDF: physical pages, read by docling and a small layout pass of our own, OCR where text is missing.

Which pipeline (``choose_pdf_pipeline`` in converter.py): where docling's layout model is on disk
(``DOCLING_ARTIFACTS_PATH``, or docling's model cache) and its Python dependencies import, docling's
standard pipeline reads the pages (mode ``docling-layout``, see ``_parse_layout``); if that pipeline
cannot start or fails, the document falls back to the native path below with a warning naming the
cause. Otherwise (this project's default, offline) docling's model-free ``NativePdfPipeline`` gives
text-line cells and our layout pass lays them out (mode ``docling-native-pdf``, not a layout
model). Pages without a text layer are OCRed (ocr.py: ``KB_OCR_ENGINE``, mode ``ocr-rapidocr``, parser
``rapidocr`` by default, or ``ocr-tesseract``; the OCR lines go through the same layout pass); a page
that needed OCR but could not get it is ``docling-native-pdf-no-text``, one docling-parse could not
read ``docling-native-pdf-failed``.

The native path hands the layout pass (layout/: rows, tables, headings, running headers/footers,
figures, paragraphs, lists, printed page labels) the text-line cells docling-parse reports per page
(``ConversionResult.pages[i].parsed_page.textline_cells``: text, bounding box and the PDF font
resource key ``/F1``...), the bitmap boxes, the PDF's own page labels (``/PageLabels``, via
pypdfium2) and its outline (bookmarks, via pypdfium2) for headings.

- Page images: every page rendered at 72 dpi (PNG) into ``ParsedPage.image_png``
  (``ParseOptions.images``).
- PDFs are converted ``PAGES_PER_BATCH`` pages at a time (docling holds every page's cell objects
  until a conversion ends: ~4.5 MB a page with word cells, less with lines only).
- Not done: tables inside the layout-model path without TableFormer.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from kb_assets.parsing.converter import PdfPipeline, choose_pdf_pipeline, convert
from kb_assets.parsing.docling_blocks import DoclingWalker
from kb_assets.parsing.layout import (
    FIGURE_TEXT,
    SCAN_SHARE,
    Line,
    PageLines,
    add_printed_labels,
    figure_boxes,
    layout_pages,
)
from kb_assets.parsing.model import (
    Block,
    DocumentParseError,
    ParsedDocument,
    ParsedPage,
    clean_inline,
)
from kb_assets.parsing.options import OCR_DPI, ParseOptions
from kb_assets.parsing.render import render_pdf_images, safe_scale

PARSER = "docling"
MODE = "docling-native-pdf"
MODE_LAYOUT = "docling-layout"
MODE_FAILED = "docling-native-pdf-failed"  # docling-parse could not read this page
MODE_NO_TEXT = "docling-native-pdf-no-text"  # no text layer and no OCR available

PAGES_PER_BATCH = 50
OCR_MAX_CHARS = 20  # a page with fewer text-layer characters than this and a scan-sized bitmap is OCRed


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
                parsed.append(ParsedPage(index, page_blocks, *_ocr_parser(options), label, removed=removed))
                continue
            mode = MODE
            if not page_blocks and _needs_ocr(pl):
                mode = MODE_NO_TEXT
            parsed.append(ParsedPage(index, page_blocks, PARSER, mode, label, removed=removed))
        if options.images:
            color = {i for i, pl in pages.items() if pl.pictures}
            render_pdf_images(pdf, parsed, figure_boxes(pages), color)
    finally:
        pdf.close()

    title = facts.title or _first_heading(parsed) or Path(name).stem
    return ParsedDocument(title=title, mime="application/pdf", source_kind="pdf", pages=parsed, warnings=warnings)


def _native_lines(path: Path, name: str, page_count: int, warnings: list[str]) -> dict[int, PageLines]:
    # docling keeps every parsed page (all its cells as pydantic objects) until the
    # conversion ends: convert in batches and keep only the light line records
    pages: dict[int, PageLines] = {}
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


def _read_lines(parsed_page, width: float, height: float) -> PageLines:
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
        pl.lines.append(Line(text=text, l=box.l, t=top, r=box.r, b=bottom, font=font))
        fonts[font] += len(text)
    if fonts:
        pl.body_font = fonts.most_common(1)[0][0]
    return pl



# ------------------------------------------------------------------------------------------ OCR


def _needs_ocr(pl: PageLines) -> bool:
    """No (or almost no) text layer, and a bitmap as large as a scanned page."""
    if sum(len(line.text) for line in pl.lines) >= OCR_MAX_CHARS:
        return False
    area = pl.width * pl.height or 1.0
    return any((r - l) * (b - t) >= SCAN_SHARE * area for l, t, r, b in pl.pictures)


def _ocr_pages(pdf, pages: dict[int, PageLines], options: ParseOptions, warnings: list[str]) -> None:
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
        scale = safe_scale(pl.width, pl.height, OCR_DPI / 72)
        image = pdf[index].render(scale=scale, grayscale=True).to_pil()
        lines = []
        for cell in ocr_lines(image, options.ocr_engine, options.ocr_languages, options.tessdata_dir):
            lines.append(Line(cell.text, cell.l / scale, cell.t / scale, cell.r / scale, cell.b / scale, "ocr"))
        pl.lines = lines
        pl.body_font = "ocr"
        pl.ocr = True


def _ocr_parser(options: ParseOptions) -> tuple[str, str]:
    """(parser, mode) of a page read by OCR."""
    from kb_assets.parsing.ocr import page_mode

    return options.ocr_engine, page_mode(options.ocr_engine)



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
        # pictures are figures with or without a caption, and keep their box for the crop
        walker = DoclingWalker(result.document, {ContentLayer.BODY}, uncaptioned_figure=FIGURE_TEXT)
        walker.walk(result.document.body)
        page = start - 1
        for (block, page_no, _layer), item in zip(walker.out, walker.items):
            page = page_no - 1 if page_no else page  # items without provenance stay with the page before
            blocks[page].append(block)
            box = _item_box(result.document, item) if block.kind == "figure" else None
            if box is not None:
                boxes[page].append(box)
        del result

    warnings: list[str] = []
    pdf = pdfium.PdfDocument(str(path))
    try:
        scanned: dict[int, PageLines] = {}
        for index in range(facts.page_count):
            if not blocks.get(index):
                pl = _pdfium_scan_page(pdf, index)
                if pl is not None:
                    scanned[index] = pl
        _ocr_pages(pdf, scanned, options, warnings)
        ocr_blocks = layout_pages({i: pl for i, pl in scanned.items() if pl.ocr}, {})
        parsed: list[ParsedPage] = []
        for index in range(facts.page_count):
            label = facts.labels[index]
            if index in ocr_blocks:
                parsed.append(ParsedPage(index, ocr_blocks[index], *_ocr_parser(options), label))
            else:
                parsed.append(ParsedPage(index, blocks.get(index, []), PARSER, MODE_LAYOUT, label))
        if options.images:
            render_pdf_images(pdf, parsed, dict(boxes), set(boxes) | set(scanned))
    finally:
        pdf.close()
    title = facts.title or _first_heading(parsed) or Path(name).stem
    return ParsedDocument(title=title, mime="application/pdf", source_kind="pdf", pages=parsed, warnings=warnings)


def _pdfium_scan_page(pdf, index: int) -> PageLines | None:
    """A page without a text layer, with its image boxes (for the OCR decision), or None."""
    import pypdfium2.raw as pdfium_c

    page = pdf[index]
    if page.get_textpage().count_chars() >= OCR_MAX_CHARS:
        return None
    width, height = page.get_size()
    pl = PageLines(width=width, height=height)
    for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=2):
        left, bottom, right, top = obj.get_pos()
        pl.pictures.append((left, height - top, right, height - bottom))
    pl.has_pictures = bool(pl.pictures)
    return pl


def _item_box(doc, item) -> tuple[float, float, float, float] | None:
    prov = getattr(item, "prov", None)
    if not prov:
        return None
    page = doc.pages.get(prov[0].page_no)
    if page is None or page.size is None:
        return None
    box = prov[0].bbox.to_top_left_origin(page_height=page.size.height)
    return (box.l, min(box.t, box.b), box.r, max(box.t, box.b))
