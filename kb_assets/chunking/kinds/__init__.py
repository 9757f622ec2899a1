"""Chunkers by block kind (``parsing.model.BLOCK_KINDS``).

A chunker is ``chunk_<kind>(walk, block, text)``: it reads one block (``text`` is its stripped text)
and adds to the walk (``walk.py``): pieces, text to pack, the section path, or a group of blocks that
ends at the next block of another kind (``walk.hold``). Blocks of a kind without a chunker are packed
as text. To chunk a new kind, add a module here with its function and one line below.
"""

from __future__ import annotations

from collections.abc import Callable

from kb_assets.chunking.kinds.code import chunk_code
from kb_assets.chunking.kinds.figure import chunk_figure
from kb_assets.chunking.kinds.heading import chunk_heading
from kb_assets.chunking.kinds.table import chunk_table
from kb_assets.chunking.kinds.text import TEXT_KINDS, chunk_text
from kb_assets.chunking.walk import Walk

BlockChunker = Callable[[Walk, dict, str], None]

BLOCK_CHUNKERS: dict[str, BlockChunker] = {
    "heading": chunk_heading,
    "paragraph": chunk_text,
    "list": chunk_text,
    "table": chunk_table,
    "figure": chunk_figure,
    "code": chunk_code,
}

__all__ = ["BLOCK_CHUNKERS", "TEXT_KINDS", "BlockChunker", "chunker_for"]


def chunker_for(kind: str) -> BlockChunker:
    """The chunker of a block kind (text packing for a kind without its own)."""
    return BLOCK_CHUNKERS.get(kind, chunk_text)
