"""Blocks from the classified rows of one page: headings, paragraphs, lists, tables and figures.

- Paragraphs: consecutive rows join until a vertical gap larger than the usual line gap (1.8x the
  tight-end gap, at most one body line height), a change of line height (or of font together with
  height), a jump up (next column), or a short line ending a sentence. Wrapped lines join with a
  space, without one between CJK characters, and ``infor-``/``mation`` de-hyphenated.
- Lists: rows starting with a bullet or ``1.``/``a)`` marker; continuation rows join the item;
  consecutive items make one ``list`` block, one item per line. Table-of-contents entries are list
  lines, one each.
- A heading wrapped over two rows is one heading block.

Each block keeps its geometry: ``box``, the union of its rows' boxes, and ``lines``, the character
span of each row in the block's text with the row's box (a table: one span a rendered row, where its
rows are known).
"""

from __future__ import annotations

import re

from kb_assets.parsing.layout.figures import FIGURE_TEXT
from kb_assets.parsing.layout.lines import LIST_MARKER, TOC_ENTRY, Line, PageLines
from kb_assets.parsing.model import Block, LineSpan, join_lines, table_block

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


def _joined(left: str, right: str, spans: list[LineSpan], line: Line) -> str:
    """``join_lines(left, right)``, recording where ``right`` (the row ``line``) lands in the result."""
    text = join_lines(left, right)
    spans.append((len(text) - len(right), len(text), line.l, line.t, line.r, line.b))
    return text


def union_box(spans) -> tuple[float, float, float, float] | None:
    """The box around every (.., l, t, r, b) span (None without any)."""
    if not spans:
        return None
    return (min(s[-4] for s in spans), min(s[-3] for s in spans), max(s[-2] for s in spans), max(s[-1] for s in spans))


def _table(line: Line) -> Block | None:
    """A table block with its box, and one span a rendered row when every row kept its box."""
    if line.table is None:
        return None
    block = table_block(line.table)
    if block is None:
        return None
    box = (line.l, line.t, line.r, line.b)
    spans: list[LineSpan] = []
    boxes = line.row_boxes or []
    if block.rows is not None and len(boxes) == len(block.rows):
        start = 0
        for row_text, row_box in zip(block.text.split("\n"), boxes, strict=False):
            spans.append((start, start + len(row_text), *row_box))
            start += len(row_text) + 1
    return Block("table", block.text, rows=block.rows, box=box, lines=tuple(spans) or ((0, len(block.text), *box),))


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
    spans: list[list[LineSpan]] = []  # per part: where each of its rows lies in it, with the row's box
    level: int | None = None
    last: Line | None = None
    item_left = 0.0
    cont_left: float | None = None

    def start(new_kind: str | None, line: Line | None = None) -> None:
        """Begin a block of ``new_kind``, with the row ``line`` as its first part when given."""
        nonlocal kind, parts, spans
        kind, parts, spans = new_kind, [], []
        if line is not None:
            add(line.text, line)

    def add(text: str, line: Line) -> None:
        parts.append(text)
        spans.append([(0, len(text), line.l, line.t, line.r, line.b)])

    def extend(text: str, line: Line) -> None:
        parts[-1] = _joined(parts[-1], text, spans[-1], line)

    def flush() -> None:
        lines: list[LineSpan]
        if kind == "list":
            text, offset, lines = "", 0, []
            for part, part_spans in zip(parts, spans, strict=False):
                if not part:
                    continue
                if text:
                    text += "\n"
                offset = len(text)
                text += part
                lines += [
                    (offset + a, offset + b, left, top, right, bottom) for a, b, left, top, right, bottom in part_spans
                ]
        else:
            text, lines = (parts[0], spans[0]) if parts else ("", [])
        if text:
            assert kind is not None, "text gathered outside a block"  # start(None) empties parts
            blocks.append(
                Block(
                    kind=kind,
                    text=text,
                    level=level if kind == "heading" else None,
                    box=union_box(lines),
                    lines=tuple(lines),
                )
            )
        start(None)

    for line in pl.lines:
        if line.table is not None or line.figure is not None:
            flush()
            if line.table is not None:
                block = _table(line)
            else:
                text = line.text or FIGURE_TEXT
                box = (line.l, line.t, line.r, line.b)
                block = Block("figure", text, box=box, lines=((0, len(text), *box),))
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
                extend(line.text, line)  # a heading wrapped over two lines
            else:
                flush()
                start("heading", line)
                level = line.level
        elif TOC_ENTRY.search(line.text):  # table-of-contents entries: one list line each
            if kind != "list":
                flush()
                start("list")
            add(line.text, line)
            item_left, cont_left = line.l, None
        elif LIST_MARKER.match(line.text):
            if not (kind == "list" and last is not None and line.t - last.b <= gap_limit * 1.5):
                flush()
                start("list")
            add(line.text, line)
            item_left, cont_left = line.l, None
        elif (
            kind == "list"
            and last is not None
            and line.cells == 1
            and item_left + 1.0 < line.l < item_left + 4 * body_h
            and (cont_left is None or abs(line.l - cont_left) <= 3.0)
            and _continues(last, line, gap_limit, right_edge, left_edge)
        ):
            extend(line.text, line)
            cont_left = line.l
        elif (
            kind == "paragraph"
            and last is not None
            and line.cells == 1
            and last.cells == 1
            and _continues(last, line, gap_limit, right_edge, left_edge)
        ):
            extend(line.text, line)
        else:
            flush()
            start("paragraph", line)
        last = line
    flush()
    return blocks
