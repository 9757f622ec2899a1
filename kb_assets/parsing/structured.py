"""DOCX, PPTX, XLSX, CSV, HTML and Markdown through docling's own (model-free) converters.

docling's DoclingDocument tree is walked into blocks: title/section headers -> ``heading`` (title =
level 1, ``section_header`` level n -> n + 1, so Markdown ``##`` and HTML ``<h2>`` are level 2 and a
Word "Heading 1" under a "Title" is level 2), text -> ``paragraph`` (inline runs joined), list groups
-> one ``list`` block (one ``marker text`` line per item), code -> ``code``, tables -> ``table``,
pictures with a caption -> ``figure``.

Pages: PPTX has one page per slide and XLSX one per sheet (docling's page provenance); DOCX, HTML and
Markdown carry no pages, so logical pages are cut by ``paginate``; CSV pages are row ranges.
"""

from __future__ import annotations

import re
from pathlib import Path

from kb_assets.parsing.converter import convert
from kb_assets.parsing.model import (
    Block,
    DocumentParseError,
    ParsedDocument,
    ParsedPage,
    clean_inline,
    table_block,
)
from kb_assets.parsing.paginate import paginate, split_table

PARSER = "docling"
CSV_ROWS_PER_PAGE = 50
XLSX_ROWS_PER_PAGE = 50

_SPACE_BEFORE_PUNCT = re.compile(r" (?=[.,;:!?)\]}%])")
_SPACE_AFTER_OPEN = re.compile(r"(?<=[(\[{]) ")


def _clean_code(text: str) -> str:
    lines = [line.expandtabs(4).rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return "\n".join(line for line in lines if line.strip())


def _item_text(item) -> str:
    return clean_inline(getattr(item, "text", "") or "")


class _Walker:
    """Flattens a DoclingDocument into ``(block, page_no | None)`` in reading order."""

    def __init__(self, doc, layers) -> None:
        self.doc = doc
        self.layers = layers
        self.out: list[tuple[Block, int | None, str]] = []  # block, 1-based page, content layer

    def walk(self, node) -> None:
        for ref in node.children:
            self.visit(ref.resolve(self.doc))

    @staticmethod
    def _page(item) -> int | None:
        prov = getattr(item, "prov", None)
        return prov[0].page_no if prov else None

    def _emit(self, block: Block | None, item) -> None:
        if block is not None and block.text:
            self.out.append((block, self._page(item), item.content_layer.value))

    def visit(self, item) -> None:
        from docling_core.types.doc import (
            CodeItem,
            GroupItem,
            ListItem,
            PictureItem,
            SectionHeaderItem,
            TableItem,
            TextItem,
            TitleItem,
        )
        from docling_core.types.doc.labels import GroupLabel

        if item.content_layer not in self.layers:
            return
        if isinstance(item, GroupItem):
            if item.label == GroupLabel.INLINE:
                self._emit(Block("paragraph", self._inline_text(item)), self._first_leaf(item))
            elif item.label in (GroupLabel.LIST, GroupLabel.ORDERED_LIST):
                lines: list[str] = []
                self._list_lines(item, lines)
                self._emit(Block("list", "\n".join(lines)), self._first_leaf(item))
            else:
                self.walk(item)
            return
        if isinstance(item, TitleItem):
            self._emit(Block("heading", _item_text(item), level=1), item)
        elif isinstance(item, SectionHeaderItem):
            self._emit(Block("heading", _item_text(item), level=min((item.level or 1) + 1, 6)), item)
        elif isinstance(item, CodeItem):
            self._emit(Block("code", _clean_code(item.text or "")), item)
        elif isinstance(item, TableItem):
            caption = clean_inline(item.caption_text(self.doc))
            if caption:
                self._emit(Block("paragraph", caption), item)
            rows = [[cell.text for cell in row] for row in item.data.grid]
            self._emit(table_block(rows), item)
            return  # children are the cells' own content (rich cells), already in the rows
        elif isinstance(item, PictureItem):
            caption = clean_inline(item.caption_text(self.doc))
            if caption:
                self._emit(Block("figure", caption), item)
            return  # text inside pictures is not body text
        elif isinstance(item, ListItem):  # a list item outside a list group
            self._emit(Block("list", self._list_item_line(item)), item)
            return
        elif isinstance(item, TextItem):
            self._emit(Block("paragraph", _item_text(item)), item)
        if item.children:
            self.walk(item)

    def _first_leaf(self, group):
        for ref in group.children:
            child = ref.resolve(self.doc)
            if getattr(child, "prov", None):
                return child
            if child.children:
                leaf = self._first_leaf(child)
                if getattr(leaf, "prov", None):
                    return leaf
        return group

    def _inline_text(self, group) -> str:
        parts: list[str] = []
        for ref in group.children:
            child = ref.resolve(self.doc)
            if child.content_layer not in self.layers:
                continue
            if child.children:
                parts.append(self._inline_text(child))
            text = _item_text(child)
            if text:
                parts.append(text)
        text = clean_inline(" ".join(p for p in parts if p))
        return _SPACE_AFTER_OPEN.sub("", _SPACE_BEFORE_PUNCT.sub("", text))

    def _list_item_line(self, item, number: int | None = None) -> str:
        from docling_core.types.doc.labels import GroupLabel

        text = _item_text(item)
        inline = [
            self._inline_text(c)
            for c in (ref.resolve(self.doc) for ref in item.children)
            if getattr(c, "label", None) == GroupLabel.INLINE
        ]
        text = clean_inline(" ".join([text, *inline]))
        marker = clean_inline(item.marker or "") or (f"{number}." if item.enumerated and number else "-")
        return f"{marker} {text}" if text else ""

    def _list_lines(self, group, lines: list[str]) -> None:
        from docling_core.types.doc import GroupItem, ListItem
        from docling_core.types.doc.labels import GroupLabel

        number = 0
        for ref in group.children:
            child = ref.resolve(self.doc)
            if child.content_layer not in self.layers:
                continue
            if isinstance(child, ListItem):
                number += 1
                line = self._list_item_line(child, number)
                if line:
                    lines.append(line)
                for sub in (r.resolve(self.doc) for r in child.children):
                    if isinstance(sub, GroupItem) and sub.label in (GroupLabel.LIST, GroupLabel.ORDERED_LIST):
                        self._list_lines(sub, lines)  # nested lists: flattened into the same block
            elif isinstance(child, GroupItem) and child.label in (GroupLabel.LIST, GroupLabel.ORDERED_LIST):
                self._list_lines(child, lines)
            else:
                text = _item_text(child)
                if text:
                    lines.append(text)


def _walk(doc, layers=None) -> list[tuple[Block, int | None, str]]:
    from docling_core.types.doc import ContentLayer

    walker = _Walker(doc, layers or {ContentLayer.BODY})
    walker.walk(doc.body)
    return walker.out


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


def parse_flowing(
    path: Path, name: str, source_kind: str, mime: str, suffix: str, data: bytes | None = None
) -> ParsedDocument:
    """DOCX / HTML / Markdown: no page provenance, logical pages cut at top-level headings.
    ``data``: the file's text re-encoded as UTF-8 when it was not."""
    result = convert(path, name, suffix, data=data)
    blocks = [block for block, _, _ in _walk(result.document)]
    if not blocks:
        raise DocumentParseError(name, "no text content found")
    mode = f"docling-{source_kind}"
    pages = [ParsedPage(i, page_blocks, PARSER, mode) for i, page_blocks in enumerate(paginate(blocks))]
    title = (_furniture_title(result.document) if source_kind == "html" else None) or _first_heading_text(blocks)
    return ParsedDocument(title=title or Path(name).stem, mime=mime, source_kind=source_kind, pages=pages)


def parse_pptx(path: Path, name: str, mime: str) -> ParsedDocument:
    """One page per slide; speaker notes (docling's notes layer) as a final ``Notes: ...`` block."""
    from docling_core.types.doc import ContentLayer

    result = convert(path, name, ".pptx")
    doc = result.document
    items = _walk(doc, {ContentLayer.BODY, ContentLayer.NOTES})
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
    return ParsedDocument(title=title, mime=mime, source_kind="pptx", pages=pages)


def parse_xlsx(path: Path, name: str, mime: str, suffix: str = ".xlsx") -> ParsedDocument:
    """One page per sheet: the sheet name as a level-1 heading, then its tables; a sheet whose table
    has more than ``XLSX_ROWS_PER_PAGE`` data rows continues on further pages by row range, each
    starting with the sheet heading and the table's header row (label ``Sheet rows 2-51``)."""
    from docling_core.types.doc import GroupItem
    from docling_core.types.doc.labels import GroupLabel

    result = convert(path, name, suffix)
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
        items = _Walker(doc, _body_layers())
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
    return ParsedDocument(title=Path(name).stem, mime=mime, source_kind="xlsx", pages=pages)


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
        for block in page.blocks[len(heading):]:
            if block in big:
                if current:
                    out.append(ParsedPage(len(out), heading + current, page.parser, page.mode, sheet or None))
                    current = []
                for n, piece in enumerate(split_table(block.rows, XLSX_ROWS_PER_PAGE)):
                    first = 2 + n * XLSX_ROWS_PER_PAGE
                    label = f"{sheet} rows {first}-{first + len(piece.rows) - 2}".strip()
                    out.append(ParsedPage(len(out), heading + [piece], page.parser, page.mode, label))
            else:
                current.append(block)
        if current:
            out.append(ParsedPage(len(out), heading + current, page.parser, page.mode, sheet or None))
    return out


def parse_csv(path: Path, name: str, mime: str, data: bytes | None = None) -> ParsedDocument:
    """Row ranges of ``CSV_ROWS_PER_PAGE`` data rows a page, each with the header row first."""
    result = convert(path, name, ".csv", data=data)
    tables = [b for b, _, _ in _walk(result.document) if b.kind == "table"]
    if not tables or not tables[0].rows:
        raise DocumentParseError(name, "no rows found")
    pieces = split_table(tables[0].rows, CSV_ROWS_PER_PAGE)
    pages = [ParsedPage(i, [piece], PARSER, "docling-csv") for i, piece in enumerate(pieces)]
    return ParsedDocument(title=Path(name).stem, mime=mime, source_kind="csv", pages=pages)


def _body_layers():
    from docling_core.types.doc import ContentLayer

    return {ContentLayer.BODY}
