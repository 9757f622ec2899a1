"""Query analysis: what the embedding model reads of a query (the language policy), the query's words
for substring and keyword matching, and one request's query against the collection it searches.

Language policy. The collection's embedding spec records the languages its model reads. For a query
with Chinese characters and a model that does not read Chinese (MiniLM: ``en``), a dense score of the
whole query is noise: the dense search runs on the query's Latin words only (``"使用 backports 安装较新的
软件"`` -> ``"backports"``) and the dense weight is multiplied by their share of the query's words (1 of
6 here; jieba words for the Chinese part), the rest moving to lexical (BM25, jieba analyzer). A query
with no Latin word is ranked by BM25 alone. A warning names what was done. Measured on the dev set's
Chinese manual (``benchmarks/retrieval_quality.py``) against ``latin-words`` (Latin words at full
weight), ``drop`` (no dense score for any Chinese query) and ``full`` (embed the whole query).

The default, ``translate`` (issue 15), goes one step further: the Chinese words are looked up in a
Chinese-English dictionary (``crosslingual.py``) and the model reads the Latin words plus those English
words, each translated word counting for ``translated_weight`` of a word in the dense share (1.0: the
translation is read at full weight); BM25 searches with them too, so a Chinese question finds a
passage written in English. Chinese detail questions of the dev split, pageindex, hit@1 / hit@5:
0.52 / 0.73 (``share``); translate at 0.3: 0.62 / 0.83, 0.5: 0.69 / 0.83, 0.8: 0.75 / 0.85, 1.0:
0.75 / 0.88; without the English words in BM25 (0.5): 0.54 / 0.77. The default is 0.5: at 1.0 the
Chinese title questions lose 0.07 hit@1 (0.98 -> 0.91) and a Chinese question whose answer a Chinese
page holds ranks an English page first; 0.5 keeps titles (0.97) and most of the dev gain.

A model that reads Chinese (``zh`` among its spec's languages) reads the whole query at full weight,
and under ``translate`` the dictionary words still go to BM25 and to the rerank: a Chinese question
reaches a passage written in English lexically too (multilingual-e5-small, ``docs/retrieval-log.md`` row 37:
Chinese dev details hit@1 / hit@5 0.56 / 0.79 without them, 0.67 / 0.88 with them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from kb_assets.embedding.model import EmbeddingModel
from kb_assets.lib.segmentation import words as jieba_words
from kb_assets.lib.text import tokenize

LANGUAGE_POLICIES = ("translate", "share", "latin-words", "drop", "full")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_LATIN_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def dense_query_text(
    query: str,
    languages: tuple[str, ...],
    policy: str = "share",
    english: list[str] | None = None,
    translated_weight: float = 0.5,
) -> tuple[str, float, str | None]:
    """The part of the query the model reads, the share of the dense weight it keeps, and a warning.

    Policies for a Chinese query and a model that does not read Chinese (see the module docstring):
    ``translate``: dense on the Latin words and ``english``, the dictionary words of the Chinese part
    (``crosslingual.py``), weight times (Latin words + ``translated_weight`` x Chinese words) / words
    (``share`` when the dictionary gives nothing); ``share``: dense on the Latin words, weight times
    their share of the query's words; ``latin-words``: dense on the Latin words, full weight; ``drop``:
    no dense score; ``full``: the whole query, as is.
    """
    if policy == "full" or "zh" in languages or not _CJK.search(query):
        return query, 1.0, None
    latin = _LATIN_WORD.findall(query)
    if policy == "translate" and english:
        chinese = [w for run in _CJK_RUN.findall(query) for w in _jieba_words(run)]
        share = (len(latin) + translated_weight * len(chinese)) / (len(latin) + len(chinese))
        text = " ".join(latin + english)
        return (
            text,
            share,
            (
                f"dense score computed on the query's non-Chinese words and dictionary words for "
                f"its Chinese ({text!r}), weighted by {share:.2f}"
            ),
        )
    if policy == "translate":
        policy = "share"
    if policy == "drop" or not latin:
        return (
            "",
            0.0,
            (
                "dense score not used: the embedding model does not read Chinese "
                f"(it reads {', '.join(languages)}); ranked by BM25"
            ),
        )
    if policy == "share":
        chinese = [w for run in _CJK_RUN.findall(query) for w in _jieba_words(run)]
        share = len(latin) / (len(latin) + len(chinese))
        return (
            " ".join(latin),
            share,
            (
                f"dense score computed on the query's non-Chinese words only "
                f"({' '.join(latin)!r}), weighted by their share of the query ({share:.2f})"
            ),
        )
    return " ".join(latin), 1.0, f"dense score computed on the query's non-Chinese words only ({' '.join(latin)!r})"


def has_chinese(text: str) -> bool:
    return bool(_CJK.search(text))


def _jieba_words(text: str) -> list[str]:
    return [w for w in jieba_words(text) if w.strip()]


def query_terms(query: str, limit: int = 20) -> list[str]:
    """Distinct words of a query for substring matching: English words and jieba words for Chinese.

    A query too short for the tokenizer (one Chinese character, a two-letter word) is its own term.
    """
    terms = list(dict.fromkeys(tokenize(query)))
    if not terms:
        terms = [w.casefold() for w in _LATIN_WORD.findall(query)] + _CJK_RUN.findall(query)
    return list(dict.fromkeys(terms))[:limit]


def keyword_overlap(terms: list[str], content: str) -> float:
    """The share of the query's words found in the content (the lexical signal without BM25)."""
    if not terms:
        return 0.0
    text = content.casefold()
    return sum(1 for term in terms if term in text) / len(terms)


@dataclass
class Query:
    """One request's query against one collection: the query, the text BM25 searches with, the text the
    model reads and its share of the dense weight, and how many hits each search asks for."""

    text: str
    collection: str
    model: EmbeddingModel
    dense_text: str
    share: float
    limit: int  # hits asked of each search
    bm25_text: str = ""  # the text BM25 searches with ("": the query as it is)
    translations: dict[str, list[str]] | None = None  # Chinese words -> dictionary English words
    documents: list[str] | None = None  # the documents searched (None: every one; scope.py)
    _vector: np.ndarray | None = None

    def vector(self) -> np.ndarray | None:
        """The query vector (embedded once, on first use; None when dense is not used)."""
        if self._vector is None and self.dense_text:
            self._vector = self.model.encode_queries([self.dense_text])[0]
        return self._vector
