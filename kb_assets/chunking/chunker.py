"""Content-aware chunks: paragraphs and headings, tables by row groups, figures, code by definition.

Each block goes to the chunker of its kind (``kinds/``: ``text.py`` paragraphs and lists, ``heading.py``,
``table.py``, ``figure.py``, ``code.py``); this module walks the pages and handles what spans blocks:

- Text is packed into chunks of about ``MIN_CHARS``-``TARGET_CHARS`` characters, cut at sentence
  ends, without overlap; a heading at the foot of a page goes on with its section's text. A sentence
  cut by a page break stays in one chunk, which then records ``page_index`` (its start) and ``page_end``.
- A table that goes on at the top of the next page takes the header of the part before the break.
- Table-of-contents and index pages (``pages.is_toc``) give chunks of kind ``toc``.
- Without heading blocks, sections come from the document's PageIndex tree.

Each chunk keeps its page range, its section, a deterministic id and the regions of its pages it
covers (``regions.py``, where the pages have geometry). ``content`` is what users see;
``embedding_input`` is a locating prefix (document title > section path > page label) and the
content, and always fits the model's window, counted with the model's tokenizer (``window.py``): a
piece that does not fit is split (never truncated). When the content-aware pass fails on a document,
the rule-based fallback (``fallback.py``) chunks the plain page texts so the document goes on.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import polars as pl

from kb_assets.chunking import CHUNKER_VERSION
from kb_assets.chunking.fallback import fallback_pieces
from kb_assets.chunking.kinds import TEXT_KINDS, chunker_for
from kb_assets.chunking.pieces import MIN_CHARS, TARGET_CHARS, Piece  # noqa: F401  (MIN_CHARS re-exported)
from kb_assets.chunking.regions import chunk_regions
from kb_assets.chunking.schema import CHUNKS_SCHEMA
from kb_assets.chunking.walk import Walk
from kb_assets.chunking.window import CountTokens, embedding_prefix, fit_to_window
from kb_assets.lib.text import join_pieces, sentences, sha256_text, split_to_size

CHUNK_KINDS = ("paragraph", "heading", "table", "figure", "code", "toc")
_SENTENCE_END = re.compile(r"[.!?。！？…:;：；)\]\"'”’]\s*$")


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
    pipeline_version: str = CHUNKER_VERSION  # recorded on every chunk row


def chunk_id(document_id: str, page_index: int, position: int, content: str) -> str:
    """Deterministic: same document, page, position on the page and content give the same id."""
    key = f"{document_id}|{page_index}|{position}|{sha256_text(content)}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


# -- content-aware pieces ---------------------------------------------------------------------
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


def content_pieces(
    pages: list[dict], nodes: list[dict] | None = None, toc_pages: set[int] | frozenset[int] = frozenset()
) -> list[Piece]:
    """The chunk pieces of a document's pages, in reading order."""
    pages = sorted(pages, key=lambda p: p["page_index"])
    tree_sections = _tree_sections(nodes)
    has_headings = any(b["kind"] == "heading" for p in pages for b in p["blocks"])
    walk = Walk()
    run = walk.run
    first_line = 1  # of the page in the document's text (page texts one after another, a blank line apart)

    for number, page in enumerate(pages):
        page_index = walk.page_index = page["page_index"]
        blocks = [b for b in page["blocks"] if b["text"].strip()]
        is_toc = page_index in toc_pages
        if not has_headings and page_index in tree_sections:
            walk.section = tree_sections[page_index]
        if run.parts and (is_toc or not blocks or blocks[0]["kind"] not in TEXT_KINDS):
            walk.flush()
        elif run.parts and not run.headings_only:
            # the run ends in a sentence cut by the page break: the sentence's end comes along
            head, *rest = sentences(blocks[0]["text"].strip()) or [""]
            head, *more = split_to_size(head, TARGET_CHARS)
            run.add(head, page_index, walk.section)
            walk.flush()
            remainder = ""
            for sentence in (*more, *rest):
                remainder = join_pieces(remainder, sentence)
            blocks = ([{**blocks[0], "text": remainder}] if remainder else []) + blocks[1:]
        # (a run of headings only goes on: its section's text follows on this page)
        walk.pending_image = None
        line = first_line
        first_line += page["text"].count("\n") + 2
        for position, block in enumerate(blocks):
            kind, text = block["kind"], block["text"].strip()
            walk.block_line, walk.first_on_page = line, position == 0
            line += block["text"].count("\n") + 2
            if walk.held_kind not in (None, kind):
                walk.release()
            if is_toc:
                walk.add_text(text, "toc")
                continue
            chunker_for(kind)(walk, block, text)
        walk.release()
        walk.previous_page_end = blocks[-1] if blocks and not is_toc else None
        if is_toc:
            walk.flush("toc")
        elif run.parts:
            next_page = pages[number + 1] if number + 1 < len(pages) else None
            continues = (
                next_page is not None
                and next_page["page_index"] == page_index + 1
                and next_page["page_index"] not in toc_pages
                and (run.headings_only or not _SENTENCE_END.search(run.parts[-1][0]))
            )
            if not continues:
                walk.flush()
    walk.flush()
    return walk.pieces


# -- chunk rows -------------------------------------------------------------------------------
def chunk_rows(
    pieces: list[Piece], pages: list[dict], doc: DocumentContext, count_tokens: CountTokens, max_tokens: int
) -> pl.DataFrame:
    labels = {p["page_index"]: p.get("page_label") for p in pages}
    with_prefix = [
        (
            piece,
            embedding_prefix(
                doc.title, piece.section_path, f"page {labels.get(piece.page_index) or piece.page_index + 1}"
            ),
        )
        for piece in pieces
    ]
    rows = []
    positions: dict[int, int] = {}
    for chunk_index, (piece, prefix) in enumerate(fit_to_window(with_prefix, count_tokens, max_tokens)):
        position = positions.get(piece.page_index, 0)
        positions[piece.page_index] = position + 1
        embedding_input = f"{prefix}\n{piece.content}"
        rows.append(
            {
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
                "pipeline_version": doc.pipeline_version,
            }
        )
    for row, regions in zip(rows, chunk_regions(rows, pages), strict=False):
        row["regions"] = regions
    return pl.DataFrame(rows, schema=CHUNKS_SCHEMA)


class OverBudget(ValueError):
    """A document makes more chunks than its budget allows (at least ``chunks``)."""

    def __init__(self, chunks: int, budget: int):
        super().__init__(f"at least {chunks} chunks, over the budget of {budget}")
        self.chunks, self.budget = chunks, budget


def within_budget(pieces: list[Piece], max_chunks: int | None) -> list[Piece]:
    """The pieces, unless they are more than the budget: every piece makes one chunk or more, so the
    refusal comes before the window is applied (tokenizing a huge document costs minutes)."""
    if max_chunks is not None and len(pieces) > max_chunks:
        raise OverBudget(len(pieces), max_chunks)
    return pieces


def chunk_document(
    pages: list[dict],
    doc: DocumentContext,
    count_tokens: CountTokens,
    max_tokens: int,
    nodes: list[dict] | None = None,
    toc_pages: set[int] | frozenset[int] = frozenset(),
    max_chunks: int | None = None,
) -> pl.DataFrame:
    """Content-aware chunk rows (lake ``chunks`` schema) of a document's pages, in reading order;
    ``OverBudget`` past ``max_chunks`` pieces."""
    pieces = within_budget(content_pieces(pages, nodes, toc_pages), max_chunks)
    return chunk_rows(pieces, pages, doc, count_tokens, max_tokens)


def chunk_with_fallback(
    pages: list[dict],
    doc: DocumentContext,
    count_tokens: CountTokens,
    max_tokens: int,
    nodes: list[dict] | None = None,
    toc_pages: set[int] | frozenset[int] = frozenset(),
    max_chunks: int | None = None,
) -> tuple[pl.DataFrame, str | None]:
    """Content-aware chunks, or the rule-based fallback's when that fails; and why it failed (or None).
    A document over the budget raises ``OverBudget`` (no fallback)."""
    try:
        return chunk_document(pages, doc, count_tokens, max_tokens, nodes, toc_pages, max_chunks), None
    except OverBudget:
        raise
    except Exception as error:  # any bug in the smart pass: the plain page texts still make chunks
        reason = f"content-aware chunking failed ({type(error).__name__}: {error}); rule-based fallback used"
        pieces = within_budget(fallback_pieces(pages), max_chunks)
        return chunk_rows(pieces, pages, doc, count_tokens, max_tokens), reason
