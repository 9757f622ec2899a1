"""DOCX, PPTX, XLSX, CSV, HTML and Markdown through docling's own (model-free) converters.

docling's DoclingDocument tree is walked into blocks (docling_blocks.py: headings, paragraphs, lists,
code, tables, captioned figures).

Pages: PPTX has one page per slide and XLSX one per sheet (docling's page provenance); DOCX, HTML and
Markdown carry no pages, so logical pages are cut by ``paginate``; CSV pages are row ranges.

CSV, HTML and Markdown that are not UTF-8 are decoded by detection (charset-normalizer) and handed
to docling as UTF-8, with a warning.
"""

from __future__ import annotations

from pathlib import Path

from kb_assets.parsing.converter import convert
from kb_assets.parsing.docling_blocks import DoclingWalker, walk_blocks
from kb_assets.parsing.model import (
    Block,
    DocumentParseError,
    ParsedDocument,
    ParsedPage,
    SourceFile,
    clean_inline,
)
from kb_assets.parsing.paginate import paginate, split_table
from kb_assets.parsing.text import decode

PARSER = "docling"
CSV_ROWS_PER_PAGE = 50
XLSX_ROWS_PER_PAGE = 50


def _first_heading_text(blocks: list[Block]) -> str | None:
    headings = [b for b in blocks if b.kind == "heading"]
    if not headings:
        return None
    top = min(b.level or 99 for b in headings)
    return next(b.text for b in headings if (b.level or 99) == top)


def _furniture_title(doc) -> str | None:
    from docling_core.types.doc import ContentLayer, TitleItem

    for item in doc.texts:
        if isinstance(item, TitleItem) and item.content_layer == ContentLayer.FURNITURE:
            title = clean_inline(item.text or "")
            if title:
                return title
    return None


# --------------------------------------------------------------------------------- formats


def parse_docx(file: SourceFile) -> ParsedDocument:
    """Logical pages (mode ``docling-docx``)."""
    return _parse_flowing(file, ".docx")


def parse_html(file: SourceFile) -> ParsedDocument:
    """Logical pages (mode ``docling-html``); the title is the page's ``<title>`` where it has one."""
    data, warnings = _as_utf8(file)
    doc = _parse_flowing(file, ".html", data)
    doc.warnings.extend(warnings)
    return doc


def parse_markdown(file: SourceFile) -> ParsedDocument:
    """Logical pages (mode ``docling-markdown``)."""
    data, warnings = _as_utf8(file)
    doc = _parse_flowing(file, ".md", data)
    doc.warnings.extend(warnings)
    return doc


def _parse_flowing(file: SourceFile, suffix: str, data: bytes | None = None) -> ParsedDocument:
    """DOCX / HTML / Markdown: no page provenance, logical pages cut at top-level headings.
    ``suffix``: the extension docling is shown; ``data``: the file's text re-encoded as UTF-8 when it
    was not."""
    name, source_kind = file.name, file.source_kind
    result = convert(file.path, name, suffix, data=data)
    blocks = [block for block, _, _ in walk_blocks(result.document)]
    if not blocks:
        raise DocumentParseError(name, "no text content found")
    mode = f"docling-{source_kind}"
    pages = [ParsedPage(i, page_blocks, PARSER, mode) for i, page_blocks in enumerate(paginate(blocks))]
    title = (_furniture_title(result.document) if source_kind == "html" else None) or _first_heading_text(blocks)
    return ParsedDocument(title=title or Path(name).stem, mime=file.mime, source_kind=source_kind, pages=pages)


def _as_utf8(file: SourceFile) -> tuple[bytes | None, list[str]]:
    """docling reads CSV, HTML and Markdown as UTF-8 (with a cp1252 fallback only): text in another
    encoding is detected (text.decode) and handed over as UTF-8, with a warning naming the guess."""
    text, warning = decode(file.path.read_bytes(), file.name)
    if not warning:
        return None, []
    return b"\xef\xbb\xbf" + text.encode("utf-8"), [warning]  # a BOM: docling and BeautifulSoup both honour it


def parse_pptx(file: SourceFile) -> ParsedDocument:
    """One page per slide; speaker notes (docling's notes layer) as a final ``Notes: ...`` block."""
    from docling_core.types.doc import ContentLayer

    path, name = file.path, file.name
    result = convert(path, name, ".pptx")
    doc = result.document
    items = walk_blocks(doc, {ContentLayer.BODY, ContentLayer.NOTES})
    slide_count = max([*doc.pages.keys(), *[p for _, p, _ in items if p]], default=0)
    body: dict[int, list[Block]] = {}
    notes: dict[int, list[str]] = {}
    for block, page_no, layer in items:
        slide = (page_no or 1) - 1
        if layer == ContentLayer.NOTES.value:
            notes.setdefault(slide, []).append(clean_inline(block.text.replace("\n", " ")))
        else:
            body.setdefault(slide, []).append(block)
    if slide_count == 0:
        raise DocumentParseError(name, "presentation has no slides")
    pages = []
    for index in range(slide_count):
        blocks = list(body.get(index, []))
        note = clean_inline(" ".join(notes.get(index, [])))
        if note:
            blocks.append(Block("paragraph", f"Notes: {note}"))
        pages.append(ParsedPage(index, blocks, PARSER, "docling-pptx"))
    all_blocks = [b for p in pages for b in p.blocks]
    first_slide_heading = _first_heading_text(pages[0].blocks) if pages[0].blocks else None
    title = first_slide_heading or _first_heading_text(all_blocks) or Path(name).stem
    return ParsedDocument(title=title, mime=file.mime, source_kind=file.source_kind, pages=pages)


def parse_xlsx(file: SourceFile) -> ParsedDocument:
    """One page per sheet: the sheet name as a level-1 heading, then its tables; a sheet whose table
    has more than ``XLSX_ROWS_PER_PAGE`` data rows continues on further pages by row range, each
    starting with the sheet heading and the table's header row (label ``Sheet rows 2-51``)."""
    from docling_core.types.doc import GroupItem
    from docling_core.types.doc.labels import GroupLabel

    name = file.name
    result = convert(file.path, name, ".xlsx")  # .xlsm too: docling picks its backend by the name
    doc = result.document
    sheets = [
        item
        for item, _ in doc.iterate_items(with_groups=True)
        if isinstance(item, GroupItem) and item.label == GroupLabel.SHEET
    ]
    page_count = max([len(sheets), *doc.pages.keys()], default=0)
    if page_count == 0:
        raise DocumentParseError(name, "workbook has no sheets")
    pages = [ParsedPage(i, [], PARSER, "docling-xlsx") for i in range(page_count)]
    for sheet_index, sheet in enumerate(sheets):
        items = DoclingWalker(doc, _body_layers())
        items.walk(sheet)
        page_nos = [p for _, p, _ in items.out if p]
        index = (page_nos[0] - 1) if page_nos else sheet_index
        sheet_name = clean_inline(sheet.name or "")
        blocks = [Block("heading", sheet_name, level=1)] if sheet_name else []
        blocks += [b for b, _, _ in items.out]
        if 0 <= index < page_count:
            pages[index].blocks = blocks
    if not any(p.blocks for p in pages):
        raise DocumentParseError(name, "workbook has no cell content")
    pages = _split_large_sheets(pages)
    return ParsedDocument(title=Path(name).stem, mime=file.mime, source_kind=file.source_kind, pages=pages)


def _split_large_sheets(pages: list[ParsedPage]) -> list[ParsedPage]:
    out: list[ParsedPage] = []
    for page in pages:
        big = [b for b in page.blocks if b.kind == "table" and b.rows and len(b.rows) - 1 > XLSX_ROWS_PER_PAGE]
        heading = [b for b in page.blocks[:1] if b.kind == "heading"]
        sheet = heading[0].text if heading else ""
        if not big:
            out.append(ParsedPage(len(out), page.blocks, page.parser, page.mode, sheet or None))
            continue
        current: list[Block] = []
        for block in page.blocks[len(heading) :]:
            if block in big and block.rows is not None:  # (every big block has rows)
                if current:
                    out.append(ParsedPage(len(out), heading + current, page.parser, page.mode, sheet or None))
                    current = []
                for n, piece in enumerate(split_table(block.rows, XLSX_ROWS_PER_PAGE)):
                    first = 2 + n * XLSX_ROWS_PER_PAGE
                    assert piece.rows is not None  # a table block always has its rows
                    label = f"{sheet} rows {first}-{first + len(piece.rows) - 2}".strip()
                    out.append(ParsedPage(len(out), heading + [piece], page.parser, page.mode, label))
            else:
                current.append(block)
        if current:
            out.append(ParsedPage(len(out), heading + current, page.parser, page.mode, sheet or None))
    return out


def parse_csv(file: SourceFile) -> ParsedDocument:
    """Row ranges of ``CSV_ROWS_PER_PAGE`` data rows a page, each with the header row first."""
    name = file.name
    data, warnings = _as_utf8(file)
    result = convert(file.path, name, ".csv", data=data)
    tables = [b for b, _, _ in walk_blocks(result.document) if b.kind == "table"]
    if not tables or not tables[0].rows:
        raise DocumentParseError(name, "no rows found")
    pieces = split_table(tables[0].rows, CSV_ROWS_PER_PAGE)
    pages = [ParsedPage(i, [piece], PARSER, "docling-csv") for i, piece in enumerate(pieces)]
    return ParsedDocument(
        title=Path(name).stem, mime=file.mime, source_kind=file.source_kind, pages=pages, warnings=warnings
    )


def _body_layers():
    from docling_core.types.doc import ContentLayer

    return {ContentLayer.BODY}
