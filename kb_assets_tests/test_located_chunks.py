"""pageindex's located pages: their candidates read from the kept term counts and page ranges
(``retrieval/located.py``) are the chunks a BM25 search filtered to those pages finds, on the ingested
sample corpus; a document kept without page ranges is searched in Milvus as before, and verify says so."""

from __future__ import annotations

import pytest

from kb_assets.lib.lexical import chunk_row_terms
from kb_assets.retrieval.located import _searched, located_chunks
from kb_assets.retrieval.query import query_terms
from kb_assets.retrieval.search import SearchRequest, SearchResponse

QUESTIONS = [
    "How long are backups kept?",
    "on-call rotation and escalation",
    "What does the onboarding guide say about laptops?",
    "service catalog owners",
    "quarterly review revenue",
]


def located(searcher, question: str):
    request = SearchRequest(query=question, knowledge_base_ids=["handbook"], limit=10)
    response = SearchResponse()
    query = searcher.prepare(request, response)
    pages = searcher.catalog.locate_pages(
        query_terms(question), question, ["handbook"], searcher.config.pageindex_pages, query.documents
    )
    return request, response, query, pages


@pytest.mark.parametrize("question", QUESTIONS)
def test_located_pages_give_the_chunks_a_filtered_bm25_search_gives(searcher, question):
    request, response, query, pages = located(searcher, question)
    assert pages, f"no page located for {question!r}: the comparison below would check nothing"
    kept = located_chunks(searcher, request, response, query, pages)
    searched = _searched(searcher, request, query, [(p["document_id"], p["page_index"]) for p in pages])
    assert kept.bm25_error is None and searched.bm25_error is None
    assert "locatedChunks" in kept.timings and "bm25Search" not in kept.timings  # no Milvus search ran
    assert set(kept.hits) <= set(searched.hits), response.warnings
    # the embedded engine's BM25 (jieba) also gives every other chunk of those pages a small, near-constant
    # score that no question word explains (Milvus Lite 3.x gave them none); the kept counts score them 0
    floor = min(kept.bm25.values())
    for chunk_id in set(searched.hits) - set(kept.hits):
        assert searched.bm25[chunk_id] < floor / 2, (chunk_id, searched.bm25[chunk_id], floor)
    for chunk_id, entity in kept.hits.items():
        assert entity == searched.hits[chunk_id]
        assert kept.bm25[chunk_id] > 0
        assert len(kept.vectors[chunk_id]) == len(searched.vectors[chunk_id])


def test_a_document_kept_without_page_ranges_is_searched_in_milvus_and_verify_says_so(
    searcher, catalog, lake, milvus_client, settings
):
    from kb_assets.pipeline.verify import verify

    request, response, query, pages = located(searcher, QUESTIONS[0])
    assert pages
    document_id = pages[0]["document_id"]
    chunks = lake.read("chunks", document_id)
    before = located_chunks(searcher, request, response, query, pages)
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute("UPDATE chunk_terms SET page_index = NULL, page_end = NULL WHERE document_id = %s", (document_id,))
    try:
        fallback = located_chunks(searcher, request, response, query, pages)
        assert "bm25Search" in fallback.timings  # that document's pages: a Milvus search
        assert set(before.hits) <= set(fallback.hits)  # and, on the embedded engine, near-zero others
        floor = min(before.bm25.values())
        assert all(fallback.bm25[c] < floor / 2 for c in set(fallback.hits) - set(before.hits))
        report = verify(catalog, lake, milvus_client, settings.alias)
        said = [p.problem for p in report.problems if p.document_id == document_id]
        assert said and all("page ranges" in problem for problem in said), said
    finally:  # what ``verify --repair`` writes (test_verify checks the repair itself)
        with catalog.connect() as conn:
            catalog.replace_chunk_terms(conn, document_id, chunk_row_terms(chunks))
    assert catalog.kept_term_chunks(document_id, with_pages=True) == set(chunks["chunk_id"].to_list())
    again = located_chunks(searcher, request, response, query, pages)
    assert "bm25Search" not in again.timings and set(again.hits) == set(before.hits)
