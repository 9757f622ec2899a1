"""Figures: their caption/alt text, linked to the figure image (``image_key``). A figure without a
caption (``[Figure]``) has nothing to index, so its image goes with the text chunk before it (or the
next one on its page)."""

from __future__ import annotations

import re
from dataclasses import replace

from kb_assets.chunking.pieces import Piece
from kb_assets.chunking.walk import Walk

PLACEHOLDER = re.compile(r"^\[(?:figure|image|picture)\]$", re.IGNORECASE)  # a figure without caption


def chunk_figure(walk: Walk, block: dict, text: str) -> None:
    image_key = block.get("image_key") or None
    if not PLACEHOLDER.match(text):
        walk.flush()
        walk.pieces.append(Piece("figure", text, walk.section, walk.page_index, walk.page_index, image_key=image_key))
        return
    # no caption to index: the figure's image goes with the text chunk before it (or after it)
    before = len(walk.pieces)
    walk.flush()
    last = walk.pieces[-1] if walk.pieces else None
    if image_key and last is not None and len(walk.pieces) > before and last.image_key is None:
        walk.pieces[-1] = replace(last, image_key=image_key)
    elif image_key:
        walk.pending_image = image_key
