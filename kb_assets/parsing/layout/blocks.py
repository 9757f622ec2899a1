"""Blocks from the classified rows of one page: headings, paragraphs, lists, tables and figures.

- Paragraphs: consecutive rows join until a vertical gap larger than the usual line gap (1.8x the
  tight-end gap, at most one body line height), a change of line height (or of font together with
  height), a jump up (next column), or a short line ending a sentence. Wrapped lines join with a
  space, without one between CJK characters, and ``infor-``/``mation`` de-hyphenated.
- Lists: rows starting with a bullet or ``1.``/``a)`` marker; continuation rows join the item;
  consecutive items make one ``list`` block, one item per line. Table-of-contents entries are list
  lines, one each.
- A heading wrapped over two rows is one heading block.
"""

from __future__ import annotations

import re

from kb_assets.parsing.layout.figures import FIGURE_TEXT
from kb_assets.parsing.layout.lines import LIST_MARKER, TOC_ENTRY, Line, PageLines
from kb_assets.parsing.model import Block, join_lines, table_block

_SENTENCE_END = re.compile(r"[.!?:。！？：]$")


def _continues(prev: Line, line: Line, gap_limit: float, right_edge: float, left_edge: float) -> bool:
    gap = line.t - prev.b
    if gap > gap_limit or gap < -0.5 * max(prev.size, line.size):
        return False
    if abs(line.size - prev.size) > 0.25 * max(prev.size, line.size):
        return False
    if line.font != prev.font and abs(line.size - prev.size) > 0.05 * max(prev.size, line.size):
        return False  # another font at another size: another block
    width = max(right_edge - left_edge, 1.0)
    if _SENTENCE_END.search(prev.text) and prev.r < right_edge - 0.15 * width:
        return False
    return True


def page_blocks(pl: PageLines, body_h: float, gap_limit: float) -> list[Block]:
    """The blocks of one page, in flow order; ``gap_limit``: the largest gap inside a paragraph."""
    if not pl.lines:
        return []
    body = [ln for ln in pl.lines if ln.heading is None and ln.table is None and ln.figure is None]
    right_edge = max((ln.r for ln in body), default=pl.width)
    left_edge = min((ln.l for ln in body), default=0.0)

    blocks: list[Block] = []
    kind: str | None = None  # "heading" | "paragraph" | "list"
    parts: list[str] = []  # heading/paragraph: text so far; list: one entry per item
    level: int | None = None
    last: Line | None = None
    item_left = 0.0
    cont_left: float | None = None

    def flush() -> None:
        nonlocal kind, parts
        if kind == "list":
            text = "\n".join(p for p in parts if p)
        else:
            text = parts[0] if parts else ""
        if text:
            blocks.append(Block(kind=kind, text=text, level=level if kind == "heading" else None))
        kind, parts = None, []

    for line in pl.lines:
        if line.table is not None or line.figure is not None:
            flush()
            if line.table is not None:
                block = table_block(line.table)
            else:
                block = Block("figure", line.text or FIGURE_TEXT)
            if block is not None:
                blocks.append(block)
            last = None
            continue
        if line.heading is not None:
            if (
                kind == "heading"
                and level == line.level
                and last is not None
                and last.heading is not None
                and 0 <= line.t - last.b <= gap_limit
                and abs(line.size - last.size) < 0.5
                and len(parts[0]) + len(line.text) <= 200
            ):
                parts[0] = join_lines(parts[0], line.text)  # a heading wrapped over two lines
            else:
                flush()
                kind, parts, level = "heading", [line.text], line.level
        elif TOC_ENTRY.search(line.text):  # table-of-contents entries: one list line each
            if kind != "list":
                flush()
                kind, parts = "list", []
            parts.append(line.text)
            item_left, cont_left = line.l, None
        elif LIST_MARKER.match(line.text):
            if not (kind == "list" and last is not None and line.t - last.b <= gap_limit * 1.5):
                flush()
                kind, parts = "list", []
            parts.append(line.text)
            item_left, cont_left = line.l, None
        elif (
            kind == "list"
            and last is not None
            and line.cells == 1
            and item_left + 1.0 < line.l < item_left + 4 * body_h
            and (cont_left is None or abs(line.l - cont_left) <= 3.0)
            and _continues(last, line, gap_limit, right_edge, left_edge)
        ):
            parts[-1] = join_lines(parts[-1], line.text)
            cont_left = line.l
        elif (
            kind == "paragraph"
            and last is not None
            and line.cells == 1
            and last.cells == 1
            and _continues(last, line, gap_limit, right_edge, left_edge)
        ):
            parts[0] = join_lines(parts[0], line.text)
        else:
            flush()
            kind, parts = "paragraph", [line.text]
        last = line
    flush()
    return blocks

