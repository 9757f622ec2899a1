"""Plain text and source code, read without docling (it refuses ``.py`` and friends).

Decoding (``decode``, also for Markdown, CSV and HTML): UTF-8 (a BOM is dropped), UTF-16/32 with a
BOM; otherwise the encoding charset-normalizer finds the bytes read as text in (cp1252 when it reads
as well as the best guess: the common Western single-byte encoding); otherwise the file is refused as
not text in a known encoding (random bytes are not published as mojibake). A non-UTF-8 decoding is
reported in ``ParsedDocument.warnings``.

Code (mode ``code-definitions``): a page holds whole top-level definitions: a definition starts at
a non-indented line after a blank line (so a comment or decorator right above a ``def`` stays with
it; closing ``}``/``end`` lines never start one), and consecutive definitions share a page up to
``PAGE_LINES`` lines; a longer definition continues on further pages by line range. Blocks are
blank-line separated ``code`` blocks that keep their lines and indentation (tabs expanded, trailing
spaces dropped).

Text (mode ``text-lines``): a page starts at every top-level heading (a line underlined with
``===``/``---``/``~~~``, or a Markdown ``#`` line; "top" as for DOCX: the smallest level used at least
twice), and a long section continues every ~``PAGE_LINES`` lines (cut at a blank line in the last
quarter of the window when there is one). Paragraphs are blank-line separated, their lines joined by
single spaces; headings are ``heading`` blocks (the underline itself is not text).

Every page's ``label`` is its line range in the file, ``lines 12-58`` (1-based, inclusive).
"""

from __future__ import annotations

import re
from pathlib import Path

from kb_assets.parsing.model import (
    Block,
    DocumentParseError,
    ParsedDocument,
    ParsedPage,
    SourceFile,
    clean_inline,
    join_lines,
)
from kb_assets.parsing.paginate import split_huge

PARSER = "plain-text"
MODE = "text-lines"
MODE_CODE = "code-definitions"
PAGE_LINES = 60


def decode(data: bytes, name: str) -> tuple[str, str | None]:
    """Text and a warning when it was not UTF-8; DocumentParseError when it is no text in a known encoding."""
    boms = (
        (b"\xff\xfe\x00\x00", "utf-32"),
        (b"\x00\x00\xfe\xff", "utf-32"),
        (b"\xff\xfe", "utf-16"),
        (b"\xfe\xff", "utf-16"),
    )
    bom = next((encoding for mark, encoding in boms if data.startswith(mark)), None)
    if b"\x00" in data[:8192] and bom is None:
        raise DocumentParseError(name, "binary content (NUL bytes), not a text file")
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError:
        pass
    if bom is not None:
        try:
            return data.decode(bom), f"not UTF-8: decoded as {bom} (byte order mark)"
        except UnicodeDecodeError:
            raise DocumentParseError(
                name, f"not text in a known encoding (a {bom} byte order mark, but the bytes after it are not {bom})"
            ) from None
    from charset_normalizer import from_bytes

    matches = from_bytes(data)
    best = matches.best()
    if best is None or not best.encoding:
        raise DocumentParseError(
            name,
            "not text in a known encoding (not UTF-8 nor UTF-16 with a byte order mark, "
            "and no single- or multi-byte encoding reads it as text): save it as UTF-8",
        )
    western = next(
        (m for m in matches if m.encoding == "cp1252" and m.chaos <= best.chaos and m.coherence >= best.coherence), None
    )
    chosen = western or best
    return str(chosen), f"not UTF-8: decoded as {chosen.encoding} (detected by charset-normalizer)"


def _page_ranges(lines: list[str], start: int = 0, stop: int | None = None) -> list[tuple[int, int]]:
    """Windows of ~PAGE_LINES lines over lines[start:stop], cut at a blank line when one is near."""
    stop = len(lines) if stop is None else stop
    ranges = []
    while start < stop:
        end = min(start + PAGE_LINES, stop)
        if end < stop:
            for cut in range(end, start + (PAGE_LINES * 3) // 4, -1):
                if not lines[cut - 1].strip():
                    end = cut
                    break
        ranges.append((start, end))
        start = end
    return ranges


_CLOSING = re.compile(r"^(?:[}\])]|end\b|fi\b|esac\b|done\b|#endif)")
_UNDERLINE = re.compile(r"^(=+|-+|~+)\s*$")
_ATX = re.compile(r"^(#{1,6})\s+\S")
_UNDERLINE_LEVEL = {"=": 1, "-": 2, "~": 3}


def _definition_starts(lines: list[str]) -> list[int]:
    """Indexes of lines that start a top-level definition (see the module docstring)."""
    starts = [0]
    for i in range(1, len(lines)):
        line = lines[i]
        if line.strip() and not line[0].isspace() and not lines[i - 1].strip() and not _CLOSING.match(line):
            starts.append(i)
    return starts


def _code_ranges(lines: list[str]) -> list[tuple[int, int]]:
    """Pages of whole definitions, up to PAGE_LINES lines; a longer definition by line windows."""
    starts = _definition_starts(lines)
    units = list(zip(starts, [*starts[1:], len(lines)], strict=False))
    ranges: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    for start, end in units:
        if end - start > PAGE_LINES:
            if current:
                ranges.append(current)
                current = None
            ranges.extend(_page_ranges(lines, start, end))
        elif current and end - current[0] <= PAGE_LINES:
            current = (current[0], end)
        else:
            if current:
                ranges.append(current)
            current = (start, end)
    if current:
        ranges.append(current)
    return ranges


def _headings(lines: list[str]) -> dict[int, tuple[int, int]]:
    """Heading lines of a text file: index -> (level, number of lines it takes)."""
    found: dict[int, tuple[int, int]] = {}
    for i, line in enumerate(lines):
        text = line.strip()
        if not text:
            continue
        atx = _ATX.match(text)
        if atx:
            found[i] = (len(atx.group(1)), 1)
            continue
        if i + 1 < len(lines) and not line[0].isspace() and len(text) <= 120:
            under = _UNDERLINE.match(lines[i + 1].strip())
            if under and len(under.group(1)) >= max(3, int(len(text) * 0.6)) and not _UNDERLINE.match(text):
                found[i] = (_UNDERLINE_LEVEL[under.group(1)[0]], 2)
    return found


def _text_ranges(lines: list[str], headings: dict[int, tuple[int, int]]) -> list[tuple[int, int]]:
    from collections import Counter

    levels = Counter(level for level, _ in headings.values())
    repeated = [level for level, n in levels.items() if n >= 2]
    top = min(repeated) if repeated else (min(levels) if levels else 0)
    cuts = sorted({0, *(i for i, (level, _) in headings.items() if level <= top), len(lines)})
    ranges: list[tuple[int, int]] = []
    for start, end in zip(cuts, cuts[1:], strict=False):
        ranges.extend(_page_ranges(lines, start, end))
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


def _text_blocks(lines: list[str], start: int, end: int, headings: dict[int, tuple[int, int]]) -> list[Block]:
    blocks: list[Block] = []
    group: list[str] = []

    def flush() -> None:
        if group:
            block = _text_block(group)
            if block is not None:
                blocks.extend(split_huge(block))
            group.clear()

    i = start
    while i < end:
        if i in headings:
            flush()
            level, span = headings[i]
            text = clean_inline(lines[i].strip().lstrip("#")) if span == 1 else clean_inline(lines[i])
            if text:
                blocks.append(Block("heading", text, level=level))
            i += span
            continue
        if lines[i].strip():
            group.append(lines[i])
        else:
            flush()
        i += 1
    flush()
    return blocks


def _label(lines: list[str], start: int, end: int) -> str:
    while start < end - 1 and not lines[start].strip():
        start += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return f"lines {start + 1}-{end}"


def parse_text(file: SourceFile) -> ParsedDocument:
    """Plain text: pages at top-level headings and every ~``PAGE_LINES`` lines (mode ``text-lines``)."""
    return _parse_lines(file, code=False)


def parse_code(file: SourceFile) -> ParsedDocument:
    """Source code: pages of whole top-level definitions (mode ``code-definitions``)."""
    return _parse_lines(file, code=True)


def _parse_lines(file: SourceFile, code: bool) -> ParsedDocument:
    name = file.name
    data = file.path.read_bytes()
    text, warning = decode(data, name)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    pages: list[ParsedPage] = []
    if code:
        for start, end in _code_ranges(lines):
            blocks = [
                piece
                for b in (_code_block(g) for g in _groups(lines[start:end]))
                if b is not None
                for piece in split_huge(b)
            ]
            if blocks:
                pages.append(ParsedPage(len(pages), blocks, PARSER, MODE_CODE, _label(lines, start, end)))
    else:
        headings = _headings(lines)
        for start, end in _text_ranges(lines, headings):
            blocks = _text_blocks(lines, start, end, headings)
            if blocks:
                pages.append(ParsedPage(len(pages), blocks, PARSER, MODE, _label(lines, start, end)))
    if not pages:
        raise DocumentParseError(name, "file has no text (only whitespace)")
    title = Path(name).name if code else Path(name).stem
    return ParsedDocument(
        title=title, mime=file.mime, source_kind=file.source_kind, pages=pages, warnings=[warning] if warning else []
    )
