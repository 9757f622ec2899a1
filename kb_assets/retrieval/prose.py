"""A prose page's passage for a question: the sentences that hold its terms and figures (issue 53).

``prose_passage`` is what ``context.passages`` gives a result on a page that is not a table of figures: see its
docstring; the window of issue 15 (``context.window``) where the sentences hold no more of the question.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

from kb_assets.retrieval.windows import CHUNK_WEIGHT, Term, _find, occurrences, window

NEXT_TO = 0.75  # a sentence next to one chosen, in units of an average term's weight (an answer reads on)


SENTENCE_END = re.compile(
    r"(?<=[.!?;:])[\"”)]?\s+(?=[A-Z0-9(\"“$])|(?<=[。！？；])\s*|\n\s*\n|\n(?=\s*(?:[-•*#|]|\d+\.\s))"
)


def sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) of the text's sentences (a paragraph break, a list item or a table row also ends one)."""
    spans, start = [], 0
    for match in SENTENCE_END.finditer(text):
        if text[start : match.start()].strip():
            spans.append((start, match.start()))
        start = match.end()
    if text[start:].strip():
        spans.append((start, len(text)))
    return spans


def prose_passage(
    page_text: str,
    content: str,
    terms: list[Term],
    budget: int,
    weights: dict[tuple[str, ...], float] | None = None,
    shown: Sequence[tuple[int, int]] = (),
    chunk_weight: float = CHUNK_WEIGHT,
    found: dict[tuple[str, ...], list[tuple[int, int]]] | None = None,
) -> tuple[str, tuple[int, int]]:
    """(text, shown span) of a prose page for the chunk and the terms (issue 53): the sentences that hold the
    question's terms and figures, best first by what they add (a term not yet held weighs its rarity, one held
    already a quarter; a sentence with a figure beside a term, one of the matched chunk's, and one next to a sentence
    chosen, a term's average more: an answer reads on), then their neighbours, in page order ("…" where sentences are
    left out), within ``budget``. Where they hold no more of the question than the best window of ``window`` (half
    an average term's weight), the window is given: a detail that sits in one place keeps its surroundings. A page
    that fits, or a chunk not found on its page, gives the window.

    Development filings (docs/retrieval-log.md, section 10): passage@5 with the window 0.82, these sentences 0.85
    (0.84 with the window kept where it holds as much; the manuals' answers moved otherwise: Chinese answer@1 0.71 ->
    0.67)."""
    located = _find(page_text, content)
    if located is None or len(page_text) <= budget:
        text, a, b = window(page_text, content, terms, budget, weights, shown, chunk_weight, found)
        return text[a:b].strip(), (a, b)
    spans = [(a, b) for a, b in sentences(page_text) if b - a <= budget]
    found = found if found is not None else occurrences(terms, page_text)
    weight = {key: (weights or {}).get(key, 1.0) for key in found}
    average = sum(weight.values()) / len(weight) if weight else 1.0
    held_by: list[set[tuple[str, ...]]] = [set() for _ in spans]  # the terms each sentence holds
    starts = [a for a, _ in spans]
    for key, hits in found.items():
        for h, e in hits:
            n = bisect.bisect_right(starts, h) - 1
            if n >= 0 and e <= spans[n][1] and not _inside(h, e, shown):
                held_by[n].add(key)
    figure = [bool(re.search(r"\d", page_text[a:b])) for a, b in spans]
    in_chunk = [a < located[1] and located[0] < b for a, b in spans]
    chosen: set[int] = set()
    covered: set[tuple[str, ...]] = set()
    used = 0
    candidates = [n for n in range(len(spans)) if held_by[n] or in_chunk[n]]  # the rest are worth nothing alone
    while True:
        best, best_value = None, 0.0
        for n in candidates:
            a, b = spans[n]
            if n in chosen or used + (b - a) + 3 > budget:
                continue
            held = held_by[n]
            value = sum(weight[k] for k in held - covered) + 0.25 * sum(weight[k] for k in held & covered)
            value += 0.5 * average if figure[n] and held else 0.0
            value += chunk_weight * average if in_chunk[n] else 0.0
            value += NEXT_TO * average if value and (n - 1 in chosen or n + 1 in chosen) else 0.0
            if value > best_value:
                best, best_value = n, value
        if best is None:
            break
        chosen.add(best)
        covered |= held_by[best]
        used += spans[best][1] - spans[best][0] + 3
    distance = 1  # then the neighbours of the sentences chosen, nearest first: a passage reads on
    while chosen and distance < len(spans):
        grown = False
        for n in sorted(chosen):
            for near in (n - distance, n + distance):
                if (
                    0 <= near < len(spans)
                    and near not in chosen
                    and used + spans[near][1] - spans[near][0] + 3 <= budget
                ):
                    chosen.add(near)
                    used += spans[near][1] - spans[near][0] + 3
                    grown = True
        if not grown:
            break
        distance += 1
    text, a, b = window(page_text, content, terms, budget, weights, shown, chunk_weight, found)
    in_window = {key for key, hits in found.items() for h, e in hits if a <= h and e <= b and not _inside(h, e, shown)}
    if sum(weight[k] for k in covered) <= sum(weight[k] for k in in_window) + 0.5 * average:
        return text[a:b].strip(), (a, b)  # the sentences hold no more of the question than one window
    order = sorted(chosen)
    runs: list[list[int]] = []
    for n in order:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    text = " … ".join(" ".join(page_text[spans[r[0]][0] : spans[r[-1]][1]].split()) for r in runs)
    return text[:budget], (spans[order[0]][0], spans[order[-1]][1])


def _inside(start: int, end: int, shown: Sequence[tuple[int, int]]) -> bool:
    return any(s <= start and end <= e for s, e in shown)
