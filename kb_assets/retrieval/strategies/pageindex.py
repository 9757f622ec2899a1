"""``pageindex`` (the default): locate candidate pages first, search chunks on them, rank pages.

1. Locate (Postgres): pages scored by the query's words in PageIndex node titles and keywords and in
   page summaries and keywords (``Catalog.locate_pages``; never table-of-contents pages).
2. Search chunks filtered to those pages (Milvus filter on ``document_id`` and page range): a BM25
   search, whose hits come with their stored vectors and so get both scores; the hybrid search of the
   whole knowledge base runs beside the locating (a relevant page that nothing located still takes
   part, ranked by its chunks). A dense search on the located pages too changed no figure of the dev
   or paraphrased sets and costs another filtered search (Milvus Lite: ~200 ms at 100k chunks), so
   there is none.
3. Assemble: a page's relevance is its best chunk's hybrid score plus ``LOCATE_WEIGHT`` x its
   locating score; pages in that order (table-of-contents pages last), each giving its best
   ``CHUNKS_PER_PAGE`` chunks in chunk order. Every row keeps its hybrid score.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kb_assets.retrieval.query import query_terms
from kb_assets.retrieval.request import SearchRequest, SearchResponse, elapsed_ms, short
from kb_assets.retrieval.scoring import rank_key
from kb_assets.stores.vectors import pages_filter

if TYPE_CHECKING:
    from kb_assets.retrieval.search import Searcher

# the weight of a page's locating score beside its best chunk's hybrid score, and how many chunks a
# page gives (measured on the dev set and a paraphrased set: one chunk a page ranks best)
LOCATE_WEIGHT = 0.3
CHUNKS_PER_PAGE = 1


def rank(searcher: Searcher, request: SearchRequest, response: SearchResponse) -> list[dict]:
    started = time.perf_counter()
    locating = searcher.pool.submit(searcher.catalog.locate_pages, query_terms(request.query), request.query,
                                    request.knowledge_base_ids, searcher.config.pageindex_pages)
    query = searcher.prepare(request, response)
    found = searcher.fan_out(request, query)
    try:
        located = locating.result()
    except Exception as error:
        located = []
        response.warnings.append(f"pageindex: locating pages failed ({type(error).__name__}: {short(error)}); "
                                 "ranked by chunks only")
    response.timings_ms["locate"] = elapsed_ms(started)
    if located:
        ranges: dict[str, list[tuple[int, int]]] = {}
        for page in located:
            ranges.setdefault(page["document_id"], []).append((page["page_index"], page["page_index"]))
        found = found.merge(searcher.fan_out(request, query, pages=pages_filter(ranges), dense_search=False))
    else:
        response.warnings.append("pageindex: no page located by titles, summaries or keywords")
    rows = searcher.score(response, query, found)
    rows = [r for r in rows if request.min_score is None or r["score"] >= request.min_score]
    locate_score = {(p["document_id"], p["page_index"]): p["score"] for p in located}
    by_page: dict[tuple[str, int], list[dict]] = {}
    for row in sorted(rows, key=rank_key):
        by_page.setdefault(_located_page(row, locate_score), []).append(row)
    relevance = {key: chunks[0]["score"] + LOCATE_WEIGHT * locate_score.get(key, 0.0)
                 for key, chunks in by_page.items()}
    toc = searcher.page_facts(list(by_page), response)
    results = []
    for key in sorted(by_page, key=lambda key: (toc.get(key, {}).get("is_toc", False), -relevance[key], key)):
        best = by_page[key][:CHUNKS_PER_PAGE]
        results += sorted(best, key=lambda r: (r["pageIndex"], r["chunkIndex"] or 0))
    return results[: request.limit]


def _located_page(row: dict, located: dict[tuple[str, int], float]) -> tuple[str, int]:
    """The located page a chunk belongs to (a chunk spanning pages counts for the first located one)."""
    for page in range(row["pageIndex"], row["pageEnd"] + 1):
        if (row["documentId"], page) in located:
            return row["documentId"], page
    return row["documentId"], row["pageIndex"]
