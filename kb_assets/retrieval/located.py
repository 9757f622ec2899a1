"""pageindex's candidates on the located pages: the chunks touching those pages that hold a query term,
read from the catalog's kept BM25 term counts (``chunk_terms``, with each chunk's page range), the
``limit`` best by BM25 on the knowledge base's kept statistics, their entities then read from Milvus by
primary key. The same candidates a BM25 search filtered to those pages finds (every chunk there sharing a
term with the query, best first), without that search's pass over every row of the collection (Milvus
Lite: ~1.5 ms a thousand chunks).

The term counts, the pages' documents that cannot be answered this way and the knowledge bases' statistics
come in one catalog read (``Catalog.located_chunk_terms``); the statistics are kept in the response for the
scoring of every candidate (``SearchResponse.statistics``: read once a search).

A document whose kept rows have no page ranges (published before they were, or without BM25
statistics) is searched as before, by a Milvus BM25 search filtered to its located pages; so is every
document when the statistics are off (``kept_bm25_statistics``) or Postgres fails here (with a warning).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from kb_assets.lib.lexical import Statistics, bm25, query_terms
from kb_assets.retrieval.fanout import Found
from kb_assets.retrieval.query import Query
from kb_assets.retrieval.request import SearchRequest, SearchResponse, elapsed_ms, short
from kb_assets.stores.catalog.locating import LocatedPage
from kb_assets.stores.entities import Entity
from kb_assets.stores.vector_search import entities_by_id, search_bm25
from kb_assets.stores.vectors import pages_filter

if TYPE_CHECKING:
    from kb_assets.retrieval.search import Searcher

T = TypeVar("T")
MAX_PAGE_CHUNKS = 2000  # the most entities one filtered search reads for the located pages


def start_located(
    searcher: Searcher,
    response: SearchResponse,
    query: Query,
    located: list[LocatedPage],
    limit: int | None = None,
    extra_terms: tuple[str, ...] = (),
    every_chunk: bool = False,
) -> Callable[[], tuple[Found, list[tuple[str, int]]]]:
    """Start reading the candidates of the located pages; the function returned
    waits for them: their entities with their BM25 scores (and stored vectors when the model reads the query), the
    best ``limit`` (``query.limit``) by BM25 over the query's words and ``extra_terms`` (the routed pages' section
    titles: which chunks are read, not how they score; search scores every candidate by the query's words,
    ``lexical_scores.py``); ``every_chunk``: every chunk touching those pages too (the dense stage bounded to
    them, ``Searcher.dense_bounded``). Also the located pages this cannot answer for, to be searched in Milvus
    (``searched``).

    The kept term counts (``Catalog.located_chunk_terms``) choose the best, whose entities are then read by primary
    key. When the dense stage is bounded to these pages (a collection past ``dense_exact_chunks``), every chunk
    touching them is read instead, beside the counts, by one BM25 search filtered to the pages (the engine ranks
    the chunks holding a query word first, on the embedded engine every other chunk of the pages after them): a
    lookup by primary key reads every row of the collection on the embedded engine (a string key: ~165 ms for 50
    chunks at 500,000), while a BM25 search evaluates its filter only where its words are."""
    pages = [(page.document_id, page.page_index) for page in located]
    if not searcher.config.kept_bm25_statistics:
        return lambda: (Found(), pages)
    asked_terms = query_terms(query.bm25_text or query.text) + list(extra_terms)
    asked = sorted(set(asked_terms))
    counting = searcher.pool.submit(_timed, searcher.catalog.located_chunk_terms, pages, asked)
    # every chunk touching the pages when the dense stage is bounded to them; else the best by primary key, after
    reading = searcher.pool.submit(_timed, _entities, searcher, query, pages) if every_chunk else None

    def finish() -> tuple[Found, list[tuple[str, int]]]:
        try:
            read, took = counting.result()  # the stage's time: its reads' own (waiting for them overlaps others')
        except Exception as error:
            response.warnings.append(
                f"pageindex: located pages' chunks unread ({type(error).__name__}: {short(error)}); searched in Milvus"
            )
            return Found(), pages
        response.keep_statistics(read.statistics, asked)
        statistics = {kb: Statistics(n, total / n if n else 0.0, df) for kb, (n, total, df) in read.statistics.items()}
        scores = {
            chunk_id: bm25(asked_terms, tf, length, statistics[kb])
            for chunk_id, (_, kb, length, tf) in read.counts.items()
            if kb in statistics
        }
        best = sorted((c for c in scores if scores[c] > 0), key=lambda c: (-scores[c], c))[: limit or query.limit]
        found = Found()
        try:
            entities: dict[str, Entity] = {}
            if reading is not None:
                entities, read_ms = reading.result()
                took = max(took, read_ms)
            missing = [chunk_id for chunk_id in best if chunk_id not in entities]
            if missing:  # the best by primary key (bounded: any the filtered search did not return)
                started = time.perf_counter()
                timeout, with_vectors = searcher.config.milvus_timeout_s, bool(query.dense_text)
                entities.update(entities_by_id(searcher.client, query.collection, missing, timeout, with_vectors))
                took += elapsed_ms(started)
        except Exception as error:
            found.bm25_error = error
            entities = {}
        for chunk_id in best + (sorted(set(entities) - set(best)) if every_chunk else []):
            if chunk_id in entities:  # not there: the catalog is ahead of or behind Milvus; verify says which
                entity = dict(entities[chunk_id])
                vector = entity.pop("dense", None)
                if vector is not None:
                    found.vectors[chunk_id] = vector
                found.hits[chunk_id] = entity
                if scores.get(chunk_id, 0.0) > 0:
                    found.bm25[chunk_id] = scores[chunk_id]
        found.timings["locatedChunks"] = round(took, 1)
        return found, [p for p in pages if p[0] in read.lacking]

    return finish


def _timed(read: Callable[..., T], *args) -> tuple[T, float]:
    started = time.perf_counter()
    return read(*args), elapsed_ms(started)


def _entities(searcher: Searcher, query: Query, pages: list[tuple[str, int]]) -> dict[str, Entity]:
    """The entities (with their stored vectors when the model reads the query) of the chunks touching these pages,
    at most ``MAX_PAGE_CHUNKS``: a BM25 search filtered to them."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    for document_id, page_index in pages:
        ranges.setdefault(document_id, []).append((page_index, page_index))
    hits = search_bm25(
        searcher.client,
        query.collection,
        query.bm25_text or query.text,
        pages_filter(ranges),
        MAX_PAGE_CHUNKS,
        searcher.config.milvus_timeout_s,
        bool(query.dense_text),
    )
    return {hit.id: hit["entity"] for hit in hits}


def searched(searcher: Searcher, request: SearchRequest, query: Query, pages: list[tuple[str, int]]) -> Found:
    """The located pages' candidates by a Milvus BM25 search filtered to those pages."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    for document_id, page_index in pages:
        ranges.setdefault(document_id, []).append((page_index, page_index))
    return searcher.fan_out(request, query, pages=pages_filter(ranges), dense_search=False)
