"""OCR of scanned PDF pages: which pages need it, and their OCR lines for the layout pass.

A page needs OCR when it has (almost) no text layer (< ``OCR_MAX_CHARS`` characters) and a bitmap as
large as the page (``SCAN_SHARE`` of its area). Such a page is rendered at 300 dpi (grayscale), read
by the engine of ``KB_OCR_ENGINE`` (ocr.py) and its lines replace the page's, in PDF points, so the
layout pass reads them like text-layer lines; the page's parser is the engine, its mode
``ocr-<engine>``. When OCR is off or the engine cannot run, the pages keep no text and a warning
names them and the reason.
"""

from __future__ import annotations

from kb_assets.parsing.layout import SCAN_SHARE, Line, PageLines
from kb_assets.parsing.options import OCR_DPI
from kb_assets.parsing.render import safe_scale
from kb_assets.settings import ParseOptions

OCR_MAX_CHARS = 20  # a page with fewer text-layer characters than this and a scan-sized bitmap is OCRed


def needs_ocr(pl: PageLines) -> bool:
    """No (or almost no) text layer, and a bitmap as large as a scanned page."""
    if sum(len(line.text) for line in pl.lines) >= OCR_MAX_CHARS:
        return False
    area = pl.width * pl.height or 1.0
    return any((r - l) * (b - t) >= SCAN_SHARE * area for l, t, r, b in pl.pictures)  # noqa: E741 (l, t, r, b: a box's edges, as docling names them)


def ocr_pages(pdf, pages: dict[int, PageLines], options: ParseOptions, warnings: list[str]) -> None:
    """Replace the lines of scanned pages with OCR lines (in PDF points, top-left origin)."""
    from kb_assets.parsing.ocr import ocr_lines, ocr_unavailable

    todo = [i for i, pl in sorted(pages.items()) if needs_ocr(pl)]
    if not todo:
        return
    reason = (
        "OCR is switched off"
        if not options.ocr
        else ocr_unavailable(options.ocr_engine, options.ocr_languages, options.tessdata_dir)
    )
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


def ocr_parser(options: ParseOptions) -> tuple[str, str]:
    """(parser, mode) of a page read by OCR."""
    from kb_assets.parsing.ocr import page_mode

    return options.ocr_engine, page_mode(options.ocr_engine)


def scan_page(pdf, index: int) -> PageLines | None:
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
    return pl
