"""The windows of a page's text that hold a question's terms, and the terms' hits and rarity (issue 15): what
``context.py`` (the passage handed to the reader), ``prose.py``, ``tables.py`` and page coverage
(``strategies/pageindex.py``) read. See ``context.py`` for how a passage is chosen.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from kb_assets.retrieval.lexical_query import code_tokens
from kb_assets.retrieval.rerank import question_words

CHUNK_WEIGHT = 1.0
# what holding the whole chunk is worth, in units of an average term's weight

Term = str | tuple[str, ...]  # a term: one form, or several forms any of which counts for it


def question_terms(query: str, translations: dict[str, list[str]] | None = None) -> list[Term]:
    """The question's content words with their forms (``rerank.question_words``: stems, a Chinese word's
    English words) and its identifiers and code tokens kept whole."""
    return [word.forms for word in question_words(query, translations)] + list(code_tokens(query))


def _find(page: str, content: str) -> tuple[int, int] | None:
    """(start, end) of the content in the page: as it is, else ignoring whitespace (a PDF's line breaks,
    the spaces chunking drops next to Chinese characters)."""
    head, tail = content.strip()[:48], content.strip()[-48:]
    start = page.find(head) if head else -1
    if start >= 0:
        end = page.find(tail, start)
        return start, min(end + len(tail) if end >= 0 else start + len(content.strip()), len(page))
    kept = [i for i, ch in enumerate(page) if not ch.isspace()]
    squeezed, flat = "".join(page[i] for i in kept), "".join(content.split())
    start = squeezed.find(flat[:40]) if flat else -1
    if start < 0:
        return None
    end = squeezed.find(flat[-40:], start)
    end = end + len(flat[-40:]) if end >= 0 else start + len(flat)
    return kept[start], kept[min(end, len(kept)) - 1] + 1


def _snap(text: str, start: int, end: int) -> tuple[int, int]:
    """[start, end) without a word cut at either edge."""
    if start > 0 and not text[start - 1].isspace():
        space = text.find(" ", start, min(end, start + 24))
        start = space + 1 if space >= 0 else start
    if end < len(text) and not text[end].isspace():
        space = text.rfind(" ", max(start, end - 24), end)
        end = space if space > start else end
    return start, end


def _pattern(form: str) -> str:
    """A form as a regular expression: Chinese across whitespace, Latin as it is (word edges are checked
    on each match: a look-behind in front of the pattern makes ``re`` try every position, 30x slower)."""
    return r"\s*".join(map(re.escape, form)) if not form[:1].isascii() else re.escape(form)


def _word_edges(folded: str, start: int, end: int) -> bool:
    """A Latin match begins a word (a one-letter one is a whole word); a Chinese one always counts."""
    if not folded[start].isascii():
        return True
    if start > 0 and _alnum(folded[start - 1]):
        return False
    return end - start > 1 or end == len(folded) or not _alnum(folded[end])


def _alnum(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def occurrences(terms: list[Term], text: str) -> dict[tuple[str, ...], list[tuple[int, int]]]:
    """Each term's (start, end) spans in the text, by its forms (any form counts for it)."""
    folded = text.casefold()
    squeezed = "".join(folded.split())  # a plain substring test first: most terms are not on most pages
    out: dict[tuple[str, ...], list[tuple[int, int]]] = {}
    for term in terms:
        forms = tuple(f.casefold() for f in ((term,) if isinstance(term, str) else term) if f)
        if not forms or forms in out:
            continue
        if not any(f in (folded if f[:1].isascii() else squeezed) for f in forms):
            out[forms] = []
            continue
        pattern = "|".join(_pattern(f) for f in sorted(forms, key=len, reverse=True))
        out[forms] = [m.span() for m in re.finditer(pattern, folded) if _word_edges(folded, *m.span())]
    return out


def rarity(found: list[dict[tuple[str, ...], list[tuple[int, int]]]]) -> dict[tuple[str, ...], float]:
    """Each term's weight from its ``occurrences`` in n texts (the result pages):
    log(1 + (n + 1) / (df + 0.5)), df the texts holding it."""
    keys = {key for spans in found for key in spans}
    return {key: math.log(1 + (len(found) + 1) / (sum(1 for spans in found if spans.get(key)) + 0.5)) for key in keys}


def _best(
    length: int,
    hits: list[tuple[int, int, tuple[str, ...]]],
    weight: dict[tuple[str, ...], float],
    budget: int,
    chunk: tuple[int, int] | None = None,
    chunk_value: float = 0.0,
) -> tuple[int, float]:
    """(start, value) of the best window of ``budget`` characters over a text of ``length``: the weight of
    the distinct terms it holds (plus ``chunk_value`` when it holds the whole ``chunk``); ties go to the
    window nearest the chunk (else the first). Windows start at an occurrence or end at one (or hold the
    chunk at either edge): the best set of occurrences is reached so. One pass: an occurrence enters
    when the window's end passes its end, and leaves when the window's start passes its start."""
    last = max(0, length - budget)
    starts = {0} | {max(0, min(a, last)) for a, _, _ in hits} | {max(0, min(e - budget, last)) for _, e, _ in hits}
    if chunk:
        starts |= {max(0, min(chunk[0], last)), max(0, min(chunk[1] - budget, last))}
    middle = (chunk[0] + chunk[1]) / 2 if chunk else None
    by_end = sorted(range(len(hits)), key=lambda i: hits[i][1])
    by_start = sorted(range(len(hits)), key=lambda i: hits[i][0])
    entered = left = 0
    counts: dict[tuple[str, ...], int] = {}
    inside: set[int] = set()
    value = 0.0
    best, best_key = 0, None
    for a in sorted(starts):
        b = a + budget
        while left < len(by_start) and hits[by_start[left]][0] < a:
            if by_start[left] in inside:
                key = hits[by_start[left]][2]
                counts[key] -= 1
                value -= weight[key] if counts[key] == 0 else 0.0
            left += 1
        while entered < len(by_end) and hits[by_end[entered]][1] <= b:
            if hits[by_end[entered]][0] >= a:
                inside.add(by_end[entered])
                key = hits[by_end[entered]][2]
                counts[key] = counts.get(key, 0) + 1
                value += weight[key] if counts[key] == 1 else 0.0
            entered += 1
        total = value + (chunk_value if chunk and a <= chunk[0] and chunk[1] <= b else 0.0)
        rank = (round(total, 9), -abs((a + b) / 2 - middle) if middle is not None else -a)
        if best_key is None or rank > best_key:
            best, best_key = a, rank
    # centre the window on what it holds, so that cutting at whitespace loses none of it
    held = [(h, e) for h, e, _ in hits if best <= h and e <= best + budget]
    if chunk and best <= chunk[0] and chunk[1] <= best + budget:
        held.append(chunk)
    if held:
        low, high = min(h for h, _ in held), max(e for _, e in held)
        best = max(0, min(last, int(low - (budget - (high - low)) / 2)))
    assert best_key is not None, "no window ranked"  # starts always holds 0
    return best, best_key[0]


def coverage(
    spans: dict[tuple[str, ...], list[tuple[int, int]]],
    length: int,
    weights: dict[tuple[str, ...], float] | None = None,
    budget: int = 800,
) -> float:
    """The weighted share of the terms (their ``occurrences`` in a page of ``length`` characters) that the
    page's best window of ``budget`` characters holds (0..1)."""
    weight = {key: (weights or {}).get(key, 1.0) for key in spans}
    total = sum(weight.values())
    if not total:
        return 0.0
    hits = [(a, b, key) for key, found in spans.items() for a, b in found]
    return _best(length, hits, weight, budget)[1] / total


def window(
    page_text: str,
    content: str,
    terms: list[Term],
    budget: int = 800,
    weights: dict[tuple[str, ...], float] | None = None,
    shown: Sequence[tuple[int, int]] = (),
    chunk_weight: float = CHUNK_WEIGHT,
    found: dict[tuple[str, ...], list[tuple[int, int]]] | None = None,
) -> tuple[str, int, int]:
    """(text, start, end): the window of the page for the chunk and the terms (see the module docstring);
    ``shown``: spans of this page already given, whose occurrences count for nothing. ``text`` is the page,
    or the chunk's content when the chunk is not found on it."""
    text = page_text or ""
    located = _find(text, content)
    if located is None:
        text = content[:budget]
        return text, 0, len(text)
    start, end = located
    if len(text) <= budget:
        return text, 0, len(text)
    spans = found if found is not None and text is page_text else occurrences(terms, text)
    weight = {key: (weights or {}).get(key, 1.0) for key in spans}
    average = sum(weight.values()) / len(weight) if weight else 1.0
    hits = [
        (a, b, key) for key, found in spans.items() for a, b in found if not any(s <= a and b <= e for s, e in shown)
    ]
    best, _ = _best(len(text), hits, weight, budget, (start, end), chunk_weight * average)
    a, b = _snap(text, best, best + budget)
    return text, a, b


def page_passage(
    page_text: str,
    content: str,
    terms: list[Term],
    budget: int = 800,
    weights: dict[tuple[str, ...], float] | None = None,
) -> str:
    """At most ``budget`` characters of the page for the chunk and the terms (see the module docstring)."""
    text, a, b = window(page_text, content, terms, budget, weights)
    return text[a:b].strip()


FIGURE = re.compile(r"^[$€£(\s-]*\d[\d,.]*\)?\s*%?$")  # a table cell that is a figure: "7,351", "(530.8)", "$ 28,408"


def is_table(content: str) -> bool:
    """A chunk or page that is mostly a table of figures (a statement: most of its lines are Markdown rows,
    most of whose cells after the label are numbers; results do not carry the chunk kind, and a statement
    page's best chunk is often its title block). A manual's table of options or names is not one."""
    lines = [line.strip() for line in content.splitlines() if line.strip()]
    rows = [line for line in lines if line.startswith("|")]
    if not rows or len(rows) * 2 <= len(lines):
        return False
    cells = [cell.strip() for row in rows for cell in row.strip("|").split("|")[1:] if cell.strip()]
    return bool(cells) and sum(bool(FIGURE.match(cell)) for cell in cells) * 2 > len(cells)
