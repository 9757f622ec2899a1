"""One docling ``DocumentConverter`` per process, built lazily (construction and pipeline set-up
are not free), with docling's log noise turned down to warnings.

PDFs go through docling's model-free ``NativePdfPipeline`` unless ``choose_pdf_pipeline`` finds
docling's layout model on disk (``DOCLING_ARTIFACTS_PATH``, or docling's cache
``~/.cache/docling/models``, as ``docling-tools models download`` leaves it) and its Python
dependencies (torch, transformers) installed: then a second converter runs docling's standard PDF
pipeline with that ``artifacts_path`` (never downloading), with TableFormer when its folder and
``docling_ibm_models`` are there too. Page images are not rendered here (callers that need them
render with pypdfium2).

The PDF backend is docling's threaded docling-parse backend with one change: pages materialize
only their text-line cells (and bitmap boxes), not the word cells docling asks for and the native
pipeline never uses. Word cells are most of docling-parse's Python-side cost (measured: ~2x pages/s
and far less memory). It relies on two private attributes of docling 2.143's page backend
(``_result``, ``_seg_page``); if they are missing it falls back to the stock page.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from docling.datamodel.document import ConversionResult
    from docling.document_converter import DocumentConverter

_LOCK = threading.Lock()
_CONVERT_LOCK = threading.Lock()  # one conversion at a time: pipelines are shared, not thread-safe
_CONVERTER: "DocumentConverter | None" = None
_LAYOUT_CONVERTERS: dict[tuple[str, bool], "DocumentConverter"] = {}

LAYOUT_MODEL_FOLDER = "docling-project--docling-layout-heron"
TABLE_MODEL_FOLDER = "docling-project--docling-models"

_NOISY_LOGGERS = ("docling", "docling_core", "docling_parse", "docling_ibm_models", "RapidOCR")


def quiet_docling_logs(level: int = logging.WARNING) -> None:
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(level)


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


@dataclass(frozen=True)
class PdfPipeline:
    kind: str  # "layout" (docling's standard pipeline with its layout model) | "native" (model-free)
    artifacts_path: Path | None  # the model folder (layout only)
    tables: bool  # TableFormer available (layout only)
    reason: str  # why this pipeline: shown in warnings


def default_artifacts_path() -> Path:
    """docling's own model cache (``docling-tools models download`` puts models there)."""
    try:
        from docling.datamodel.settings import settings

        return Path(settings.cache_dir) / "models"
    except Exception:  # pragma: no cover - docling always has settings
        return Path.home() / ".cache" / "docling" / "models"


def choose_pdf_pipeline(artifacts_path: Path | None, default_cache: Path | None = None) -> PdfPipeline:
    """The PDF pipeline this environment can run: ``layout`` only where the layout model is on disk
    (complete) and torch + transformers import; else ``native`` with the reason."""
    explicit = artifacts_path is not None
    folder = Path(artifacts_path) if explicit else (default_cache or default_artifacts_path())
    where = f"DOCLING_ARTIFACTS_PATH={folder}" if explicit else f"docling's model cache {folder}"
    layout = folder / LAYOUT_MODEL_FOLDER
    if not layout.is_dir():
        return PdfPipeline("native", None, False, f"no docling layout model: {where} has no {LAYOUT_MODEL_FOLDER}")
    missing = [f for f in ("config.json", "preprocessor_config.json") if not (layout / f).is_file()]
    if missing or not any(layout.glob("*.safetensors")):
        what = ", ".join(missing or ["*.safetensors weights"])
        return PdfPipeline("native", None, False, f"incomplete docling layout model in {layout} (missing {what})")
    modules = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if modules:
        return PdfPipeline("native", None, False, f"docling layout model found but {', '.join(modules)} not installed")
    tables = (folder / TABLE_MODEL_FOLDER).is_dir() and importlib.util.find_spec("docling_ibm_models") is not None
    note = "" if tables else " (no TableFormer: tables from the layout model only)"
    return PdfPipeline("layout", folder, tables, f"docling layout model from {where}{note}")


def get_layout_converter(pipeline: PdfPipeline) -> "DocumentConverter":
    """A converter running docling's standard PDF pipeline on the models in ``pipeline.artifacts_path``
    (OCR off: pages without text are OCRed by ``ocr.py`` like on the native path)."""
    key = (str(pipeline.artifacts_path), pipeline.tables)
    with _LOCK:
        converter = _LAYOUT_CONVERTERS.get(key)
        if converter is None:
            quiet_docling_logs()
            from docling.datamodel.base_models import InputFormat
            from docling.datamodel.pipeline_options import PdfPipelineOptions
            from docling.document_converter import DocumentConverter, PdfFormatOption

            options = PdfPipelineOptions(
                artifacts_path=pipeline.artifacts_path,
                do_ocr=False,
                do_table_structure=pipeline.tables,
                generate_page_images=False,
                generate_picture_images=False,
                enable_remote_services=False,
            )
            converter = DocumentConverter(
                allowed_formats=[InputFormat.PDF],
                format_options={InputFormat.PDF: PdfFormatOption(pipeline_options=options)},
            )
            _LAYOUT_CONVERTERS[key] = converter
    return converter


def get_converter() -> "DocumentConverter":
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
    converter: "DocumentConverter | None" = None,
) -> "ConversionResult":
    """Convert one file with docling; raise ``DocumentParseError`` unless docling reports success.

    docling returns a failed status instead of raising for most problems (``raises_on_error=False``
    keeps its own exception types out of callers); a partial success (some PDF pages failed) is
    returned and the caller decides per page. ``page_range`` (1-based, inclusive) converts part of
    a PDF. ``data`` replaces the file's bytes (e.g. text transcoded to UTF-8); ``converter`` replaces
    the default one (the layout pipeline).
    """
    from docling.datamodel.base_models import ConversionStatus

    from kb_assets.parsing.model import DocumentParseError

    converter = converter or get_converter()
    source: object = path
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
