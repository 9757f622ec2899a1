"""The BM25 score of every candidate from the knowledge bases' own statistics (``kb_assets.lib.lexical``),
in place of the scores Milvus returned, which depend on how Milvus stores the chunks.

Every candidate gets one: a chunk found by the dense search only gets its BM25 score too (0.0 when it
holds none of the query's terms), where Milvus gave none. When the statistics cannot be used, the
candidates keep Milvus's scores and the response says why: a candidate's document has none kept yet (it
was published before they were; the next ingest run keeps them), or Postgres did not answer.
"""

from __future__ import annotations

from dataclasses import replace

from kb_assets.lib.lexical import Statistics, bm25, query_terms
from kb_assets.retrieval.fanout import Found
from kb_assets.stores.catalog.search_reads import CandidateRows


def rescored(query_text: str, found: Found, rows: CandidateRows | None, warnings: list[str]) -> Found:
    """``found`` with every candidate's BM25 score from the statistics of its knowledge base (``rows``: what the
    search read of the catalog for its candidates, ``Catalog.candidate_rows``; None: Postgres did not answer);
    unchanged, with a warning, when those statistics cannot be used."""
    if found.bm25_error is not None or not found.hits:
        return found
    versions = rows.versions if rows is not None else {}
    if not versions:  # Postgres did not answer for the documents (said by the searcher already)
        warnings.append("BM25 statistics unavailable (document rows unread); lexical scores are Milvus's")
        return found
    documents = {hit["document_id"] for hit in found.hits.values()}
    lacking = sorted(d for d in documents if d not in versions or versions[d].term_count is None)
    if lacking:
        warnings.append(
            f"BM25 statistics not kept yet for {len(lacking)} document(s) ({', '.join(lacking[:3])}); "
            "lexical scores are Milvus's (the next ingest run keeps them)"
        )
        return found
    assert rows is not None
    asked_terms = query_terms(query_text)
    statistics = {
        kb: Statistics(chunks, length / chunks if chunks else 0.0, frequencies)
        for kb, (chunks, length, frequencies) in rows.statistics.items()
    }
    scores = {}
    for chunk_id, (length, tf) in rows.term_counts.items():
        if chunk_id not in found.hits:
            continue
        kb = found.hits[chunk_id]["knowledge_base_id"]
        score = bm25(asked_terms, tf, length, statistics[kb]) if kb in statistics else 0.0
        if score > 0:
            scores[chunk_id] = score
    return replace(found, bm25=scores, no_bm25=set(found.hits) - set(scores))
