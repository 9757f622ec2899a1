"""Milvus fan-out: the dense and the BM25 search of a query, per requested knowledge base, in parallel
and under the service's Milvus timeout, and their candidates merged (deduped by chunk id).

Up to ``MAX_SEPARATE_KB_SEARCHES`` knowledge bases are searched one by one (each gets its own top hits),
more in one search with an ``in`` filter. A search that fails or times out is recorded in the result,
never raised: scoring decides what the other search can still answer (``kb_assets.retrieval.scoring``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field

from pymilvus import MilvusClient

from kb_assets.retrieval.query import Query
from kb_assets.retrieval.request import elapsed_ms
from kb_assets.stores.entities import Entity
from kb_assets.stores.vector_search import search_bm25, search_dense
from kb_assets.stores.vectors import in_filter

# above this many requested knowledge bases, one search with an ``in`` filter replaces one search each
MAX_SEPARATE_KB_SEARCHES = 8


@dataclass
class Found:
    """What the searches of a query returned: entities, raw scores, failures."""

    hits: dict[str, Entity] = field(default_factory=dict)
    dense: dict[str, float] = field(default_factory=dict)
    bm25: dict[str, float] = field(default_factory=dict)
    no_bm25: set[str] = field(default_factory=set)  # returned by dense; BM25 exhausted without them: score 0
    vectors: dict[str, list[float]] = field(default_factory=dict)  # stored vectors of BM25 hits
    dense_error: Exception | None = None
    bm25_error: Exception | None = None
    ms: float = 0.0
    # stage -> milliseconds: queryEncoding, denseSearch, bm25Search (each Milvus call's own time, summed)
    timings: dict[str, float] = field(default_factory=dict)

    def only(self, chunk_ids: set[str]) -> Found:
        """The candidates among ``chunk_ids`` (failures and timing kept)."""
        kept = Found(
            {k: v for k, v in self.hits.items() if k in chunk_ids},
            {k: v for k, v in self.dense.items() if k in chunk_ids},
            {k: v for k, v in self.bm25.items() if k in chunk_ids},
            self.no_bm25 & chunk_ids,
            {k: v for k, v in self.vectors.items() if k in chunk_ids},
            self.dense_error,
            self.bm25_error,
            self.ms,
            self.timings,
        )
        return kept

    def merge(self, other: Found) -> Found:
        """Both searches' candidates; a path failed only if it failed in both (BM25 scores do not depend on
        the filter, so one chunk has one BM25 score)."""
        merged = Found(
            {**self.hits, **other.hits},
            {**self.dense, **other.dense},
            {**self.bm25, **other.bm25},
            ms=self.ms + other.ms,
            timings={
                k: round(self.timings.get(k, 0.0) + other.timings.get(k, 0.0), 1)
                for k in {*self.timings, *other.timings}
            },
        )
        merged.no_bm25 = (self.no_bm25 | other.no_bm25) - set(merged.bm25)
        merged.vectors = {**self.vectors, **other.vectors}
        if self.dense_error is not None and other.dense_error is not None:
            merged.dense_error = self.dense_error
        if self.bm25_error is not None and other.bm25_error is not None:
            merged.bm25_error = self.bm25_error
        return merged


@dataclass
class Pending:
    """Searches started by ``start``: ``result()`` waits for them and merges their candidates (the caller may do
    other work first)."""

    query: Query
    bm25_jobs: dict[str | None, Future]
    dense_jobs: dict[str | None, Future]
    found: Found
    started: float

    def result(self) -> Found:
        found = self.found
        dense_ids: dict[str | None, set[str]] = {}
        for kb, job in self.dense_jobs.items():
            try:
                hits, ms = job.result()
            except Exception as error:
                found.dense_error = error
                continue
            found.timings["denseSearch"] = found.timings.get("denseSearch", 0.0) + ms
            dense_ids[kb] = {hit.id for hit in hits}
            for hit in hits:
                found.hits[hit.id] = hit["entity"]
                found.dense[hit.id] = float(hit.distance)
        for kb, job in self.bm25_jobs.items():
            try:
                hits, ms = job.result()
            except Exception as error:
                found.bm25_error = error
                continue
            found.timings["bm25Search"] = found.timings.get("bm25Search", 0.0) + ms
            for hit in hits:
                entity = dict(hit["entity"])
                vector_of_hit = entity.pop("dense", None)
                if vector_of_hit is not None:
                    found.vectors[hit.id] = vector_of_hit
                found.hits.setdefault(hit.id, entity)
                found.bm25[hit.id] = abs(float(hit.distance))  # Milvus Lite returns -score
            if len(hits) < self.query.limit:  # exhausted: what it did not return shares no word with the query
                found.no_bm25 |= dense_ids.get(kb, set()) - {hit.id for hit in hits}
        found.ms = elapsed_ms(self.started)
        return found


def start(
    client: MilvusClient,
    pool: Executor,
    query: Query,
    knowledge_base_ids: list[str] | None,
    timeout: float,
    pages: str | None = None,
    dense_search: bool = True,
    bm25_search: bool = True,
) -> Pending:
    """Dense and BM25 searches, one pair per filter, started in parallel: the BM25 searches, then the query embedded
    here (while they run), then the dense searches; ``Pending.result()`` waits for them.

    ``pages``: a filter to candidate pages or documents (pageindex); ``dense_search=False``: BM25 only;
    ``bm25_search=False``: dense only. Every job put in the pool is a leaf (one Milvus call): nothing in it
    waits on the pool.
    """
    started = time.perf_counter()
    filters = _kb_filters(knowledge_base_ids, pages)
    bm25_jobs = {
        kb: pool.submit(
            _timed,
            search_bm25,
            client,
            query.collection,
            query.bm25_text or query.text,
            flt,
            query.limit,
            timeout,
            bool(query.dense_text),
        )
        for kb, flt in filters.items()
        if bm25_search
    }
    found = Found()
    encoding = time.perf_counter()
    vector = query.vector()
    if query.dense_text:
        found.timings["queryEncoding"] = elapsed_ms(encoding)
    dense_jobs = (
        {}
        if vector is None or not dense_search
        else {
            kb: pool.submit(_timed, search_dense, client, query.collection, vector.tolist(), flt, query.limit, timeout)
            for kb, flt in filters.items()
        }
    )
    return Pending(query, bm25_jobs, dense_jobs, found, started)


def _timed(search: Callable[..., list], *args) -> tuple[list, float]:
    """A search's hits and its own milliseconds (its wait in the pool left out)."""
    started = time.perf_counter()
    return search(*args), elapsed_ms(started)


def _kb_filters(knowledge_base_ids: list[str] | None, pages: str | None) -> dict[str | None, str]:
    """One filter per knowledge base searched separately (key: the knowledge base), or one for all (key None)."""
    knowledge_base_ids = list(dict.fromkeys(knowledge_base_ids)) if knowledge_base_ids else None
    filters: dict[str | None, str]
    if knowledge_base_ids is None:
        filters = {None: ""}
    elif pages is None and len(knowledge_base_ids) <= MAX_SEPARATE_KB_SEARCHES:
        filters = {kb: in_filter("knowledge_base_id", [kb]) for kb in knowledge_base_ids}
    else:
        filters = {None: in_filter("knowledge_base_id", knowledge_base_ids)}
    if pages:
        filters = {kb: f"({flt}) and ({pages})" if flt else pages for kb, flt in filters.items()}
    return filters
