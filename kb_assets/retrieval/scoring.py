"""Scoring: the hybrid score of every candidate, its degraded modes, and the order of results.

BM25 scores are divided by the best BM25 score among all candidates of the query, and

    score = dense_weight * dense + lexical_weight * lexical + exactBoost

where ``exactBoost`` is added when the whole query (whitespace-normalized, case-folded) appears in the
chunk's content (docs/retrieval.md, section 1). The dense weight is multiplied by the query's dense share (see
``kb_assets.retrieval.query``), the rest moving to lexical.

BM25 scores are those of ``lexical_scores.py`` (the knowledge bases' own statistics), which gives every
candidate one; where those cannot be used (said in a warning), Milvus's. A candidate found by one search
only gets the other score as follows:
- found by BM25 only: ``dense`` is the cosine of the query vector and the chunk's stored vector
  (returned with the BM25 hit, else read from Milvus);
- found by dense only, with Milvus's BM25 scores: ``lexical`` is 0.0 when the BM25 search of the same
  filter returned fewer hits than asked for (then the chunk shares no word with the query: its BM25
  score is 0), else ``null`` (below the BM25 cut-off, not computed) and counted as 0.

Degraded modes, each with a warning in the response and never an error:
- BM25 search fails or times out: the lexical signal is keyword overlap (the share of the query's
  words found in the content);
- dense search fails or times out (or the query has no words the model reads): ranked by BM25 alone
  (the dense weight moves to lexical);
- both fail: ``score`` raises, and the searcher answers from pages (``kb_assets.retrieval.fallback``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kb_assets.lib.json_types import JsonObject
from kb_assets.lib.text import normalize_ws
from kb_assets.retrieval.fanout import Found
from kb_assets.retrieval.query import Query, keyword_overlap, query_terms
from kb_assets.retrieval.request import short
from kb_assets.retrieval.rows import result_row
from kb_assets.settings import Weights


def score(
    query: Query,
    found: Found,
    weights: Weights,
    warnings: list[str],
    read_vectors: Callable[[list[str]], dict[str, list[float]]],
) -> list[JsonObject]:
    """The hybrid score of every candidate as a result row (neither cut nor ordered); degraded modes add
    to ``warnings``. ``read_vectors``: chunk ids -> their stored vectors, for candidates that came
    without one."""
    vector = query.vector()
    dense_ok = vector is not None and found.dense_error is None
    bm25_ok = found.bm25_error is None
    if not dense_ok and not bm25_ok:
        raise RuntimeError(
            "dense and BM25 search both failed: "
            f"{short(found.dense_error) if found.dense_error else 'dense not used'}; "
            f"{short(found.bm25_error)}"
        )
    if found.dense_error is not None:
        warnings.append(
            f"dense search unavailable ({type(found.dense_error).__name__}: "
            f"{short(found.dense_error)}); ranked by BM25 only"
        )
    if found.bm25_error is not None:
        warnings.append(
            f"BM25 search unavailable ({type(found.bm25_error).__name__}: "
            f"{short(found.bm25_error)}); lexical score is keyword overlap"
        )
    dense = dict(found.dense) if dense_ok else {}
    if dense_ok and vector is not None:  # (dense_ok holds only with a vector)
        for chunk_id, stored in found.vectors.items():  # BM25-only hits: cosine with the stored vector
            if chunk_id not in dense:
                dense[chunk_id] = _cosine(stored, vector)
        missing = [chunk_id for chunk_id in found.hits if chunk_id not in dense]
        if missing:
            try:
                for chunk_id, stored in read_vectors(missing).items():
                    dense[chunk_id] = _cosine(stored, vector)
            except Exception as error:
                warnings.append(
                    f"stored vectors unreadable ({type(error).__name__}); dense score "
                    f"missing for {len(missing)} BM25-only candidates"
                )
        dense_weight = weights.dense * query.share
        lexical_weight = weights.lexical + weights.dense * (1 - query.share)
    else:
        dense_weight, lexical_weight = 0.0, weights.dense + weights.lexical

    best_bm25 = max(found.bm25.values(), default=0.0)
    terms = query_terms(query.text)
    needle = normalize_ws(query.text).casefold()
    rows = []
    lexical: float | None
    for chunk_id, entity in found.hits.items():
        if not bm25_ok:
            lexical = keyword_overlap(terms, entity["content"])
        elif chunk_id in found.bm25:
            lexical = found.bm25[chunk_id] / best_bm25 if best_bm25 > 0 else 0.0
        else:
            lexical = 0.0 if chunk_id in found.no_bm25 else None
        dense_score = dense.get(chunk_id) if dense_ok else None
        exact = weights.exact_boost if needle and needle in normalize_ws(entity["content"]).casefold() else 0.0
        total = dense_weight * (dense_score or 0.0) + lexical_weight * (lexical or 0.0) + exact
        rows.append(
            result_row(entity, total, {"dense": _round(dense_score), "lexical": _round(lexical), "exactBoost": exact})
        )
    return rows


def rank_key(row: JsonObject) -> tuple:
    """Results order: score, then document, page, chunk."""
    return (-row["score"], row["documentId"], row["pageIndex"], row["chunkIndex"] or 0, row["chunkId"] or "")


def _cosine(stored: list[float], vector: np.ndarray) -> float:
    return float(np.dot(np.asarray(stored, dtype=np.float32), vector))


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)
