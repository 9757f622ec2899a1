"""Plain text and source code, read without docling (it refuses ``.py`` and friends).

Decoding: UTF-8 (a BOM is dropped); otherwise charset-normalizer's best guess; otherwise latin-1.
A non-UTF-8 decoding is reported in ``ParsedDocument.warnings``.

Pages are ~``PAGE_LINES`` source lines (cut at a blank line in the last quarter of the window when
there is one). Text: paragraphs (blank-line separated) whose lines are joined by single spaces.
Code: blank-line separated ``code`` blocks that keep their lines and indentation (tabs expanded,
trailing spaces dropped).
"""

from __future__ import annotations

from pathlib import Path

from kb_assets.parsing.model import Block, DocumentParseError, ParsedDocument, ParsedPage, clean_inline, join_lines
from kb_assets.parsing.paginate import split_huge

PARSER = "plain-text"
MODE = "text-lines"
PAGE_LINES = 60


def decode(data: bytes, name: str) -> tuple[str, str | None]:
    """Text and a warning when it was not UTF-8."""
    if b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DocumentParseError(name, "binary content (NUL bytes), not a text file")
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError:
        pass
    try:
        from charset_normalizer import from_bytes

        best = from_bytes(data).best()
        if best is not None and best.encoding:
            return str(best), f"not UTF-8: decoded as {best.encoding} (detected by charset-normalizer)"
    except ImportError:  # pragma: no cover - charset-normalizer ships with requests
        pass
    return data.decode("latin-1"), "not UTF-8: decoded as latin-1 (no better guess)"


def _page_ranges(lines: list[str]) -> list[tuple[int, int]]:
    ranges = []
    start = 0
    while start < len(lines):
        end = min(start + PAGE_LINES, len(lines))
        if end < len(lines):
            for cut in range(end, start + (PAGE_LINES * 3) // 4, -1):
                if not lines[cut - 1].strip():
                    end = cut
                    break
        ranges.append((start, end))
        start = end
    return ranges


def _groups(lines: list[str]) -> list[list[str]]:
    groups: list[list[str]] = []
    current: list[str] = []
    for line in lines:
        if line.strip():
            current.append(line)
        elif current:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def _text_block(group: list[str]) -> Block | None:
    text = ""
    for line in group:
        text = join_lines(text, clean_inline(line))
    return Block("paragraph", text) if text else None


def _code_block(group: list[str]) -> Block | None:
    text = "\n".join(line.expandtabs(4).rstrip() for line in group)
    return Block("code", text) if text.strip() else None


def parse_text(path: Path, name: str, source_kind: str, mime: str) -> ParsedDocument:
    data = path.read_bytes()
    text, warning = decode(data, name)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    make = _code_block if source_kind == "code" else _text_block
    pages: list[ParsedPage] = []
    for start, end in _page_ranges(lines):
        blocks = [
            piece for b in (make(g) for g in _groups(lines[start:end])) if b is not None for piece in split_huge(b)
        ]
        if blocks:
            pages.append(ParsedPage(len(pages), blocks, PARSER, MODE))
    if not pages:
        raise DocumentParseError(name, "file has no text (only whitespace)")
    title = Path(name).name if source_kind == "code" else Path(name).stem
    return ParsedDocument(
        title=title, mime=mime, source_kind=source_kind, pages=pages, warnings=[warning] if warning else []
    )

