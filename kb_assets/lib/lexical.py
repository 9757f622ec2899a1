"""BM25 statistics kept in Postgres beside Milvus, so that a chunk's lexical score depends on the knowledge
base's content only, not on how Milvus happens to store it.

Milvus Lite computes BM25 statistics (chunk count, average length, document frequencies) per segment,
and segments are per partition (the partition key, ``knowledge_base_id``, hashes each knowledge base into
one of 16) and per flush (each published document is flushed): the same text scores -3.94 in one segment
and -0.58 in another (``docs/retrieval-log.md`` row 1), two knowledge bases that hash to one partition
share statistics, and rewriting a third of two documents' chunks (as an incremental ingest of changed
documents does) moved 23 of 906 (question, strategy) pairs of the dev corpus with Milvus's scores and
none with these (``docs/retrieval-log.md`` row 1). A Milvus that gathers statistics over the whole collection gives
other scores again: emulated on the dev set, Chinese detail questions drop 0.75 -> 0.69 hit@1
(``docs/retrieval-log.md`` row 2), since a knowledge base's vocabulary is then weighed by the others'.

So search uses Milvus's BM25 to find candidates and scores them here, per knowledge base:

    bm25(chunk) = sum over the query's terms t of  idf(t) * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len / avglen))
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

with N, avglen and df over the chunks that serve in the chunk's knowledge base (Milvus's formula and
defaults). A chunk's terms are jieba's search-mode words (each word, and before a long one its dictionary
parts: ``数据备份`` gives ``数据``, ``备份``, ``数据备份``), case-folded, without whitespace; a query's terms are its
words in jieba's default mode: the content words ``lexical_query.bm25_query`` made, each counted as often
as the query has it, without counting a compound's parts twice. On the dev set this keeps Milvus Lite's
figures for the default strategy (titles and Chinese details one question lower at hit@1 or answer@1 on
the dev split, Chinese test details up 0.71 -> 0.75 hit@1; the ``hybrid`` strategy gains 0.02-0.08);
default mode on both sides lost Chinese details in ``hybrid`` (0.65 -> 0.60 hit@1), and search mode on
both sides counted a compound's parts twice (Chinese 0.73 / 0.85). Publishing a document replaces its
rows in ``chunk_terms`` and changes its knowledge base's ``knowledge_base_terms`` in the transaction that
records the published version, so the statistics are always those of what serves.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from kb_assets.lib.segmentation import search_words, words

K1 = 1.2
B = 0.75


def terms(text: str) -> list[str]:
    """The BM25 terms of a chunk: jieba's search-mode words, case-folded, whitespace dropped."""
    return [word.casefold() for word in search_words(text) if not word.isspace()]


def query_terms(text: str) -> list[str]:
    """The BM25 terms of a query: jieba's words (default mode), case-folded, whitespace dropped."""
    return [word.casefold() for word in words(text) if not word.isspace()]


@dataclass(frozen=True)
class ChunkTerms:
    """A chunk's term counts, its length in terms and (when known) its first and last page."""

    chunk_id: str
    counts: Counter
    length: int
    pages: tuple[int, int] | None = None


def chunk_terms(chunks: Iterable[tuple[str, str]]) -> list[ChunkTerms]:
    """The term counts of (chunk_id, content) pairs."""
    out = []
    for chunk_id, content in chunks:
        words_of_chunk = terms(content)
        out.append(ChunkTerms(chunk_id, Counter(words_of_chunk), len(words_of_chunk)))
    return out


def chunk_row_terms(chunks) -> list[ChunkTerms]:
    """The term counts of a document's chunk rows (a frame with ``chunk_id`` and ``content``): what
    publishing keeps and ``verify --repair`` rewrites."""
    counted = chunk_terms(zip(chunks["chunk_id"].to_list(), chunks["content"].to_list(), strict=False))
    if "page_index" not in chunks.columns or "page_end" not in chunks.columns:
        return counted
    spans = zip(chunks["page_index"].to_list(), chunks["page_end"].to_list(), strict=True)
    return [replace(c, pages=(first, last)) for c, (first, last) in zip(counted, spans, strict=True)]


@dataclass
class Statistics:
    """BM25 statistics of one knowledge base: its serving chunks, their average length, and the number of
    chunks holding each asked term (a term not in ``frequencies`` is in none)."""

    chunks: int
    average_length: float
    frequencies: dict[str, int] = field(default_factory=dict)

    def idf(self, term: str) -> float:
        df = self.frequencies.get(term, 0)
        return math.log(1 + (self.chunks - df + 0.5) / (df + 0.5))


def bm25(query_terms: list[str], counts: dict[str, int], length: int, statistics: Statistics) -> float:
    """The BM25 score of a chunk (its term ``counts`` and ``length``) for the query's terms (a term asked
    twice counts twice, as in Milvus)."""
    if statistics.chunks == 0 or statistics.average_length <= 0:
        return 0.0
    norm = K1 * (1 - B + B * length / statistics.average_length)
    score = 0.0
    for term in query_terms:
        tf = counts.get(term, 0)
        if tf:
            score += statistics.idf(term) * tf * (K1 + 1) / (tf + norm)
    return score
