"""Content-aware chunks: paragraphs and headings, tables by row groups, figures, code by definition.

- Text (paragraphs, lists) is packed into chunks of about ``MIN_CHARS``-``TARGET_CHARS`` characters,
  cut at sentence ends, without overlap; a heading (or a run of headings) opens the chunk of its
  section, and a heading at the foot of a page goes on with its section's text. A sentence cut
  by a page break stays in one chunk, which then records ``page_index`` (its start) and ``page_end``.
- Tables: row groups of up to ``TABLE_TARGET_CHARS``, each with the header row repeated in front
  (``table_header``), never split inside a row (unless one row alone overflows the model window).
  A table that goes on at the top of the next page takes the header of the part before the break.
- Figures: their caption/alt text, linked to the figure image (``image_key``); a figure without a
  caption (``[Figure]``) has nothing to index, so its image goes with the text chunk before it (or
  the next one on its page).
- Code: by definition (``code.py``), the line range in the section title.
- Table-of-contents and index pages (``pages.is_toc``) give chunks of kind ``toc``.

Each chunk keeps its page range, its section and a deterministic id. ``content`` is what users see;
``embedding_input`` is a locating prefix (document title > section path > page label) and the
content, and always fits the model's window, counted with the model's tokenizer: a piece that does
not fit is split (never truncated). When the content-aware pass fails on a document, a rule-based
fallback chunks the plain page texts so the document goes on.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

import polars as pl

from kb_assets.chunking.code import code_units
from kb_assets.stores.lake import CHUNKS_SCHEMA
from kb_assets.text import join_pieces, sentences, sha256_text, split_to_size

TARGET_CHARS = 400        # text is packed up to this size...
MIN_CHARS = 200           # ...and a chunk under this size takes the next piece too
TABLE_TARGET_CHARS = 800  # row groups (header included) up to this size, at least one row
PREFIX_PART_CHARS = 80    # each part of the embedding prefix is at most this long
CHUNK_KINDS = ("paragraph", "heading", "table", "figure", "code", "toc")
_PLACEHOLDER = re.compile(r"^\[(?:figure|image|picture)\]$", re.IGNORECASE)   # a figure without caption
_SENTENCE_END = re.compile(r"[.!?。！？…:;：；)\]\"'”’]\s*$")

CountTokens = Callable[[list[str]], list[int]]


@dataclass(frozen=True)
class DocumentContext:
    document_id: str
    knowledge_base_id: str
    version: str
    title: str
    source_uri: str
    source_kind: str
    mime: str
    run_id: str


@dataclass(frozen=True)
class _Piece:
    kind: str
    content: str
    section_path: tuple[str, ...]
    page_index: int
    page_end: int
    table_header: str | None = None
    image_key: str | None = None
    code_name: str | None = None     # code: the definition's name...
    line_start: int | None = None    # ...and its first line in the page text

    @property
    def section_title(self) -> str | None:
        if self.code_name is not None and self.line_start is not None:
            last = self.line_start + self.content.count("\n")
            return f"{self.code_name} (lines {self.line_start}-{last})"
        return self.section_path[-1] if self.section_path else None


def chunk_id(document_id: str, page_index: int, position: int, content: str) -> str:
    """Deterministic: same document, page, position on the page and content give the same id."""
    key = f"{document_id}|{page_index}|{position}|{sha256_text(content)}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


# -- content-aware pieces ---------------------------------------------------------------------
def _header(block: dict) -> tuple[str, int] | None:
    """A table block's header (its first row's line, and a markdown separator line if there is one)
    and how many lines it takes; None when the block is not a table of rows with a header."""
    rows = block.get("rows") or []
    lines = block["text"].split("\n")
    header_lines = len(lines) - len(rows) + 1
    if len(rows) < 2 or header_lines not in (1, 2):
        return None
    return "\n".join(lines[:header_lines]), header_lines


def table_pieces(block: dict, section: tuple[str, ...], page_index: int,
                 continued: dict | None = None) -> list[_Piece]:
    """Row groups of a table block, each starting with the header row (never split inside a row).

    ``continued``: the table that ended the previous page. When this block (the first on its page)
    has as many columns and does not start with that table's header, it is the rest of that table:
    all its rows are data rows and that header is repeated in front of them.
    """
    rows = block.get("rows") or []
    lines = block["text"].split("\n")
    found = _header(block)
    previous = _header(continued) if continued is not None else None
    if (previous is not None and rows and len(rows[0]) == len((continued.get("rows") or [[]])[0])
            and lines[0] != previous[0].split("\n")[0] and len(lines) == len(rows)):
        header, body = previous[0], lines
    elif found is None:
        return [_Piece("table", block["text"], section, page_index, page_index)]
    else:
        header, body = found[0], lines[found[1]:]
    pieces, group, size = [], [], len(header)
    for line in body:
        if group and size + 1 + len(line) > TABLE_TARGET_CHARS:
            pieces.append(_Piece("table", "\n".join([header, *group]), section, page_index, page_index,
                                 table_header=header))
            group, size = [], len(header)
        group.append(line)
        size += 1 + len(line)
    pieces.append(_Piece("table", "\n".join([header, *group]), section, page_index, page_index, table_header=header))
    return pieces


def _ends_sentence(text: str) -> bool:
    return bool(_SENTENCE_END.search(text))


def _tree_sections(nodes: list[dict] | None) -> dict[int, tuple[str, ...]]:
    """page_index -> the titles of the deepest tree nodes in force on that page (root left out)."""
    if not nodes:
        return {}
    by_id = {n["node_id"]: n for n in nodes}
    out: dict[int, tuple[str, ...]] = {}
    for node in sorted(nodes, key=lambda n: n["ordinal"]):
        if node["depth"] == 0:
            continue
        path, parent = [node["title"]], by_id.get(node.get("parent_id"))
        while parent is not None and parent["depth"] > 0:
            path.insert(0, parent["title"])
            parent = by_id.get(parent.get("parent_id"))
        for index in range(node["start_page"], node["end_page"] + 1):
            if index not in out or len(path) >= len(out[index]) or node["start_page"] == index:
                out[index] = tuple(path)
    return out


class _TextRun:
    """Text being packed into one chunk: parts with the page each came from."""

    def __init__(self) -> None:
        self.parts: list[tuple[str, int]] = []
        self.section: tuple[str, ...] = ()
        self.headings_only = True

    def size(self) -> int:
        return len("\n\n".join(t for t, _ in self.parts))

    def add(self, text: str, page_index: int, section: tuple[str, ...], heading: bool = False) -> None:
        if not self.parts or (heading and self.headings_only):
            self.section = section      # a run of headings takes the section of its last heading
        self.parts.append((text, page_index))
        self.headings_only = self.headings_only and heading

    def take(self, kind: str) -> _Piece | None:
        if not self.parts:
            return None
        separator = "\n" if kind == "toc" else "\n\n"   # entries one a line, as printed
        piece = _Piece("heading" if self.headings_only and kind == "paragraph" else kind,
                       separator.join(t for t, _ in self.parts), self.section, self.parts[0][1], self.parts[-1][1])
        self.parts, self.headings_only = [], True
        return piece


def content_pieces(pages: list[dict], nodes: list[dict] | None = None,
                   toc_pages: set[int] | frozenset[int] = frozenset()) -> list[_Piece]:
    """The chunk pieces of a document's pages, in reading order."""
    pages = sorted(pages, key=lambda p: p["page_index"])
    tree_sections = _tree_sections(nodes)
    has_headings = any(b["kind"] == "heading" for p in pages for b in p["blocks"])
    pieces: list[_Piece] = []
    run = _TextRun()
    section: tuple[str, ...] = ()
    first_line = 1   # of the page in the document's text (page texts one after another, a blank line apart)

    pending_image: str | None = None   # an uncaptioned figure's image waiting for the next text chunk

    def flush(kind: str = "paragraph") -> None:
        nonlocal pending_image
        piece = run.take(kind)
        if piece is not None:
            if pending_image and piece.kind in ("paragraph", "heading") and piece.image_key is None:
                piece, pending_image = replace(piece, image_key=pending_image), None
            pieces.append(piece)

    def add_text(text: str, page_index: int, kind: str) -> None:
        # table-of-contents entries are packed whole (by lines), other text by sentences
        parts = [p for line in text.split("\n") for p in split_to_size(line, TARGET_CHARS)] if kind == "toc" \
            else split_to_size(text, TARGET_CHARS)
        for part in parts:
            size = run.size()
            if run.parts and size >= MIN_CHARS and size + 2 + len(part) > TARGET_CHARS:
                flush(kind)
            run.add(part, page_index, section)

    previous_table: dict | None = None   # the table that ended the previous page, if one did

    for number, page in enumerate(pages):
        page_index = page["page_index"]
        blocks = [b for b in page["blocks"] if b["text"].strip()]
        is_toc = page_index in toc_pages
        if not has_headings and page_index in tree_sections:
            section = tree_sections[page_index]
        if run.parts and (is_toc or not blocks or blocks[0]["kind"] not in ("paragraph", "list")):
            flush()
        elif run.parts and not run.headings_only:
            # the run ends in a sentence cut by the page break: the sentence's end comes along
            head, *rest = sentences(blocks[0]["text"].strip()) or [""]
            head, *more = split_to_size(head, TARGET_CHARS)
            run.add(head, page_index, section)
            flush()
            remainder = ""
            for sentence in (*more, *rest):
                remainder = join_pieces(remainder, sentence)
            blocks = ([{**blocks[0], "text": remainder}] if remainder else []) + blocks[1:]
        # (a run of headings only goes on: its section's text follows on this page)
        pending_image = None
        code_run: list[tuple[str, int]] = []
        line = first_line
        first_line += page["text"].count("\n") + 2
        for block in blocks:
            kind, text = block["kind"], block["text"].strip()
            block_line = line
            line += block["text"].count("\n") + 2
            if kind != "code" and code_run:
                pieces.extend(_code_pieces(code_run, section, page_index))
                code_run = []
            if is_toc:
                add_text(text, page_index, "toc")
                continue
            if kind == "heading":
                if not run.headings_only:
                    flush()      # consecutive headings open one chunk together
                level = max(1, int(block.get("level") or 1))
                section = (*section[: level - 1], text)
                run.add(text, page_index, section, heading=True)   # a heading opens its section's chunk
            elif kind == "table":
                flush()
                continued = previous_table if block is blocks[0] else None
                pieces.extend(table_pieces(block, section, page_index, continued))
            elif kind == "figure" and _PLACEHOLDER.match(text):
                # no caption to index: the figure's image goes with the text chunk before it (or after it)
                before = len(pieces)
                flush()
                image_key = block.get("image_key") or None
                last = pieces[-1] if pieces else None
                if image_key and last is not None and len(pieces) > before and last.image_key is None:
                    pieces[-1] = replace(last, image_key=image_key)
                elif image_key:
                    pending_image = image_key
            elif kind == "figure":
                flush()
                pieces.append(_Piece("figure", text, section, page_index, page_index,
                                     image_key=block.get("image_key") or None))
            elif kind == "code":
                flush()
                code_run.append((block["text"].strip("\n"), block_line))
            else:
                add_text(text, page_index, "paragraph")
        if code_run:
            pieces.extend(_code_pieces(code_run, section, page_index))
        previous_table = blocks[-1] if blocks and blocks[-1]["kind"] == "table" and not is_toc else None
        if is_toc:
            flush("toc")
        elif run.parts:
            next_page = pages[number + 1] if number + 1 < len(pages) else None
            continues = (next_page is not None and next_page["page_index"] == page_index + 1
                         and next_page["page_index"] not in toc_pages
                         and (run.headings_only or not _ends_sentence(run.parts[-1][0])))
            if not continues:
                flush()
    flush()
    return pieces


def _code_pieces(blocks: list[tuple[str, int]], section: tuple[str, ...], page_index: int) -> list[_Piece]:
    return [_Piece("code", unit.text, section, page_index, page_index, code_name=unit.name,
                   line_start=unit.first_line) for unit in code_units(blocks)]


def fallback_pieces(pages: list[dict]) -> list[_Piece]:
    """Rule-based chunks of the plain page texts (paragraphs packed by size), for when the
    content-aware pass fails: no blocks, tables or sections are needed."""
    pieces = []
    for page in sorted(pages, key=lambda p: p["page_index"]):
        current = ""
        for paragraph in (p.strip() for p in page["text"].split("\n\n")):
            for part in split_to_size(paragraph, TARGET_CHARS) if paragraph else []:
                if current and len(current) >= MIN_CHARS and len(current) + 2 + len(part) > TARGET_CHARS:
                    pieces.append(_Piece("paragraph", current, (), page["page_index"], page["page_index"]))
                    current = ""
                current = f"{current}\n\n{part}" if current else part
        if current:
            pieces.append(_Piece("paragraph", current, (), page["page_index"], page["page_index"]))
    return pieces


# -- the model window -------------------------------------------------------------------------
def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREFIX_PART_CHARS else text[: PREFIX_PART_CHARS - 1].rstrip() + "…"


def embedding_prefix(title: str, section_path: tuple[str, ...], page_label: str) -> str:
    """Document title > section path (its last two levels) > page label."""
    parts = [title, *section_path[-2:], page_label]
    return " > ".join(_short(p) for p in parts if p)


def _halves(piece: _Piece) -> list[_Piece]:
    """Split a piece in two: tables/code/toc by lines (a table keeps its header), text by sentences."""
    header = piece.table_header + "\n" if piece.table_header else ""
    body = piece.content[len(header):]
    lines = body.split("\n")
    if piece.kind in ("table", "code", "toc") and len(lines) > 1:
        cut = len(lines) // 2
        if piece.kind == "code":  # prefer a blank line near the middle
            blanks = [i for i, row in enumerate(lines) if not row.strip() and 0 < i < len(lines) - 1]
            if blanks:
                cut = min(blanks, key=lambda i: abs(i - cut))
        first, second = "\n".join(lines[:cut]).rstrip("\n"), "\n".join(lines[cut:]).lstrip("\n")
        second_line = None
        if piece.line_start is not None:
            second_line = piece.line_start + body[: len(body) - len(second)].count("\n")
        return [replace(piece, content=header + first),
                replace(piece, content=header + second, line_start=second_line)]
    halves = split_to_size(body, max(20, len(body) // 2 + 1))
    if len(halves) == 1:  # one unbreakable sentence: cut between characters (a space when there is one)
        middle = len(body) // 2
        space = body.rfind(" ", 0, middle)
        cut = space if space > len(body) // 4 else middle
        halves = [body[:cut].strip(), body[cut:].strip()]
    return [replace(piece, content=header + half) for half in halves if half]


def fit_to_window(pieces: list[tuple[_Piece, str]], count_tokens: CountTokens,
                  max_tokens: int) -> list[tuple[_Piece, str]]:
    """(piece, prefix) pairs split until every ``prefix + content`` fits ``max_tokens`` (counted with
    the model's tokenizer); nothing is truncated. Order is kept."""
    counts = count_tokens([f"{prefix}\n{piece.content}" for piece, prefix in pieces]) if pieces else []
    out: list[tuple[_Piece, str]] = []
    for (piece, prefix), tokens in zip(pieces, counts):
        if tokens <= max_tokens:
            out.append((piece, prefix))
            continue
        halves = _halves(piece)
        if len(halves) < 2 or any(len(h.content) >= len(piece.content) for h in halves):
            raise ValueError(f"page {piece.page_index + 1}: a {piece.kind} piece of {len(piece.content)} characters "
                             f"cannot be split to fit the {max_tokens}-token window")
        out.extend(fit_to_window([(h, prefix) for h in halves], count_tokens, max_tokens))
    return out


# -- chunk rows -------------------------------------------------------------------------------
def chunk_rows(pieces: list[_Piece], pages: list[dict], doc: DocumentContext, count_tokens: CountTokens,
               max_tokens: int) -> pl.DataFrame:
    labels = {p["page_index"]: p.get("page_label") for p in pages}
    with_prefix = [(piece, embedding_prefix(doc.title, piece.section_path,
                                            f"page {labels.get(piece.page_index) or piece.page_index + 1}"))
                   for piece in pieces]
    rows = []
    positions: dict[int, int] = {}
    for chunk_index, (piece, prefix) in enumerate(fit_to_window(with_prefix, count_tokens, max_tokens)):
        position = positions.get(piece.page_index, 0)
        positions[piece.page_index] = position + 1
        embedding_input = f"{prefix}\n{piece.content}"
        rows.append({
            "chunk_id": chunk_id(doc.document_id, piece.page_index, position, piece.content),
            "document_id": doc.document_id,
            "knowledge_base_id": doc.knowledge_base_id,
            "document_version": doc.version,
            "document_title": doc.title,
            "source_uri": doc.source_uri,
            "source_kind": doc.source_kind,
            "mime": doc.mime,
            "page_index": piece.page_index,
            "page_end": piece.page_end,
            "page_label": labels.get(piece.page_index),
            "chunk_index": chunk_index,
            "kind": piece.kind,
            "section_title": piece.section_title,
            "content": piece.content,
            "embedding_input": embedding_input,
            "embedding_input_sha": sha256_text(embedding_input),
            "table_header": piece.table_header,
            "image_key": piece.image_key,
            "run_id": doc.run_id,
        })
    return pl.DataFrame(rows, schema=CHUNKS_SCHEMA)


def chunk_document(pages: list[dict], doc: DocumentContext, count_tokens: CountTokens, max_tokens: int,
                   nodes: list[dict] | None = None, toc_pages: set[int] | frozenset[int] = frozenset()) -> pl.DataFrame:
    """Content-aware chunk rows (lake ``chunks`` schema) of a document's pages, in reading order."""
    return chunk_rows(content_pieces(pages, nodes, toc_pages), pages, doc, count_tokens, max_tokens)


def chunk_with_fallback(pages: list[dict], doc: DocumentContext, count_tokens: CountTokens, max_tokens: int,
                        nodes: list[dict] | None = None,
                        toc_pages: set[int] | frozenset[int] = frozenset()) -> tuple[pl.DataFrame, str | None]:
    """Content-aware chunks, or the rule-based fallback's when that fails; and why it failed (or None)."""
    try:
        return chunk_document(pages, doc, count_tokens, max_tokens, nodes, toc_pages), None
    except Exception as error:  # any bug in the smart pass: the plain page texts still make chunks
        reason = f"content-aware chunking failed ({type(error).__name__}: {error}); rule-based fallback used"
        return chunk_rows(fallback_pieces(pages), pages, doc, count_tokens, max_tokens), reason
