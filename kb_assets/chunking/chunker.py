"""Content-aware chunks within pages: paragraphs and headings, tables by row groups, figures, code.

Each chunk keeps its page (``page_index``/``page_end``), its section and a deterministic id. ``content``
is what users see; ``embedding_input`` adds a locating prefix and always fits the model's window.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable

import polars as pl

from kb_assets.chunking.text import sha256_text, split_to_size
from kb_assets.storage.lake import CHUNKS_SCHEMA

TARGET_CHARS = 400      # paragraphs are packed up to this size...
MIN_CHARS = 200         # ...and a chunk under this size takes the next block too
TABLE_ROWS_PER_CHUNK = 12


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


@dataclass
class _Piece:
    kind: str
    content: str
    section_path: tuple[str, ...]
    table_header: str | None = None
    image_key: str | None = None


def chunk_id(document_id: str, page_index: int, position: int, content: str) -> str:
    """Deterministic: same document, page, position on the page and content give the same id."""
    key = f"{document_id}|{page_index}|{position}|{sha256_text(content)}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _table_pieces(block: dict, section: tuple[str, ...]) -> list[_Piece]:
    rows = block.get("rows") or []
    lines = block["text"].split("\n")
    if len(rows) < 2 or len(lines) != len(rows) and len(lines) != len(rows) + 1:
        return [_Piece("table", block["text"], section)]
    # the rendered table's first line is the header (a markdown separator line may follow it)
    header_lines = lines[: len(lines) - len(rows) + 1]
    body = lines[len(header_lines):]
    header = "\n".join(header_lines)
    pieces = []
    for start in range(0, len(body), TABLE_ROWS_PER_CHUNK):
        group = "\n".join(body[start:start + TABLE_ROWS_PER_CHUNK])
        pieces.append(_Piece("table", f"{header}\n{group}", section, table_header=header))
    return pieces


def page_pieces(blocks: list[dict], section: tuple[str, ...]) -> tuple[list[_Piece], tuple[str, ...]]:
    """The chunk pieces of one page's blocks, and the section path in force after the page."""
    pieces: list[_Piece] = []
    text_run: list[str] = []
    run_section = section

    def flush():
        nonlocal text_run
        if text_run:
            pieces.append(_Piece("paragraph", "\n\n".join(text_run), run_section))
            text_run = []

    for block in blocks:
        kind, text = block["kind"], block["text"].strip()
        if not text:
            continue
        if kind == "heading":
            flush()
            level = max(1, int(block.get("level") or 1))
            section = (*section[: level - 1], text)
            run_section = section
            text_run = [text]          # a heading opens the chunk of its section
            continue
        if kind == "table":
            flush()
            pieces.extend(_table_pieces(block, section))
            continue
        if kind in ("figure", "code"):
            flush()
            pieces.append(_Piece(kind, text, section, image_key=block.get("image_key")))
            continue
        for part in split_to_size(text, TARGET_CHARS):
            current = len("\n\n".join(text_run))
            if text_run and current >= MIN_CHARS and current + len(part) > TARGET_CHARS:
                flush()
                run_section = section
            if not text_run:
                run_section = section
            text_run.append(part)
    flush()
    return pieces, section


def embedding_prefix(title: str, section_path: tuple[str, ...], page_label: str) -> str:
    parts = [title, *section_path[-2:], page_label]
    return " > ".join(p for p in parts if p)


def fit_to_window(piece: _Piece, prefix: str, count_tokens: Callable[[list[str]], list[int]],
                  max_tokens: int) -> list[_Piece]:
    """Split a piece until prefix + content fits the model window (never truncated silently)."""
    (tokens,) = count_tokens([f"{prefix}\n{piece.content}"])
    if tokens <= max_tokens:
        return [piece]
    body = piece.content
    header = ""
    if piece.table_header:
        header = piece.table_header + "\n"
        body = piece.content[len(header):]
    if piece.table_header and "\n" in body:
        lines = body.split("\n")
        halves = ["\n".join(lines[: len(lines) // 2]), "\n".join(lines[len(lines) // 2:])]
    else:
        halves = split_to_size(body, max(20, len(body) // 2 + 1))
        if len(halves) == 1:  # a single unbreakable sentence: cut it by characters
            halves = [body[: len(body) // 2], body[len(body) // 2:]]
    out: list[_Piece] = []
    for half in halves:
        sub = _Piece(piece.kind, header + half, piece.section_path, piece.table_header, piece.image_key)
        out.extend(fit_to_window(sub, prefix, count_tokens, max_tokens))
    return out


def chunk_document(pages: list[dict], doc: DocumentContext, count_tokens: Callable[[list[str]], list[int]],
                   max_tokens: int) -> pl.DataFrame:
    """Chunk rows (lake ``chunks`` schema) of a document's pages, in page and position order."""
    rows = []
    section: tuple[str, ...] = ()
    chunk_index = 0
    for page in sorted(pages, key=lambda p: p["page_index"]):
        pieces, section = page_pieces(page["blocks"], section)
        label = page.get("page_label") or str(page["page_index"] + 1)
        position = 0
        for piece in pieces:
            prefix = embedding_prefix(doc.title, piece.section_path, f"page {label}")
            for fitted in fit_to_window(piece, prefix, count_tokens, max_tokens):
                embedding_input = f"{prefix}\n{fitted.content}"
                rows.append({
                    "chunk_id": chunk_id(doc.document_id, page["page_index"], position, fitted.content),
                    "document_id": doc.document_id,
                    "knowledge_base_id": doc.knowledge_base_id,
                    "document_version": doc.version,
                    "document_title": doc.title,
                    "source_uri": doc.source_uri,
                    "source_kind": doc.source_kind,
                    "mime": doc.mime,
                    "page_index": page["page_index"],
                    "page_end": page["page_index"],
                    "page_label": page.get("page_label"),
                    "chunk_index": chunk_index,
                    "kind": fitted.kind,
                    "section_title": fitted.section_path[-1] if fitted.section_path else None,
                    "content": fitted.content,
                    "embedding_input": embedding_input,
                    "embedding_input_sha": sha256_text(embedding_input),
                    "table_header": fitted.table_header,
                    "image_key": fitted.image_key,
                    "run_id": doc.run_id,
                })
                position += 1
                chunk_index += 1
    return pl.DataFrame(rows, schema=CHUNKS_SCHEMA)

