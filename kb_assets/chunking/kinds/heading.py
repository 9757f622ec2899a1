"""Headings: a heading (or a run of headings) opens the chunk of its section and sets the section path."""

from __future__ import annotations

from kb_assets.chunking.walk import Walk


def chunk_heading(walk: Walk, block: dict, text: str) -> None:
    if not walk.run.headings_only:
        walk.flush()  # consecutive headings open one chunk together
    level = max(1, int(block.get("level") or 1))
    walk.section = (*walk.section[: level - 1], text)
    walk.run.add(text, walk.page_index, walk.section, heading=True)  # a heading opens its section's chunk
