"""The passage handed to the reader: at most ``budget`` characters of the result's page, chosen for the
question (issue 15).

A chunk is 200-400 characters of text (tables up to 800); the detail a question asks for is often in the
chunk before or after the one that matched, or elsewhere on the same page. ``passages`` gives every
result the window of its page's text (Postgres ``pages.text``, read with the page facts every search
already reads: no extra round trip) of at most ``budget`` characters that covers the most question
terms, each weighted by its rarity among the result pages (a term on every page weighs little, an
identifier such as ``write.table`` or ``--no-same-owner`` found on one weighs most), cut at whitespace.
Holding the whole chunk adds ``CHUNK_WEIGHT`` x an average term's weight (the chunk matched the query
by dense and BM25 score, which see meaning the terms miss); ties go to the window nearest the chunk. A
page's second result gets a window that shows what its first did not: occurrences already shown count
for nothing.

Terms are matched case-folded, a Latin form at the start of a word (a one-letter form as a whole word),
a Chinese form across the line breaks a PDF leaves inside Chinese text. The chunk is found in its page
as it is, else ignoring whitespace (chunks drop the spaces next to Chinese characters); a chunk not
found (tables rendered as Markdown, 1-2% of results) gives its own content, cut to the budget.

Issue 53: a table page's context is its head and compact rows (the whole table when it fits, else the rows of the
question's terms and its analyses' line items, then their neighbours; the periods asked where even those do not
fit: ``tables.py``), and a prose page's the sentences that hold the question's terms and figures
(``prose.py``) where they hold more of it than one window.

Measured on the dev split of ``benchmarks/detail_questions.jsonl`` (pageindex), answer-in-context @1 /
@5: the window around the chunk with the most distinct terms (before) en 0.84 / 0.93, zh 0.54 / 0.71;
this window en 0.86 / 0.95, zh 0.65 / 0.81 (zh: every question whose answer is on a top-5 result's page).
Chunk weight 0 (the chunk counts for nothing): en @5 0.92; 2: zh 0.63 / 0.79; a window that must hold
the chunk: en 0.84 / 0.95, zh 0.56 / 0.73 (with the whitespace-blind chunk finding not yet there).
"""

from __future__ import annotations

from kb_assets.lib.json_types import JsonObject
from kb_assets.retrieval.prose import prose_passage
from kb_assets.retrieval.tables import table_passage
from kb_assets.retrieval.windows import (
    CHUNK_WEIGHT,
    FIGURE,
    Term,
    coverage,
    is_table,
    occurrences,
    page_passage,
    question_terms,
    rarity,
    window,
)

__all__ = [
    "CHUNK_WEIGHT",
    "FIGURE",
    "Term",
    "coverage",
    "is_table",
    "occurrences",
    "page_passage",
    "passages",
    "question_terms",
    "rarity",
    "window",
]


def passages(
    rows: list[JsonObject],
    page_texts: dict[tuple[str, int], str],
    terms: list[Term],
    budget: int,
    chunk_weight: float = CHUNK_WEIGHT,
    table_budget: int = 0,
) -> None:
    """Set each result row's ``context`` (in place), rows in rank order; terms weighted by their rarity
    among the rows' pages, a page's later rows showing what its earlier ones did not. A context holds at most
    ``budget`` characters (prose); for a table chunk or a chunk on a page that is mostly table, ``table_budget``
    (when larger) bounds its ``content`` and ``context`` together, and the context is the page's head (title, units,
    column periods) and the rows around the one that matched (a statement's line item is asked with its period).
    No result's content + context passes the larger of the two (a longer content is cut to it, with no context)."""
    found = {key: occurrences(terms, text) for key, text in page_texts.items()}  # read once a page
    weights = rarity(list(found.values()))
    shown: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for row in rows:
        key = (row["documentId"], row["pageIndex"])
        page = page_texts.get(key) or ""
        table = table_budget > budget and (is_table(row["content"]) or is_table(page))  # off (0): nothing parsed
        ceiling = max(budget, table_budget)  # no result's content + context passes it
        room = min(ceiling - len(row["content"]), budget if not table else ceiling)
        if room <= 0:  # a chunk larger than the ceiling (a rule-based table piece): itself, cut, is the passage
            row["content"], row["context"] = row["content"][: ceiling - 1].rstrip() + "…", ""
            continue
        if table and is_table(page):
            row["context"], span = table_passage(
                page, row["content"], terms, room, weights, shown.get(key, []), found=found.get(key)
            )
        else:
            row["context"], span = prose_passage(
                page, row["content"], terms, room, weights, shown.get(key, []), chunk_weight, found.get(key)
            )
        shown.setdefault(key, []).append(span)
