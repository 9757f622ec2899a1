"""Search over the published alias: hybrid chunk search, the ``pageindex`` strategy, page fallback.

Hybrid (DESIGN.md section 6). For every requested knowledge base a dense COSINE search and a BM25
search run separately (in parallel; up to ``MAX_SEPARATE_KB_SEARCHES`` knowledge bases, then one
filtered search for all); their candidates are merged and deduped by ``chunkId``; BM25 scores are
divided by the best BM25 score among all candidates of the query, and

    score = dense_weight * dense + lexical_weight * lexical + exactBoost

where ``exactBoost`` is added when the whole query (whitespace-normalized, case-folded) appears in the
chunk's content. Then min score, ordering (score, then document, page, chunk) and one global top-k.

A candidate found by one search only gets the other score as follows:
- found by BM25 only: ``dense`` is the cosine of the query vector and the chunk's stored vector
  (returned with the BM25 hit);
- found by dense only: ``lexical`` is 0.0 when the BM25 search of the same filter returned fewer hits
  than asked for (then the chunk shares no word with the query: its BM25 score is 0), else ``null``
  (below the BM25 cut-off, not computed) and counted as 0.

The ``pageindex`` strategy (the default: measured better on the dev set and on paraphrased questions,
see ``benchmarks/retrieval_quality.py``) locates pages first and ranks pages; see ``_pageindex``.

Degraded modes, each with a warning in the response and never an error:
- BM25 search fails or times out: candidates come from dense search, and the lexical signal is keyword
  overlap (the share of the query's words found in the content);
- dense search fails or times out: ranked by BM25 alone (the dense weight moves to lexical);
- both fail (or Milvus is down): page fallback from Postgres.

Language policy. The collection's embedding spec records the languages its model reads. For a query
with Chinese characters and a model that does not read Chinese (MiniLM: ``en``), a dense score of the
whole query is noise: the dense search runs on the query's Latin words only (``"使用 backports 安装较新的
软件"`` -> ``"backports"``) and the dense weight is multiplied by their share of the query's words (1 of
6 here; jieba words for the Chinese part), the rest moving to lexical (BM25, jieba analyzer). A query
with no Latin word is ranked by BM25 alone. A warning names what was done. Measured on the dev set's
Chinese manual (``benchmarks/retrieval_quality.py``) against ``latin-words`` (Latin words at full
weight), ``drop`` (no dense score for any Chinese query) and ``full`` (embed the whole query).

Page fallback: when chunk search fails, or finds nothing and the request set no ``minScore``, pages
are read from Postgres (substring match of the query's words, Chinese words from jieba) and returned
with ``retrievalSource: "fallback_pages"`` and ``score: null``.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from pymilvus import MilvusClient

from kb_assets.embedding.model import EmbeddingModel
from kb_assets.retrieval.config import SearchConfig, Weights  # noqa: F401  (re-exported)
from kb_assets.stores.catalog import Catalog
from kb_assets.stores.vectors import (
    OUTPUT_FIELDS,
    SPEC_PROPERTY,
    in_filter,
    pages_filter,
)
from kb_assets.structure.summaries import tokenize
from kb_assets.text import normalize_ws

log = logging.getLogger(__name__)
STRATEGIES = ("hybrid", "pageindex")
LANGUAGE_POLICIES = ("latin-words", "share", "drop", "full")
# above this many requested knowledge bases, one search with an ``in`` filter replaces one search each
MAX_SEPARATE_KB_SEARCHES = 8
# pageindex: the weight of a page's locating score beside its best chunk's hybrid score, and how many
# chunks a page gives (measured on the dev set and a paraphrased set: one chunk a page ranks best)
PAGEINDEX_LOCATE_WEIGHT = 0.3
PAGEINDEX_CHUNKS_PER_PAGE = 1
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_LATIN_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


@dataclass
class SearchRequest:
    query: str
    knowledge_base_ids: list[str] | None = None
    limit: int = 10
    min_score: float | None = None
    strategy: str | None = None         # None: the configured default


@dataclass
class SearchResponse:
    results: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    strategy: str = "hybrid"
    timings_ms: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        return {"results": self.results, "warnings": self.warnings}


def dense_query_text(query: str, languages: tuple[str, ...],
                     policy: str = "share") -> tuple[str, float, str | None]:
    """The part of the query the model reads, the share of the dense weight it keeps, and a warning.

    Policies for a Chinese query and a model that does not read Chinese (see the module docstring):
    ``latin-words``: dense on the Latin words, full weight; ``share``: dense on the Latin words, weight
    times their share of the query's words; ``drop``: no dense score; ``full``: the whole query, as is.
    """
    if policy == "full" or "zh" in languages or not _CJK.search(query):
        return query, 1.0, None
    latin = _LATIN_WORD.findall(query)
    if policy == "drop" or not latin:
        return "", 0.0, ("dense score not used: the embedding model does not read Chinese "
                         f"(it reads {', '.join(languages)}); ranked by BM25")
    if policy == "share":
        chinese = [w for run in _CJK_RUN.findall(query) for w in _jieba_words(run)]
        share = len(latin) / (len(latin) + len(chinese))
        return " ".join(latin), share, (f"dense score computed on the query's non-Chinese words only "
                                        f"({' '.join(latin)!r}), weighted by their share of the query ({share:.2f})")
    return " ".join(latin), 1.0, f"dense score computed on the query's non-Chinese words only ({' '.join(latin)!r})"


def _jieba_words(text: str) -> list[str]:
    import jieba

    jieba.setLogLevel(60)
    return [w for w in jieba.cut(text) if w.strip()]


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
class _Query:
    """One request's query against one collection: the text the model reads and its dense weight share."""

    collection: str
    model: EmbeddingModel
    dense_text: str
    share: float
    limit: int                          # hits asked of each search
    _vector: np.ndarray | None = None

    def vector(self) -> np.ndarray | None:
        """The query vector (embedded once, on first use; None when dense is not used)."""
        if self._vector is None and self.dense_text:
            self._vector = self.model.encode([self.dense_text])[0]
        return self._vector


@dataclass
class _Found:
    """What the searches of a query returned: entities, raw scores, failures."""

    hits: dict[str, dict] = field(default_factory=dict)
    dense: dict[str, float] = field(default_factory=dict)
    bm25: dict[str, float] = field(default_factory=dict)
    no_bm25: set[str] = field(default_factory=set)   # returned by dense; BM25 exhausted without them: score 0
    vectors: dict[str, list[float]] = field(default_factory=dict)   # stored vectors of BM25 hits
    dense_error: Exception | None = None
    bm25_error: Exception | None = None
    ms: float = 0.0

    def merge(self, other: "_Found") -> "_Found":
        """Both searches' candidates; a path failed only if it failed in both (BM25 scores do not depend on
        the filter, so one chunk has one BM25 score)."""
        merged = _Found({**self.hits, **other.hits}, {**self.dense, **other.dense}, {**self.bm25, **other.bm25},
                        ms=self.ms + other.ms)
        merged.no_bm25 = (self.no_bm25 | other.no_bm25) - set(merged.bm25)
        merged.vectors = {**self.vectors, **other.vectors}
        if self.dense_error is not None and other.dense_error is not None:
            merged.dense_error = self.dense_error
        if self.bm25_error is not None and other.bm25_error is not None:
            merged.bm25_error = self.bm25_error
        return merged


class Searcher:
    """Searches the collection the alias publishes, with the model recorded for that collection."""

    def __init__(self, client: MilvusClient, catalog: Catalog, alias: str,
                 load_model: Callable[[str], EmbeddingModel], config: SearchConfig | None = None,
                 owns_catalog: bool = False):
        self.client = client
        self.catalog = catalog
        self.owns_catalog = owns_catalog      # close() then closes the catalog's pooled connections too
        self.alias = alias
        self.load_model = load_model          # model id -> EmbeddingModel (cached by the caller)
        self.config = config or SearchConfig()
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="kb-search")
        self._published: tuple[float, str, dict] | None = None
        self._loaded: str | None = None       # the collection this searcher loaded (again after a failure)
        self._lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        if self.owns_catalog:
            self.catalog.close_pool()

    def warm_up(self) -> list[str]:
        """Load what the first query would otherwise wait for (the model, jieba); best effort.

        Returns what could not be warmed (e.g. nothing published yet): searches then report it.
        """
        problems = []
        query_terms("预热 warm")
        try:
            _, spec = self._collection()
            self.load_model(spec["model"]).encode(["warm up"])
        except Exception as error:
            problems.append(f"{type(error).__name__}: {_short(error)}")
        return problems

    # entry point -------------------------------------------------------------------------------
    def search(self, request: SearchRequest) -> SearchResponse:
        if not request.query.strip():
            raise ValueError("query is empty")
        if request.limit < 1:
            raise ValueError("limit must be at least 1")
        strategy = request.strategy or self.config.strategy
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r} (one of {', '.join(STRATEGIES)})")
        response = SearchResponse(strategy=strategy)
        try:
            if strategy == "pageindex":
                response.results = self._pageindex(request, response)
            else:
                response.results = self._hybrid(request, response)
        except Exception as error:  # any chunk-search failure falls back to pages, never a 500
            self._published = self._loaded = None
            log.warning("chunk search failed, answering from pages: %s: %s", type(error).__name__, _short(error))
            response.warnings.append(f"chunk search failed ({type(error).__name__}: {_short(error)}); "
                                     "answered from pages (fallback)")
            response.results = []
            return self._fallback(request, response)
        if not response.results and request.min_score is None:
            response.warnings.append("no chunk matched; answered from pages (fallback)")
            return self._fallback(request, response)
        facts = self._page_facts([(r["documentId"], r["pageIndex"]) for r in response.results], response)
        for row in response.results:
            key = facts.get((row["documentId"], row["pageIndex"]), {}).get("image_key")
            row["pageImageUrl"] = f"/v1/assets/{key}" if key else None
        return response

    def _page_facts(self, pages: list[tuple[str, int]], response: SearchResponse) -> dict:
        """Page image keys and table-of-contents marks from Postgres; without them, a warning."""
        if "page facts unavailable" in " ".join(response.warnings):
            return {}
        try:
            return self.catalog.page_facts(pages)
        except Exception as error:
            response.warnings.append(f"page facts unavailable ({type(error).__name__}: {_short(error)}): "
                                     "no page images, table-of-contents pages not demoted")
            return {}

    # hybrid ----------------------------------------------------------------------------------
    def _hybrid(self, request: SearchRequest, response: SearchResponse) -> list[dict]:
        rows = self.candidates(request, response)
        rows = [r for r in rows if request.min_score is None or r["score"] >= request.min_score]
        rows.sort(key=_rank_key)
        return rows[: request.limit]

    def candidates(self, request: SearchRequest, response: SearchResponse) -> list[dict]:
        """Every candidate of the dense and BM25 searches of the requested knowledge bases, scored
        (neither cut nor ordered)."""
        query = self._query(request, response)
        return self._score(request, response, query, self._search(request, query))

    def _query(self, request: SearchRequest, response: SearchResponse) -> "_Query":
        collection, spec = self._collection()
        model = self.load_model(spec["model"])
        if model.dimension != spec["dimension"]:
            raise RuntimeError(f"model {spec['model']} gives {model.dimension}-d vectors, "
                               f"collection {collection} holds {spec['dimension']}-d")
        text, share, warning = dense_query_text(request.query, tuple(spec.get("languages") or ["en"]),
                                                self.config.language_policy)
        if warning:
            response.warnings.append(warning)
        return _Query(collection, model, text, share, limit=max(self.config.candidates, request.limit))

    def _search(self, request: SearchRequest, query: "_Query", pages: str | None = None,
                dense_search: bool = True) -> "_Found":
        """Dense and BM25 searches, one pair per filter, in parallel (BM25 starts while the query is embedded).

        ``pages``: a filter to candidate pages (pageindex); ``dense_search=False``: BM25 only.
        """
        started = time.perf_counter()
        filters = _kb_filters(request.knowledge_base_ids, pages)
        bm25_jobs = {kb: self._pool.submit(self._search_bm25, query.collection, request.query, flt, query.limit,
                                           bool(query.dense_text)) for kb, flt in filters.items()}
        vector = query.vector()
        dense_jobs = {} if vector is None or not dense_search else {
            kb: self._pool.submit(self._search_dense, query.collection, vector, flt, query.limit)
            for kb, flt in filters.items()}
        found = _Found()
        dense_ids: dict[str | None, set[str]] = {}
        for kb, job in dense_jobs.items():
            try:
                hits = job.result()
            except Exception as error:
                found.dense_error = error
                continue
            dense_ids[kb] = {hit.id for hit in hits}
            for hit in hits:
                found.hits[hit.id] = hit["entity"]
                found.dense[hit.id] = float(hit.distance)
        for kb, job in bm25_jobs.items():
            try:
                hits = job.result()
            except Exception as error:
                found.bm25_error = error
                continue
            for hit in hits:
                entity = dict(hit["entity"])
                vector_of_hit = entity.pop("dense", None)
                if vector_of_hit is not None:
                    found.vectors[hit.id] = vector_of_hit
                found.hits.setdefault(hit.id, entity)
                found.bm25[hit.id] = abs(float(hit.distance))   # Milvus Lite returns -score
            if len(hits) < query.limit:     # exhausted: what it did not return shares no word with the query
                found.no_bm25 |= dense_ids.get(kb, set()) - {hit.id for hit in hits}
        found.ms = _ms(started)
        return found

    def _score(self, request: SearchRequest, response: SearchResponse, query: "_Query", found: "_Found") -> list[dict]:
        """The hybrid score of every candidate (see the module docstring), with warnings for degraded modes."""
        weights = self.config.weights
        vector = query.vector()
        dense_ok = vector is not None and found.dense_error is None
        bm25_ok = found.bm25_error is None
        if not dense_ok and not bm25_ok:
            raise RuntimeError("dense and BM25 search both failed: "
                               f"{_short(found.dense_error) if found.dense_error else 'dense not used'}; "
                               f"{_short(found.bm25_error)}")
        if found.dense_error is not None:
            response.warnings.append(f"dense search unavailable ({type(found.dense_error).__name__}: "
                                     f"{_short(found.dense_error)}); ranked by BM25 only")
        if found.bm25_error is not None:
            response.warnings.append(f"BM25 search unavailable ({type(found.bm25_error).__name__}: "
                                     f"{_short(found.bm25_error)}); lexical score is keyword overlap")
        dense = dict(found.dense) if dense_ok else {}
        if dense_ok:
            for chunk_id, stored in found.vectors.items():     # BM25-only hits: cosine with the stored vector
                if chunk_id not in dense:
                    dense[chunk_id] = float(np.dot(np.asarray(stored, dtype=np.float32), vector))
            missing = [chunk_id for chunk_id in found.hits if chunk_id not in dense]
            if missing:
                try:
                    for row in self.client.query(query.collection, filter=in_filter("chunk_id", missing),
                                                 output_fields=["chunk_id", "dense"], limit=len(missing),
                                                 timeout=self.config.milvus_timeout_s):
                        dense[row["chunk_id"]] = float(np.dot(np.asarray(row["dense"], dtype=np.float32), vector))
                except Exception as error:
                    response.warnings.append(f"stored vectors unreadable ({type(error).__name__}); dense score "
                                             f"missing for {len(missing)} BM25-only candidates")
            dense_weight = weights.dense * query.share
            lexical_weight = weights.lexical + weights.dense * (1 - query.share)
        else:
            dense_weight, lexical_weight = 0.0, weights.dense + weights.lexical

        best_bm25 = max(found.bm25.values(), default=0.0)
        terms = query_terms(request.query)
        needle = normalize_ws(request.query).casefold()
        rows = []
        for chunk_id, entity in found.hits.items():
            if not bm25_ok:
                lexical = keyword_overlap(terms, entity["content"])
            elif chunk_id in found.bm25:
                lexical = found.bm25[chunk_id] / best_bm25 if best_bm25 > 0 else 0.0
            else:
                lexical = 0.0 if chunk_id in found.no_bm25 else None
            dense_score = dense.get(chunk_id) if dense_ok else None
            exact = weights.exact_boost if needle and needle in normalize_ws(entity["content"]).casefold() else 0.0
            score = dense_weight * (dense_score or 0.0) + lexical_weight * (lexical or 0.0) + exact
            rows.append(result_row(entity, score, {"dense": _round(dense_score), "lexical": _round(lexical),
                                                   "exactBoost": exact}))
        response.timings_ms["searches"] = found.ms
        return rows

    def _search_dense(self, collection: str, vector: np.ndarray, flt: str, limit: int):
        return self.client.search(collection, data=[vector.tolist()], anns_field="dense", limit=limit, filter=flt,
                                  output_fields=OUTPUT_FIELDS, timeout=self.config.milvus_timeout_s,
                                  search_params={"metric_type": "COSINE", "params": {"ef": max(64, limit * 2)}})[0]

    def _search_bm25(self, collection: str, query: str, flt: str, limit: int, with_vectors: bool):
        """BM25 hits, with their stored vectors when the dense score is used (cheaper than a get() after)."""
        return self.client.search(collection, data=[query], anns_field="sparse", limit=limit, filter=flt,
                                  output_fields=OUTPUT_FIELDS + ["dense"] * with_vectors,
                                  timeout=self.config.milvus_timeout_s,
                                  search_params={"metric_type": "BM25"})[0]

    def _collection(self) -> tuple[str, dict]:
        """The collection the alias publishes and its embedding spec (reused for ``spec_ttl_s``), loaded.

        Searches name the collection, not the alias, so a query is embedded with the model of the
        collection it searches even while the alias is being swapped.
        """
        with self._lock:
            cached = self._published
            if cached and time.monotonic() - cached[0] < self.config.spec_ttl_s:
                return cached[1], cached[2]
        timeout = self.config.milvus_timeout_s
        try:
            collection = self.client.describe_alias(self.alias, timeout=timeout)["collection_name"]
        except Exception as error:
            raise RuntimeError(f"nothing is published under the alias {self.alias!r} ({_short(error)})") from None
        properties = self.client.describe_collection(collection, timeout=timeout).get("properties") or {}
        if SPEC_PROPERTY not in properties:
            raise RuntimeError(f"collection {collection} carries no embedding spec ({SPEC_PROPERTY})")
        spec = json.loads(properties[SPEC_PROPERTY])
        if collection != self._loaded:          # after a Milvus restart collections are not loaded
            self.client.load_collection(collection, timeout=timeout)
            self._loaded = collection
        with self._lock:
            self._published = (time.monotonic(), collection, spec)
        return collection, spec

    # pageindex -------------------------------------------------------------------------------
    def _pageindex(self, request: SearchRequest, response: SearchResponse) -> list[dict]:
        """Locate candidate pages first, search chunks on them, assemble pages by relevance.

        1. Locate (Postgres): pages scored by the query's words in PageIndex node titles and keywords
           and in page summaries and keywords (``Catalog.locate_pages``; never table-of-contents pages).
        2. Search chunks filtered to those pages (Milvus filter on ``document_id`` and page range): a
           BM25 search, whose hits come with their stored vectors and so get both scores; the hybrid
           search of the whole knowledge base runs beside the locating (a relevant page that nothing
           located still takes part, ranked by its chunks). A dense search on the located pages too
           changed no figure of the dev or paraphrased sets and costs another filtered search (Milvus
           Lite: ~200 ms at 100k chunks), so there is none.
        3. Assemble: a page's relevance is its best chunk's hybrid score plus
           ``PAGEINDEX_LOCATE_WEIGHT`` x its locating score; pages in that order (table-of-contents pages
           last), each giving its best ``PAGEINDEX_CHUNKS_PER_PAGE`` chunks in chunk order. Every row
           keeps its hybrid score.
        """
        started = time.perf_counter()
        # every job in the pool is a leaf (a Milvus or Postgres call): nothing in it waits on the pool
        locating = self._pool.submit(self.catalog.locate_pages, query_terms(request.query), request.query,
                                     request.knowledge_base_ids, self.config.pageindex_pages)
        query = self._query(request, response)
        found = self._search(request, query)
        try:
            located = locating.result()
        except Exception as error:
            located = []
            response.warnings.append(f"pageindex: locating pages failed ({type(error).__name__}: {_short(error)}); "
                                     "ranked by chunks only")
        response.timings_ms["locate"] = _ms(started)
        if located:
            ranges: dict[str, list[tuple[int, int]]] = {}
            for page in located:
                ranges.setdefault(page["document_id"], []).append((page["page_index"], page["page_index"]))
            found = found.merge(self._search(request, query, pages=pages_filter(ranges), dense_search=False))
        else:
            response.warnings.append("pageindex: no page located by titles, summaries or keywords")
        rows = self._score(request, response, query, found)
        rows = [r for r in rows if request.min_score is None or r["score"] >= request.min_score]
        locate_score = {(p["document_id"], p["page_index"]): p["score"] for p in located}
        by_page: dict[tuple[str, int], list[dict]] = {}
        for row in sorted(rows, key=_rank_key):
            by_page.setdefault(_located_page(row, locate_score), []).append(row)
        relevance = {key: chunks[0]["score"] + PAGEINDEX_LOCATE_WEIGHT * locate_score.get(key, 0.0)
                     for key, chunks in by_page.items()}
        toc = self._page_facts(list(by_page), response)
        results = []
        for key in sorted(by_page, key=lambda key: (toc.get(key, {}).get("is_toc", False), -relevance[key], key)):
            best = by_page[key][:PAGEINDEX_CHUNKS_PER_PAGE]
            results += sorted(best, key=lambda r: (r["pageIndex"], r["chunkIndex"] or 0))
        return results[: request.limit]

    # page fallback ---------------------------------------------------------------------------
    def _fallback(self, request: SearchRequest, response: SearchResponse) -> SearchResponse:
        try:
            pages = self.catalog.search_pages(query_terms(request.query), request.knowledge_base_ids,
                                              request.limit)
            response.results = [page_row(page) for page in pages]
        except Exception as error:
            response.warnings.append(f"page fallback failed ({type(error).__name__}: {_short(error)})")
        return response


def _kb_filters(knowledge_base_ids: list[str] | None, pages: str | None) -> dict[str | None, str]:
    """One filter per knowledge base searched separately (key: the knowledge base), or one for all (key None)."""
    knowledge_base_ids = list(dict.fromkeys(knowledge_base_ids)) if knowledge_base_ids else None
    if knowledge_base_ids is None:
        filters = {None: ""}
    elif pages is None and len(knowledge_base_ids) <= MAX_SEPARATE_KB_SEARCHES:
        filters = {kb: in_filter("knowledge_base_id", [kb]) for kb in knowledge_base_ids}
    else:
        filters = {None: in_filter("knowledge_base_id", knowledge_base_ids)}
    if pages:
        filters = {kb: f"({flt}) and ({pages})" if flt else pages for kb, flt in filters.items()}
    return filters


def _located_page(row: dict, located: dict[tuple[str, int], float]) -> tuple[str, int]:
    """The located page a chunk belongs to (a chunk spanning pages counts for the first located one)."""
    for page in range(row["pageIndex"], row["pageEnd"] + 1):
        if (row["documentId"], page) in located:
            return row["documentId"], page
    return row["documentId"], row["pageIndex"]


def _rank_key(row: dict):
    return (-row["score"], row["documentId"], row["pageIndex"], row["chunkIndex"] or 0, row["chunkId"] or "")


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def _short(error: BaseException | None, chars: int = 200) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= chars else text[: chars - 1] + "…"


def page_row(page: dict) -> dict:
    """A page-fallback result: page text from Postgres, no hybrid score."""
    row = result_row({**page, "content": page["text"][:2000], "page_end": page["page_index"], "image_key": None},
                     None, {"dense": None, "lexical": None, "exactBoost": None}, source="fallback_pages")
    row["pageSummary"] = page.get("summary")
    if page.get("image_key"):
        row["pageImageUrl"] = f"/v1/assets/{page['image_key']}"
    return row


def result_row(entity: dict, score: float | None, scores: dict, source: str = "hybrid") -> dict:
    return {
        "chunkId": entity.get("chunk_id"),
        "documentId": entity["document_id"],
        "knowledgeBaseId": entity["knowledge_base_id"],
        "documentTitle": entity.get("document_title"),
        "sourceUri": entity.get("source_uri"),
        "pageIndex": entity["page_index"],
        "pageEnd": entity.get("page_end", entity["page_index"]),
        "pageLabel": entity.get("page_label") or None,
        "chunkIndex": entity.get("chunk_index"),
        "sectionTitle": entity.get("section_title") or None,
        "content": entity["content"],
        "score": None if score is None else round(float(score), 6),
        "scores": scores,
        "retrievalSource": source,
        "pageImageUrl": None,
        "figureImageUrl": f"/v1/assets/{entity['image_key']}" if entity.get("image_key") else None,
    }
