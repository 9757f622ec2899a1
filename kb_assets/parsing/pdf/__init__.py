"""PDF: physical pages, read by docling and our layout pass, OCR where the text layer is missing.

``parse_pdf`` reads the facts first (facts.py: page count against ``KB_PARSE_MAX_PAGES``, title,
page labels, outline; refusals before anything that depends on the machine), then picks the
pipeline (``choose_pdf_pipeline``, layout_model.py):

- where docling's layout model is on disk (``DOCLING_ARTIFACTS_PATH``, or docling's model cache)
  and its Python dependencies import, docling's standard pipeline reads the pages (mode
  ``docling-layout``, layout_model.py); if it cannot start or fails, the document falls back to the
  native path with a warning naming the cause;
- otherwise (this project's default, offline) the native path (native.py): docling's model-free
  ``NativePdfPipeline`` gives text-line cells and our layout pass (layout/) lays them out (mode
  ``docling-native-pdf``, not a layout model).

On both paths, pages without a text layer are OCRed (scans.py, with ocr.py's ``KB_OCR_ENGINE``:
mode ``ocr-rapidocr``, parser ``rapidocr`` by default, or ``ocr-tesseract``; the OCR lines go through
the same layout pass); a page that needed OCR but could not get it is ``docling-native-pdf-no-text``,
one docling-parse could not read ``docling-native-pdf-failed``. Every figure is cropped at 144 dpi
into ``Block.image_png`` (render.py; ``ParseOptions.images``); page images are rendered apart from the
parse (``render.render_page_images``: the ``page_images`` asset, or on first request).
"""

from __future__ import annotations

from kb_assets.parsing.model import ParsedDocument, SourceFile
from kb_assets.parsing.pdf.facts import read_facts
from kb_assets.parsing.pdf.layout_model import (
    choose_pdf_pipeline,
    parse_with_layout_model,
)
from kb_assets.parsing.pdf.native import parse_native

__all__ = ["parse_pdf"]


def parse_pdf(file: SourceFile) -> ParsedDocument:
    """Physical pages of a PDF (the reader registered for ``.pdf``): see the module docstring."""
    options = file.options
    facts = read_facts(file.path, file.name, options.max_pages)
    warnings: list[str] = []
    pipeline = choose_pdf_pipeline(options.docling_artifacts_path)
    if pipeline.kind == "layout":
        try:
            return parse_with_layout_model(file, facts, pipeline)
        except Exception as exc:  # the model pipeline could not start or run: native path, said so
            warnings.append(
                f"docling layout pipeline failed ({type(exc).__name__}: {exc}); "
                f"parsed with the model-free native pipeline instead"
            )
    elif options.docling_artifacts_path is not None:
        warnings.append(pipeline.reason)
    return parse_native(file, facts, warnings)
