"""An independent check of chunk regions: pypdfium2's own text extraction (not docling-parse, where
the regions come from) gives every word of a PDF page with its box; a chunk's words are aligned to
its pages' words, and the share of the aligned words whose box centre falls inside one of the
chunk's regions on that page is the chunk's score. Shared by the test on the sample corpus and
``benchmarks/regions.py`` (the R manuals).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

_WORD = re.compile(r"\w+")
TOLERANCE = 2.0  # points a word centre may lie outside a region (rounding of boxes)
MIN_RUN = 3  # aligned runs shorter than this (common words matched elsewhere) are not counted


@dataclass
class Word:
    text: str
    page_index: int
    x: float  # box centre, top-left origin, PDF points
    y: float
    n: int = 0  # position in the document's word sequence


def pdf_words(path: Path) -> tuple[dict[int, list[Word]], dict[int, tuple[float, float]]]:
    """Per page, its words (runs of word characters) with their box centres; and each page's size."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(path))
    words: dict[int, list[Word]] = {}
    sizes: dict[int, tuple[float, float]] = {}
    try:
        for index in range(len(pdf)):
            page = pdf[index]
            width, height = page.get_size()
            sizes[index] = (width, height)
            textpage = page.get_textpage()
            count = textpage.count_chars()
            text = textpage.get_text_range(0, count) if count else ""
            out: list[Word] = []
            for match in _WORD.finditer(text):
                boxes = [textpage.get_charbox(i) for i in range(match.start(), min(match.end(), count))]
                boxes = [b for b in boxes if b[2] > b[0] or b[3] > b[1]]
                if not boxes:
                    continue
                left, right = min(b[0] for b in boxes), max(b[2] for b in boxes)
                bottom, top = min(b[1] for b in boxes), max(b[3] for b in boxes)
                out.append(Word(match.group().lower(), index, (left + right) / 2, height - (bottom + top) / 2))
            words[index] = out
    finally:
        n = 0
        for index in sorted(words):
            for word in words[index]:
                word.n, n = n, n + 1
        pdf.close()
    return words, sizes


def align(chunk: dict, words: dict[int, list[Word]], after: int = -1) -> list[Word]:
    """The words of the chunk's pages (past position ``after``) that its own words align to, in runs of
    at least ``MIN_RUN`` (difflib)."""
    content = chunk["content"]
    header = chunk.get("table_header")
    if header and content.startswith(header):
        content = content[len(header) :]
    tokens = [t.lower() for t in _WORD.findall(content)]
    page_words = [w for p in range(chunk["page_index"], chunk["page_end"] + 1) for w in words.get(p, []) if w.n > after]
    matcher = difflib.SequenceMatcher(None, tokens, [w.text for w in page_words], autojunk=False)
    minimum = min(MIN_RUN, len(tokens))
    return [
        page_words[block.b + k]
        for block in matcher.get_matching_blocks()
        if block.size >= minimum
        for k in range(block.size)
    ]


def share_inside(chunk: dict, aligned: list[Word]) -> float | None:
    """The share of the aligned words whose centre is inside one of the chunk's regions."""
    if not aligned:
        return None
    regions = chunk["regions"] or []
    inside = sum(
        1
        for w in aligned
        if any(
            r["page_index"] == w.page_index
            and r["l"] - TOLERANCE <= w.x <= r["r"] + TOLERANCE
            and r["t"] - TOLERANCE <= w.y <= r["b"] + TOLERANCE
            for r in regions
        )
    )
    return inside / len(aligned)


def regions_inside_pages(chunk: dict, sizes: dict[int, tuple[float, float]]) -> bool:
    """Every region lies on one of the chunk's pages, within the page (1 pt of slack)."""
    for r in chunk["regions"] or []:
        if not chunk["page_index"] <= r["page_index"] <= chunk["page_end"]:
            return False
        width, height = sizes[r["page_index"]]
        if not (-1 <= r["l"] < r["r"] <= width + 1 and -1 <= r["t"] < r["b"] <= height + 1):
            return False
    return True


def measure(path: Path, chunks: list[dict]) -> dict:
    """Scores of a PDF's chunk rows (dicts of the lake ``chunks`` table, in order): mean, minimum, how
    many chunks lack regions or lie outside their pages, the worst chunks; and, as a control that the
    measure can fail, the mean score of each chunk against the regions of the chunk three before it,
    and the mean share of its page that a region covers."""
    words, sizes = pdf_words(path)
    scored = []
    cursor = -1
    for chunk in chunks:
        # a text found more than once on its pages (a short code line) is taken after the previous
        # chunk's words when it aligns as well there: chunks come in reading order
        anywhere, onward = align(chunk, words), align(chunk, words, cursor)
        aligned = onward if len(onward) >= 0.9 * len(anywhere) else anywhere
        if aligned:
            cursor = max(w.n for w in aligned)
        score = share_inside(chunk, aligned)
        if score is not None:
            scored.append((score, chunk))
    scores = [s for s, _ in scored]
    return {
        "chunks": len(chunks),
        "scored": len(scored),
        "without_regions": sum(1 for c in chunks if not c["regions"]),
        "outside_page": sum(1 for c in chunks if not regions_inside_pages(c, sizes)),
        "mean": sum(scores) / len(scores) if scores else 0.0,
        "min": min(scores) if scores else 0.0,
        "control_mean": _control(chunks, words),
        "area_share": _area_share(chunks, sizes),
        "worst": [(round(s, 3), c["page_index"], c["content"][:80]) for s, c in sorted(scored, key=lambda x: x[0])[:5]],
    }


def _control(chunks: list[dict], words: dict[int, list[Word]]) -> float:
    scores = [
        share_inside({**chunk, "regions": other["regions"]}, align(chunk, words))
        for other, chunk in zip(chunks, chunks[3:], strict=False)
    ]
    scores = [s for s in scores if s is not None]
    return sum(scores) / len(scores) if scores else 0.0


def _area_share(chunks: list[dict], sizes: dict[int, tuple[float, float]]) -> float:
    shares = [
        (r["r"] - r["l"]) * (r["b"] - r["t"]) / (sizes[r["page_index"]][0] * sizes[r["page_index"]][1])
        for c in chunks
        for r in c["regions"] or []
    ]
    return sum(shares) / len(shares) if shares else 0.0
