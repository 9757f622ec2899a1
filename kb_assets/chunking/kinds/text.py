"""Paragraphs and lists (and blocks of a kind without its own chunker): packed into chunks of about
``MIN_CHARS``-``TARGET_CHARS`` characters, cut at sentence ends, without overlap."""

from __future__ import annotations

from kb_assets.chunking.walk import Walk

TEXT_KINDS = ("paragraph", "list")  # kinds whose sentence, cut by a page break, goes on on the next page


def chunk_text(walk: Walk, block: dict, text: str) -> None:
    walk.add_text(text, "paragraph")
