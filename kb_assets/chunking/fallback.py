"""The rule-based fallback chunker: the plain page texts, paragraphs packed by size. Used when the
content-aware pass fails on a document, so the document goes on; needs no blocks, tables or sections."""

from __future__ import annotations

from kb_assets.chunking.pieces import MIN_CHARS, TARGET_CHARS, Piece
from kb_assets.lib.text import split_to_size


def fallback_pieces(pages: list[dict]) -> list[Piece]:
    """Rule-based chunks of the plain page texts (paragraphs packed by size)."""
    pieces = []
    for page in sorted(pages, key=lambda p: p["page_index"]):
        current = ""
        for paragraph in (p.strip() for p in page["text"].split("\n\n")):
            for part in split_to_size(paragraph, TARGET_CHARS) if paragraph else []:
                if current and len(current) >= MIN_CHARS and len(current) + 2 + len(part) > TARGET_CHARS:
                    pieces.append(Piece("paragraph", current, (), page["page_index"], page["page_index"]))
                    current = ""
                current = f"{current}\n\n{part}" if current else part
        if current:
            pieces.append(Piece("paragraph", current, (), page["page_index"], page["page_index"]))
    return pieces
