"""docling's DoclingDocument tree walked into blocks, for every format docling reads (structured.py)
and for PDFs read by docling's layout model (pdf/layout_model.py).

Title/section headers -> ``heading`` (title = level 1, ``section_header`` level n -> n + 1, so
Markdown ``##`` and HTML ``<h2>`` are level 2 and a Word "Heading 1" under a "Title" is level 2),
text -> ``paragraph`` (inline runs joined), list groups -> one ``list`` block (one ``marker text``
line per item, nested lists flattened into it), code -> ``code``, tables -> ``table`` (a caption as a
paragraph before it), pictures with a caption -> ``figure``. Each block keeps the page of its item's
provenance and its content layer (body, furniture, notes).
"""

from __future__ import annotations

import re

from kb_assets.parsing.model import Block, clean_inline, table_block

_SPACE_BEFORE_PUNCT = re.compile(r" (?=[.,;:!?)\]}%])")
_SPACE_AFTER_OPEN = re.compile(r"(?<=[(\[{]) ")


def _clean_code(text: str) -> str:
    lines = [line.expandtabs(4).rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return "\n".join(line for line in lines if line.strip())


def _item_text(item) -> str:
    return clean_inline(getattr(item, "text", "") or "")


class DoclingWalker:
    """Flattens a DoclingDocument (or one subtree: ``walk(node)``) into blocks in reading order.

    ``out``: ``(block, 1-based page | None, content layer)``; ``items``: the docling item each block
    of ``out`` came from (its provenance: page and box). ``layers``: the content layers read.
    ``uncaptioned_figure``: the text of a figure block for a picture without a caption (None: such
    pictures are left out)."""

    def __init__(self, doc, layers, uncaptioned_figure: str | None = None) -> None:
        self.doc = doc
        self.layers = layers
        self.uncaptioned_figure = uncaptioned_figure
        self.out: list[tuple[Block, int | None, str]] = []  # block, 1-based page, content layer
        self.items: list = []  # the item of each block in out

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
            self.items.append(item)

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
            text = clean_inline(item.caption_text(self.doc)) or self.uncaptioned_figure
            if text:
                self._emit(Block("figure", text), item)
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


def walk_blocks(doc, layers=None) -> list[tuple[Block, int | None, str]]:
    """The whole document's ``(block, page, layer)`` in reading order; ``layers``: the body only
    unless given."""
    from docling_core.types.doc import ContentLayer

    walker = DoclingWalker(doc, layers or {ContentLayer.BODY})
    walker.walk(doc.body)
    return walker.out
