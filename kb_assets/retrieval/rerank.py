"""A second, lexical stage over the scored candidates: how much of the question a chunk holds, and how
close together (issue 15).

BM25 scores each query word on its own, saturating: a long chunk that repeats two common words of a
question can outrank the short one that holds all of its words, one of them the detail asked for. The
rerank stage reads the question and each candidate chunk together, cheaply (substring tests on a few
hundred characters, well under a millisecond a candidate):

- ``coverage``: the share of the question's content words found in the chunk. A word counts when it is
  there in any of its forms: the word itself, its stem (``installed`` -> ``install``), or for a Chinese
  word one of its dictionary English words (``crosslingual.py``), so a Chinese question covers an
  English passage;
- ``proximity``: the share of neighbouring pairs of those words found within ``NEAR`` characters of each
  other (a phrase of the question kept in the text, e.g. ``native pipe``, ``时间 源``).

``rerank = score + coverage_weight * coverage + proximity_weight * proximity``; every row keeps its
hybrid ``score`` and gets the parts in ``scores`` (``coverage``, ``proximity``, ``rerank``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from kb_assets.lib.json_types import JsonObject
from kb_assets.retrieval.lexical_query import content_words

NEAR = 40  # characters between two neighbouring question words that count as a kept phrase
_SPACE = re.compile(r"\s+")
_SUFFIX = re.compile(r"(ations?|ings?|ed|es|s|ly)$")
_WORD_CHAR = re.compile(r"[a-z0-9]")


@dataclass(frozen=True)
class Word:
    """One content word of the question and the forms that count as finding it."""

    text: str
    forms: tuple[str, ...]


def question_words(query: str, translations: dict[str, list[str]] | None = None) -> list[Word]:
    """The question's content words (jieba words, case-folded), each with its forms: itself, its stem,
    and for a Chinese word its dictionary English words (``translations``)."""
    translations = translations or {}
    words: list[Word] = []
    seen: set[str] = set()
    for token in content_words(query):
        low = token.casefold()
        if low in seen:
            continue
        seen.add(low)
        forms = [low]
        stem = _SUFFIX.sub("", low)
        if stem != low and len(stem) >= 4:
            forms.append(stem)
        forms += [w for w in translations.get(token, []) if len(w) >= 3]
        words.append(Word(low, tuple(dict.fromkeys(forms))))
    return words


def _positions(word: Word, text: str) -> list[int]:
    """Where a form of the word starts in the text: a Latin form at the start of a word (``install`` in
    ``installation``, not ``sit`` in ``position``), a Chinese one anywhere. The word start is checked on
    each match: a look-behind in front of the pattern makes ``re`` try every position (30x slower)."""
    return [
        match.start()
        for match in _pattern(word.forms).finditer(text)
        if not (text[match.start()].isascii() and match.start() > 0 and _WORD_CHAR.match(text[match.start() - 1]))
    ]


@lru_cache(maxsize=4096)
def _pattern(forms: tuple[str, ...]) -> re.Pattern[str]:
    """The forms of a word, longest first, as one pattern (made once: every candidate of a search is matched)."""
    return re.compile("|".join(re.escape(form) for form in sorted(forms, key=len, reverse=True)))


def features(words: list[Word], content: str) -> tuple[float, float]:
    """(coverage, proximity) of a chunk for the question's words."""
    if not words:
        return 0.0, 0.0
    text = _SPACE.sub(" ", content).casefold()
    positions = [_positions(word, text) for word in words]
    coverage = sum(1 for p in positions if p) / len(words)
    if len(words) < 2:
        return coverage, coverage
    pairs = list(zip(positions, positions[1:], strict=False))
    near = sum(1 for left, right in pairs if left and right and any(abs(a - b) <= NEAR for a in left for b in right))
    return coverage, near / len(pairs)


def rerank(rows: list[JsonObject], words: list[Word], coverage_weight: float, proximity_weight: float) -> None:
    """Add ``coverage``, ``proximity`` and ``rerank`` to each row's ``scores`` (in place)."""
    for row in rows:
        coverage, proximity = features(words, row["content"])
        row["scores"]["coverage"] = round(coverage, 6)
        row["scores"]["proximity"] = round(proximity, 6)
        row["scores"]["rerank"] = round(
            (row["score"] or 0.0) + coverage_weight * coverage + proximity_weight * proximity, 6
        )
