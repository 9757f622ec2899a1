"""What parsing produces: documents of pages of blocks, whose texts are exactly the page text; and
what a format's reader is handed (``SourceFile``).

``ParsedPage.text`` is the text lineage checks are made against: it is the blocks' texts joined by a
blank line, so every block's ``text`` is found verbatim in it. Block texts are whitespace-clean (no
runs of spaces, no stray newlines) except for the single newlines that separate table rows, list
items and code lines.

Geometry, where the format has it (PDF text layers, OCR of scans and images): a page records its
``width`` and ``height`` and each block its ``box`` (the union of its lines) and ``lines`` (the
character span of each line in ``text`` with that line's box), in page units with a top-left origin
(PDF points; pixels of the original image for image files). Chunks turn them into the regions they
cover (``chunking/regions.py``). Formats without page geometry leave them None.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kb_assets.settings import ParseOptions

BLOCK_KINDS = ("heading", "paragraph", "list", "table", "figure", "code")

Box = tuple[float, float, float, float]  # (left, top, right, bottom), page units, top-left origin
LineSpan = tuple[int, int, float, float, float, float]  # (start, end) of a line in the block text, and its box

_CJK_CLASS = (
    "\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
)
_CJK_END = re.compile(f"[{_CJK_CLASS}]$")
_CJK_START = re.compile(f"^[{_CJK_CLASS}]")
_SPACES = re.compile(r"[ \t\u00a0\u2000-\u200a\u202f\u205f\u3000\f\v]+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b\ufeff]")


@dataclass(frozen=True)
class Block:
    kind: str  # "heading" | "paragraph" | "list" | "table" | "figure" | "code"
    text: str  # exactly the text this block contributes to the page text
    level: int | None = None  # heading level (1 = top)
    rows: tuple[tuple[str, ...], ...] | None = None  # tables: first row is the header
    # figures: the crop as PNG (PDF pictures; stored by ``parse_pages`` as the block's image_key)
    image_png: bytes | None = field(default=None, compare=False, repr=False)
    box: Box | None = field(default=None, compare=False, repr=False)  # the union of its lines' boxes
    lines: tuple[LineSpan, ...] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in BLOCK_KINDS:
            raise ValueError(f"unknown block kind {self.kind!r}")


@dataclass
class ParsedPage:
    page_index: int  # 0-based physical page (PDF) or logical page
    blocks: list[Block]
    parser: str  # "docling" | "plain-text"
    mode: str  # how the page was read, e.g. "docling-native-pdf", "docling-docx", "text-lines"
    label: str | None = None  # printed page label (PDF), or the line range of a text/code page
    removed: tuple[str, ...] = field(default=(), compare=False)  # running header/footer lines left out
    width: float | None = field(default=None, compare=False)  # page size in the units of the block boxes
    height: float | None = field(default=None, compare=False)

    @property
    def text(self) -> str:
        return "\n\n".join(b.text for b in self.blocks)


@dataclass
class ParsedDocument:
    title: str
    mime: str
    source_kind: str  # "pdf" | "docx" | "pptx" | "xlsx" | "csv" | "html" | "markdown" | "text" | "code"
    pages: list[ParsedPage] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # e.g. a guessed text encoding

    @property
    def page_count(self) -> int:
        return len(self.pages)


@dataclass(frozen=True)
class SourceFile:
    """One file as a reader gets it, after the checks of ``parse_document`` (size, content, ZIP
    bombs): the reader returns a ``ParsedDocument`` of this ``source_kind`` and ``mime``."""

    path: Path  # the bytes (may be a stored blob without the original extension)
    name: str  # the display name: error messages, title fallback
    source_kind: str  # the format's source kind (formats.py)
    mime: str  # the mime type of the file's extension
    options: ParseOptions


class DocumentParseError(Exception):
    """A file could not be parsed; the message names the file and the reason."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


# --------------------------------------------------------------------------- text helpers


def clean_inline(text: str) -> str:
    """One line of text: control characters dropped, every whitespace run (newlines too) -> one space."""
    text = _CONTROL.sub("", text)
    return " ".join(_SPACES.sub(" ", text).split())


def clean_multiline(text: str) -> str:
    """Text whose single newlines matter (lists): each line cleaned, empty lines dropped."""
    lines = (clean_inline(line) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def join_lines(left: str, right: str) -> str:
    """Join two wrapped lines of one paragraph: no space where CJK text meets, de-hyphenate
    ``infor-`` + ``mation``, else one space."""
    if not left:
        return right
    if not right:
        return left
    if _CJK_END.search(left) and _CJK_START.search(right):
        return left + right
    if len(left) >= 2 and left[-1] == "-" and left[-2].isalpha() and left[-2].islower() and right[0].islower():
        return left[:-1] + right
    return f"{left} {right}"


def render_table(rows: tuple[tuple[str, ...], ...] | list[list[str]]) -> str:
    """A table as one line per row, ``| a | b |``; the first row is the header. No separator line,
    so the text has exactly ``len(rows)`` lines. Cells are cleaned to one line; ``|`` is escaped."""
    lines = []
    for row in rows:
        cells = [clean_inline(c).replace("|", "\\|") for c in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table_block(rows: Sequence[Sequence[str]]) -> Block | None:
    """A table block from rows (header first): cells cleaned, empty rows dropped; None when empty."""
    clean_rows = tuple(tuple(clean_inline(c) for c in row) for row in rows)
    clean_rows = tuple(row for row in clean_rows if any(row))
    if not clean_rows:
        return None
    width = max(len(r) for r in clean_rows)
    clean_rows = tuple(r + ("",) * (width - len(r)) for r in clean_rows)
    return Block(kind="table", text=render_table(clean_rows), rows=clean_rows)
