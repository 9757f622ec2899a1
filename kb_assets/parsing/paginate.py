"""Logical pages for formats without pages (DOCX, HTML, Markdown).

A page starts at every top-level heading: the smallest heading level used at least twice (so a
single ``# Title`` over ``##`` sections still splits at the sections), or the smallest level used
when none repeats. A section longer than ``PAGE_CHARS`` continues on further pages, cut between
blocks; headings at the end of a page move to the next one. A single block over ``HUGE_BLOCK_CHARS``
is cut into pieces of at most ``PAGE_CHARS`` (paragraphs at sentence ends, tables by rows with the
header row repeated, lists/code by lines).
"""

from __future__ import annotations

import re
from collections import Counter

from kb_assets.parsing.model import Block, table_block

PAGE_CHARS = 1500
HUGE_BLOCK_CHARS = 3000

_SENTENCE = re.compile(r"(?<=[.!?;。！？；])\s*")


def split_table(rows: tuple[tuple[str, ...], ...], rows_per_piece: int) -> list[Block]:
    """Table pieces of ``rows_per_piece`` data rows, each starting with the header row."""
    header, body = rows[0], rows[1:]
    if not body:
        block = table_block([header])
        return [block] if block else []
    pieces = []
    for start in range(0, len(body), rows_per_piece):
        block = table_block([header, *body[start : start + rows_per_piece]])
        if block is not None:
            pieces.append(block)
    return pieces


def _split_text(text: str, limit: int, cjk_join: bool = True) -> list[str]:
    sentences = [s for s in _SENTENCE.split(text) if s]
    pieces: list[str] = []
    current = ""
    for sentence in sentences:
        while len(sentence) > limit:  # no sentence end: cut at a space, else hard
            cut = sentence.rfind(" ", 0, limit)
            cut = cut if cut > limit // 2 else limit
            head, sentence = sentence[:cut].strip(), sentence[cut:].strip()
            if current:
                pieces.append(current)
                current = ""
            pieces.append(head)
        candidate = f"{current} {sentence}".strip() if current else sentence
        if len(candidate) > limit and current:
            pieces.append(current)
            current = sentence
        else:
            current = candidate
    if current:
        pieces.append(current)
    return [p for p in pieces if p]


def _split_lines(text: str, limit: int) -> list[str]:
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    lines = [part for line in text.split("\n") for part in _hard_cut(line, limit)]
    for line in lines:
        if current and size + len(line) + 1 > limit:
            pieces.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    if current:
        pieces.append("\n".join(current))
    return pieces


def _hard_cut(line: str, limit: int) -> list[str]:
    """A single line longer than the limit (minified code, a giant cell) is cut where it must be."""
    if len(line) <= limit:
        return [line]
    return [line[i : i + limit].strip() for i in range(0, len(line), limit) if line[i : i + limit].strip()]


def split_huge(block: Block, limit: int = PAGE_CHARS) -> list[Block]:
    if len(block.text) <= HUGE_BLOCK_CHARS:
        return [block]
    if block.kind == "table" and block.rows and len(block.rows) > 2:
        width = max(1, len(block.text) // len(block.rows))
        return split_table(block.rows, max(1, limit // width))
    if block.kind in ("list", "code", "table"):
        return [Block(block.kind, piece) for piece in _split_lines(block.text, limit)]
    return [Block(block.kind, piece, level=block.level) for piece in _split_text(block.text, limit)]


def _split_level(blocks: list[Block]) -> int | None:
    levels = Counter(b.level or 1 for b in blocks if b.kind == "heading")
    if not levels:
        return None
    repeated = [level for level, n in levels.items() if n >= 2]
    return min(repeated) if repeated else min(levels)


def paginate(blocks: list[Block], page_chars: int = PAGE_CHARS) -> list[list[Block]]:
    split_level = _split_level(blocks)
    pages: list[list[Block]] = []
    current: list[Block] = []
    size = 0

    def only_headings(page: list[Block]) -> bool:
        return all(b.kind == "heading" for b in page)

    def new_page() -> None:
        nonlocal current, size
        carried: list[Block] = []
        while current and current[-1].kind == "heading" and not only_headings(current):
            carried.insert(0, current.pop())
        if current:
            pages.append(current)
        current = carried
        size = sum(len(b.text) + 2 for b in current)

    for block in (piece for b in blocks for piece in split_huge(b)):
        top_heading = block.kind == "heading" and split_level is not None and (block.level or 1) <= split_level
        if current and top_heading and not only_headings(current):
            new_page()
        elif current and size + len(block.text) > page_chars and not only_headings(current):
            new_page()
        current.append(block)
        size += len(block.text) + 2
    if current:
        pages.append(current)
    return pages
