"""One docling ``DocumentConverter`` per process, built lazily (construction and pipeline set-up
are not free), with docling's log noise turned down to warnings, and ``convert``, the one way this
package runs docling (errors become ``DocumentParseError``).

PDFs go through docling's model-free ``NativePdfPipeline`` here; the layout-model path builds its own
converter (pdf/layout_model.py). Page images are not rendered by docling (render.py renders them
with pypdfium2). PDFs are converted ``PDF_PAGES_PER_BATCH`` pages at a time (``pdf_page_batches``):
docling holds every page's cell objects until a conversion ends (~4.5 MB a page with word cells,
less with lines only).

The PDF backend is docling's threaded docling-parse backend with one change: pages materialize
only their text-line cells (and bitmap boxes), not the word cells docling asks for and the native
pipeline never uses. Word cells are most of docling-parse's Python-side cost (measured: ~2x pages/s
and far less memory). It relies on two private attributes of docling 2.143's page backend
(``_result``, ``_seg_page``); if they are missing it falls back to the stock page.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from docling.datamodel.base_models import DocumentStream
    from docling.datamodel.document import ConversionResult
    from docling.document_converter import DocumentConverter

_LOCK = threading.Lock()
_CONVERT_LOCK = threading.Lock()  # one conversion at a time: pipelines are shared, not thread-safe
_CONVERTER: DocumentConverter | None = None

PDF_PAGES_PER_BATCH = 50  # docling holds every page's cell objects until a conversion ends

_NOISY_LOGGERS = ("docling", "docling_core", "docling_parse", "docling_ibm_models", "RapidOCR")


def quiet_docling_logs(level: int = logging.WARNING) -> None:
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(level)


def pdf_page_batches(page_count: int, parts: int = 1) -> list[tuple[int, int]]:
    """1-based inclusive page ranges covering a PDF: at most ``PDF_PAGES_PER_BATCH`` pages each, and at
    least ``parts`` ranges (one for each parsing process) when there are pages enough."""
    size = max(1, min(PDF_PAGES_PER_BATCH, -(-page_count // max(1, parts))))
    return [(start, min(start + size - 1, page_count)) for start in range(1, page_count + 1, size)]


def _lines_only_pdf_backend():
    """docling's threaded docling-parse backend, materializing line cells only (see above)."""
    from docling.backend.docling_parse_backend import (
        ThreadedDoclingParseDocumentBackend,
        ThreadedDoclingParsePageBackend,
    )
    from docling_parse.pdf_parser import ContentConfig, ContentLevel

    lines_only = ContentConfig(
        char_cells_content_level=ContentLevel.COMPUTE,
        word_cells_content_level=ContentLevel.COMPUTE,
        line_cells_content_level=ContentLevel.COMPUTE_AND_MATERIALIZE,
        shapes_content_level=ContentLevel.SKIP,
        bitmaps_content_level=ContentLevel.COMPUTE_AND_MATERIALIZE,
        include_bitmap_bytes=False,
    )

    class LinesOnlyPage(ThreadedDoclingParsePageBackend):
        def get_segmented_page(self):
            if not self.is_valid():
                return None
            if getattr(self, "_seg_page", None) is None and hasattr(self, "_result"):
                try:
                    page = self._result.get_page(lines_only)
                except (RuntimeError, ValueError, TypeError):
                    return super().get_segmented_page()
                for cell in page.textline_cells:
                    cell.to_top_left_origin(page.dimension.height)
                self._seg_page = page
            return super().get_segmented_page()

    class LinesOnlyDocument(ThreadedDoclingParseDocumentBackend):
        def iter_pages(self):
            for page in super().iter_pages():
                page.__class__ = LinesOnlyPage  # same fields, one overridden method
                yield page

    return LinesOnlyDocument


def get_converter() -> DocumentConverter:
    """The process-wide converter for every docling format this package reads."""
    global _CONVERTER
    if _CONVERTER is not None:
        return _CONVERTER
    with _LOCK:
        if _CONVERTER is None:
            quiet_docling_logs()
            from docling.datamodel.backend_options import HTMLBackendOptions
            from docling.datamodel.base_models import InputFormat
            from docling.datamodel.pipeline_options import NativePdfPipelineOptions
            from docling.document_converter import (
                DocumentConverter,
                HTMLFormatOption,
                NativePdfFormatOption,
            )

            pdf_options = NativePdfPipelineOptions(
                generate_page_images=False,
                generate_picture_images=False,
            )
            _CONVERTER = DocumentConverter(
                allowed_formats=[
                    InputFormat.PDF,
                    InputFormat.DOCX,
                    InputFormat.PPTX,
                    InputFormat.XLSX,
                    InputFormat.CSV,
                    InputFormat.HTML,
                    InputFormat.MD,
                ],
                format_options={
                    InputFormat.PDF: NativePdfFormatOption(
                        pipeline_options=pdf_options, backend=_lines_only_pdf_backend()
                    ),
                    # docling would file everything before the first heading as furniture (site
                    # navigation); in a knowledge base that is usually the introduction
                    InputFormat.HTML: HTMLFormatOption(backend_options=HTMLBackendOptions(infer_furniture=False)),
                },
            )
    return _CONVERTER


def convert(
    path: Path,
    display_name: str,
    suffix: str | None = None,
    page_range: tuple[int, int] | None = None,
    data: bytes | None = None,
    converter: DocumentConverter | None = None,
) -> ConversionResult:
    """Convert one file with docling; raise ``DocumentParseError`` unless docling reports success.

    docling returns a failed status instead of raising for most problems (``raises_on_error=False``
    keeps its own exception types out of callers); a partial success (some PDF pages failed) is
    returned and the caller decides per page. ``page_range`` (1-based, inclusive) converts part of
    a PDF. ``data`` replaces the file's bytes (e.g. text transcoded to UTF-8); ``converter`` replaces
    the default one (the layout-model pipeline).
    """
    from docling.datamodel.base_models import ConversionStatus

    from kb_assets.parsing.model import DocumentParseError

    converter = converter or get_converter()
    source: Path | DocumentStream = path
    if data is not None or (suffix and path.suffix.lower() != suffix):
        # a stored blob without the original extension: hand docling the bytes under a proper name,
        # since it picks the backend from the name first
        from io import BytesIO

        from docling.datamodel.base_models import DocumentStream

        payload = data if data is not None else path.read_bytes()
        source = DocumentStream(name=f"document{suffix or path.suffix}", stream=BytesIO(payload))
    try:
        with _CONVERT_LOCK:
            if page_range is None:
                result = converter.convert(source, raises_on_error=False)
            else:  # 1-based, inclusive
                result = converter.convert(source, raises_on_error=False, page_range=page_range)
    except Exception as exc:  # docling raises for unsupported/undetectable formats
        reason = f"docling could not convert the file ({type(exc).__name__}: {exc})"
        raise DocumentParseError(display_name, reason) from exc
    if result.status not in (ConversionStatus.SUCCESS, ConversionStatus.PARTIAL_SUCCESS):
        details = "; ".join(e.error_message for e in result.errors) or "no details"
        if not result.input.valid:
            kind = (suffix or path.suffix or "").lstrip(".").upper() or "document"
            reason = f"not a valid {kind} file (file is truncated or corrupt; docling: {details})"
        else:
            reason = f"conversion {result.status.value} ({details})"
        raise DocumentParseError(display_name, reason)
    return result
