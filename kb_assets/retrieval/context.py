"""The passage handed to the reader: at most ``budget`` characters of the result's page around its chunk
(issue 15).

A chunk is 200-400 characters of text (tables up to 800); the detail a question asks for is often in the
chunk before or after the one that matched, on the same page. ``page_passage`` finds the chunk in its
page's text (Postgres ``pages.text``, read with the page facts every search already reads: no extra
round trip) and returns the window of the page of at most ``budget`` characters that holds the whole
chunk and the most distinct query terms (ties: the chunk nearest the middle), cut at whitespace. A chunk
not found in its page text (1% of chunks on the dev corpus: text a parser rewrote) gives its own
content, cut to the budget; a chunk longer than the budget gives its first ``budget`` characters.

Measured and dropped (dev split of ``benchmarks/detail_questions.jsonl``): a window anywhere on the page
chosen by query terms alone (distinct terms, or occurrences capped at 3), the chunk counting as one more
term, gave the same answer-in-context as the chunk-anchored window: the words a question shares with its
page are spread over the page, the detail's neighbourhood is not where they gather.
"""

from __future__ import annotations

import re

_SPACE = re.compile(r"\s+")
STEP = 16          # candidate window starts, every STEP characters


def _find(page: str, content: str) -> tuple[str, int, int] | None:
    """(text, start, end) of the content in the page: in the page as it is, else whitespace-collapsed."""
    head = content.strip()[:48]
    start = page.find(head) if head else -1
    if start >= 0:
        tail = content.strip()[-48:]
        end = page.find(tail, start)
        end = end + len(tail) if end >= 0 else start + len(content.strip())
        return page, start, min(end, len(page))
    flat_page, flat = _SPACE.sub(" ", page), _SPACE.sub(" ", content).strip()
    start = flat_page.find(flat[:48]) if flat else -1
    if start < 0:
        return None
    return flat_page, start, min(start + len(flat), len(flat_page))


def _snap(text: str, start: int, end: int) -> str:
    """text[start:end] without a word cut at either edge."""
    if start > 0 and not text[start - 1].isspace():
        space = text.find(" ", start, min(end, start + 24))
        start = space + 1 if space >= 0 else start
    if end < len(text) and not text[end].isspace():
        space = text.rfind(" ", max(start, end - 24), end)
        end = space if space > start else end
    return text[start:end].strip()


def page_passage(page_text: str, content: str, terms: list[str | tuple[str, ...]], budget: int = 800) -> str:
    """At most ``budget`` characters of the page around the chunk (see the module docstring). A term may
    be a tuple of forms (a word, its stem, its English words): any of them counts for it."""
    located = _find(page_text or "", content)
    if located is None:
        return content[:budget]
    text, start, end = located
    if len(text) <= budget:
        return text.strip()
    folded = text.casefold()
    groups = list(dict.fromkeys(tuple(f.casefold() for f in ((t,) if isinstance(t, str) else t) if f) for t in terms))
    positions = {group: [(m.start(), m.end()) for m in re.finditer("|".join(map(re.escape, group)), folded)]
                 for group in groups if group}
    if end - start >= budget:
        return _snap(text, start, start + budget)
    first, last = max(0, end - budget), min(start, len(text) - budget)
    middle = (start + end) / 2
    best, best_key = first, None
    for a in list(range(first, last + 1, STEP)) + [last]:
        b = a + budget
        covered = sum(1 for hits in positions.values() if any(a <= h and e <= b for h, e in hits))
        key = (covered, -abs((a + b) / 2 - middle))
        if best_key is None or key > best_key:
            best, best_key = a, key
    return _snap(text, best, best + budget)
