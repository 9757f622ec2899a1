"""The PDF layout-model path: docling's standard pipeline, where its layout model is on this machine.

``choose_pdf_pipeline`` decides (``parse_pdf`` calls it after the page limit is checked): ``layout``
where docling's layout model is on disk (``DOCLING_ARTIFACTS_PATH``, or docling's model cache
``~/.cache/docling/models``, as ``docling-tools models download`` leaves it), complete, and torch and
transformers import; TableFormer too when its folder and ``docling_ibm_models`` are there. Else
``native``, with the reason (a warning when ``DOCLING_ARTIFACTS_PATH`` was set). The converter runs
on that ``artifacts_path`` (never downloading), OCR off and without page images.

Reading (mode ``docling-layout``): docling's body items page by page (running headers/footers are
its furniture layer, left out), walked into blocks (docling_blocks.py) with every picture a figure
and its box kept for the crop; pages without text and with a scan-sized image are OCRed as on the
native path (scans.py). Not done: tables without TableFormer come from the layout model only.
"""

from __future__ import annotations

import importlib.util
import threading
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kb_assets.parsing.converter import convert, pdf_page_batches, quiet_docling_logs
from kb_assets.parsing.docling_blocks import DoclingWalker
from kb_assets.parsing.layout import FIGURE_TEXT, PageLines, layout_pages
from kb_assets.parsing.model import Block, ParsedDocument, ParsedPage, SourceFile
from kb_assets.parsing.pdf.facts import PdfFacts, document_title
from kb_assets.parsing.pdf.native import PARSER
from kb_assets.parsing.pdf.scans import ocr_pages, ocr_parser, scan_page
from kb_assets.parsing.render import render_figure_crops

if TYPE_CHECKING:  # pragma: no cover
    from docling.document_converter import DocumentConverter

MODE_LAYOUT = "docling-layout"
LAYOUT_MODEL_FOLDER = "docling-project--docling-layout-heron"
TABLE_MODEL_FOLDER = "docling-project--docling-models"

_LOCK = threading.Lock()
_CONVERTERS: dict[tuple[str, bool], DocumentConverter] = {}


@dataclass(frozen=True)
class PdfPipeline:
    """The PDF pipeline this machine can run, and why."""

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
    folder = Path(artifacts_path) if artifacts_path is not None else (default_cache or default_artifacts_path())
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


def get_layout_converter(pipeline: PdfPipeline) -> DocumentConverter:
    """A converter running docling's standard PDF pipeline on the models in ``pipeline.artifacts_path``
    (OCR off: pages without text are OCRed by scans.py like on the native path)."""
    key = (str(pipeline.artifacts_path), pipeline.tables)
    with _LOCK:
        converter = _CONVERTERS.get(key)
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
            _CONVERTERS[key] = converter
    return converter


def parse_with_layout_model(file: SourceFile, facts: PdfFacts, pipeline: PdfPipeline) -> ParsedDocument:
    """docling's standard pipeline (layout model; TableFormer when present): its body items, page by
    page (running headers/footers are docling's furniture layer, left out), pictures as figures with
    crops; pages without text and with a scan-sized image are OCRed as on the native path."""
    import pypdfium2 as pdfium
    from docling_core.types.doc import ContentLayer

    path, name, options = file.path, file.name, file.options
    converter = get_layout_converter(pipeline)
    blocks: dict[int, list[Block]] = defaultdict(list)
    boxes: dict[int, list[tuple[float, float, float, float]]] = defaultdict(list)
    for start, end in pdf_page_batches(facts.page_count):
        result = convert(path, name, ".pdf", page_range=(start, end), converter=converter)
        # pictures are figures with or without a caption, and keep their box for the crop
        walker = DoclingWalker(result.document, {ContentLayer.BODY}, uncaptioned_figure=FIGURE_TEXT)
        walker.walk(result.document.body)
        page = start - 1
        for (block, page_no, _layer), item in zip(walker.out, walker.items, strict=False):
            page = page_no - 1 if page_no else page  # items without provenance stay with the page before
            box = item_box(result.document, item)
            if box is not None:  # the item's place on the page (its first provenance), for chunk regions
                block = replace(block, box=box, lines=((0, len(block.text), *box),))
                if block.kind == "figure":
                    boxes[page].append(box)
            blocks[page].append(block)
        del result

    warnings: list[str] = []
    pdf = pdfium.PdfDocument(str(path))
    try:
        scanned: dict[int, PageLines] = {}
        for index in range(facts.page_count):
            if not blocks.get(index):
                pl = scan_page(pdf, index)
                if pl is not None:
                    scanned[index] = pl
        ocr_pages(pdf, scanned, options, warnings)
        ocr_blocks = layout_pages({i: pl for i, pl in scanned.items() if pl.ocr}, {})
        parsed: list[ParsedPage] = []
        for index in range(facts.page_count):
            label = facts.labels[index]
            width, height = pdf[index].get_size()
            if index in ocr_blocks:
                parsed.append(
                    ParsedPage(index, ocr_blocks[index], *ocr_parser(options), label, width=width, height=height)
                )
            else:
                parsed.append(
                    ParsedPage(index, blocks.get(index, []), PARSER, MODE_LAYOUT, label, width=width, height=height)
                )
        if options.images:
            render_figure_crops(pdf, parsed, dict(boxes))
    finally:
        pdf.close()
    title = document_title(facts, parsed, name)
    return ParsedDocument(title=title, mime=file.mime, source_kind=file.source_kind, pages=parsed, warnings=warnings)


def item_box(doc, item) -> tuple[float, float, float, float] | None:
    """The box of an item's first provenance, top-left origin (l, t, r, b), or None."""
    prov = getattr(item, "prov", None)
    if not prov:
        return None
    page = doc.pages.get(prov[0].page_no)
    if page is None or page.size is None:
        return None
    box = prov[0].bbox.to_top_left_origin(page_height=page.size.height)
    return (box.l, min(box.t, box.b), box.r, max(box.t, box.b))
