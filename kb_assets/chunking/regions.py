"""The regions of the page images that a chunk covers, from the geometry its pages' blocks kept.

A chunk's content is found, whitespace-normalized, in the joined text of its pages (the lineage
property, ``pipeline/lineage.py``): this module finds it there and maps the characters it covers back to
the rows of the blocks they came from (``Block.lines``: a character span and a box each). A chunk's
regions are the boxes of the rows it touches, joined per block, then per column: one rectangle for
a chunk within one column of one page, several for a chunk across a page break or columns. Boxes are
in page units with a top-left origin (``pages.width``/``height`` in the same units), so an image of
the page is scaled to them. Pages without geometry (DOCX, HTML, text, ...) give no regions.

When a text occurs more than once in its pages, the first occurrence after the previous chunk's is
taken (chunks come in reading order and do not overlap), else the first one.
"""

from __future__ import annotations

from typing import TypedDict

from kb_assets.lib.text import SPACE_NEAR_CJK, normalize_ws


class Region(TypedDict):
    """Where on a page a chunk's text lies (PDF points, top-left origin), stored with the chunk as JSON."""

    page_index: int
    l: float  # noqa: E741  (left, as stored)
    t: float
    r: float
    b: float


class _Text:
    """A document's page texts, whitespace-normalized as ``normalize_ws`` does, with the origin of
    every character: (page position, block number, offset in the block text)."""

    def __init__(self, pages: list[dict]):
        chars: list[str] = []
        origin: list[tuple[int, int, int]] = []
        self.page_start: list[int] = []
        for position, page in enumerate(pages):
            self.page_start.append(len(chars))
            if position and chars and chars[-1] != " ":
                chars.append(" ")  # pages are joined by a newline
                origin.append((-1, -1, -1))
            for number, block in enumerate(page.get("blocks") or []):
                if number and chars and chars[-1] != " ":
                    chars.append(" ")  # blocks by a blank line
                    origin.append((-1, -1, -1))
                for offset, ch in enumerate(block.get("text") or ""):
                    if ch.isspace():
                        if chars and chars[-1] != " ":
                            chars.append(" ")
                            origin.append((position, number, offset))
                        continue
                    chars.append(ch)
                    origin.append((position, number, offset))
        self.page_start.append(len(chars))
        text = "".join(chars)
        # the second half of normalize_ws: no space beside a CJK character
        keep = _kept_after_cjk_rule(text)
        self.text = "".join(ch for ch, k in zip(text, keep, strict=False) if k)
        self.origin = [o for o, k in zip(origin, keep, strict=False) if k]
        kept_before = [0]
        for k in keep:
            kept_before.append(kept_before[-1] + k)
        self.page_start = [kept_before[i] for i in self.page_start]


def _kept_after_cjk_rule(text: str) -> list[bool]:
    """Which characters ``normalize_ws`` keeps of already-collapsed text (spaces beside CJK go)."""
    keep = [True] * len(text)
    for match in SPACE_NEAR_CJK.finditer(text):
        keep[match.start()] = False
    return keep


def chunk_regions(chunks: list[dict], pages: list[dict]) -> list[list[Region]]:
    """The regions of each chunk (``content``, ``table_header``, ``page_index``, ``page_end``), in
    the order given; [] for a chunk whose pages have no geometry or whose text is not found."""
    pages = sorted(pages, key=lambda p: p["page_index"])
    if not any(b.get("box") for p in pages for b in p.get("blocks") or []):
        return [[] for _ in chunks]
    doc = _Text(pages)
    position_of = {p["page_index"]: n for n, p in enumerate(pages)}
    out: list[list[Region]] = []
    previous = 0
    for chunk in chunks:
        first, last = position_of.get(chunk["page_index"]), position_of.get(chunk["page_end"])
        if first is None or last is None:
            out.append([])
            continue
        lo, hi = doc.page_start[first], doc.page_start[last + 1]
        span = _find(doc.text, chunk, lo, hi, previous)
        if span is None:
            out.append([])
            continue
        previous = span[1]
        out.append(_regions(doc.origin[span[0] : span[1]], pages))
    return out


def _find(text: str, chunk: dict, lo: int, hi: int, previous: int) -> tuple[int, int] | None:
    """Where the chunk's normalized content lies in ``text[lo:hi]``: at or after ``previous`` when it
    can, else anywhere in the range; a table chunk's repeated header is left out when needed."""
    content = chunk["content"]
    candidates = [normalize_ws(content)]
    header = chunk.get("table_header")
    if header and content.startswith(header):
        candidates.append(normalize_ws(content[len(header) :]))
    for needle in candidates:
        if not needle:
            continue
        for start in (max(lo, min(previous, hi)), lo):
            at = text.find(needle, start, hi)
            if at >= 0:
                return at, at + len(needle)
    return None


def _regions(origins: list[tuple[int, int, int]], pages: list[dict]) -> list[Region]:
    """The boxes of the rows the characters came from: per block the rows touched, then joined per
    page and column."""
    touched: dict[tuple[int, int], list[int]] = {}
    for position, number, offset in origins:
        if position >= 0:
            span = touched.setdefault((position, number), [offset, offset])
            span[0], span[1] = min(span[0], offset), max(span[1], offset)
    boxes: list[tuple[int, list[float]]] = []
    for (position, number), (first, last) in sorted(touched.items()):
        block = pages[position]["blocks"][number]
        rows = [row for row in block.get("lines") or [] if row[0] <= last and row[1] > first]
        if rows:
            box = [min(r[2] for r in rows), min(r[3] for r in rows), max(r[4] for r in rows), max(r[5] for r in rows)]
        elif block.get("box"):
            box = list(block["box"])
        else:
            continue
        boxes.append((pages[position]["page_index"], box))
    return _join_columns(boxes)


def _join_columns(boxes: list[tuple[int, list[float]]]) -> list[Region]:
    """Consecutive boxes of one page whose horizontal extents overlap by half the narrower one join."""
    joined: list[tuple[int, list[float]]] = []
    for page_index, box in boxes:
        if joined and joined[-1][0] == page_index:
            last = joined[-1][1]
            overlap = min(last[2], box[2]) - max(last[0], box[0])
            if overlap >= 0.5 * min(last[2] - last[0], box[2] - box[0]) and box[1] >= last[1] - 1.0:
                last[:] = [min(last[0], box[0]), min(last[1], box[1]), max(last[2], box[2]), max(last[3], box[3])]
                continue
        joined.append((page_index, list(box)))
    return [
        {"page_index": p, "l": round(b[0], 2), "t": round(b[1], 2), "r": round(b[2], 2), "b": round(b[3], 2)}
        for p, b in joined
    ]
