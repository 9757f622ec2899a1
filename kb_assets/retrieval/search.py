"""Search over the published alias: ``Searcher.search(SearchRequest) -> SearchResponse``, the one
code path of ``kb-assets search`` and ``POST /v1/kb/search``.

A request is ranked by its strategy (``strategies/``: ``hybrid``, ``pageindex``); any failure of chunk
search, or no chunk found when the request set no ``minScore``, answers from pages instead
(``fallback.py``); results then get their page image URLs. The stages a strategy builds on:

- ``query.py``: what the model reads of the query (language policy), the query's words;
- ``fanout.py``: the dense and BM25 searches per knowledge base, in parallel, with timeouts, merged;
- ``scoring.py``: the hybrid formula, the scores a one-sided candidate gets, degraded modes, order;
- ``rows.py``: the result fields and the ``/v1/assets/...`` URLs;
- ``candidates.py``: what the candidates need of the catalog (one read) and which of them may serve;
- ``lexical_query.py``: the query's content words, what BM25 searches with;
- ``lexical_scores.py``: the candidates' BM25 scores from the knowledge bases' own statistics;
- ``context.py``: each result's ``context``, the passage of its page around its chunk that a reader gets.

Only entities of a document's published version are served (``candidates.served``: a half-written new version of
a killed run, or a version that failed, never reaches a result); a result from a document whose newer
file failed while its last good version serves carries ``versionNotice`` and a warning.

Milvus is reached only through ``kb_assets.stores.vectors``; Postgres through the ``Catalog``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from pymilvus import MilvusClient

from kb_assets.embedding.model import EmbeddingModel
from kb_assets.lib.json_types import JsonObject
from kb_assets.retrieval import fanout, scope, scoring
from kb_assets.retrieval.candidates import candidate_rows, served
from kb_assets.retrieval.context import passages, question_terms
from kb_assets.retrieval.crosslingual import english_words, translations
from kb_assets.retrieval.fallback import answer_from_pages
from kb_assets.retrieval.fanout import Found
from kb_assets.retrieval.instructions import focused
from kb_assets.retrieval.lexical_query import bm25_query
from kb_assets.retrieval.lexical_scores import rescored
from kb_assets.retrieval.overlap import trim_repeats
from kb_assets.retrieval.query import Query, dense_query_text, has_chinese, query_terms
from kb_assets.retrieval.request import SearchRequest, SearchResponse, short
from kb_assets.retrieval.rows import asset_url
from kb_assets.retrieval.strategies import rank_function
from kb_assets.settings import SearchConfig
from kb_assets.stores.catalog import Catalog
from kb_assets.stores.catalog.search_reads import PageFacts
from kb_assets.stores.entities import not_loaded, stored_vectors
from kb_assets.stores.vectors import SpecRecord, collection_spec, engine, in_filter, load, published_collection

__all__ = ["SearchRequest", "SearchResponse", "Searcher"]
log = logging.getLogger(__name__)


class Searcher:
    """Searches the collection the alias publishes (``collection``: that one instead, e.g. a migration's
    candidate), with the model recorded for that collection."""

    def __init__(
        self,
        client: MilvusClient,
        catalog: Catalog,
        alias: str,
        load_model: Callable[[str], EmbeddingModel],
        config: SearchConfig | None = None,
        owns_catalog: bool = False,
        collection: str | None = None,
    ):
        self.client = client
        self.catalog = catalog
        self.owns_catalog = owns_catalog  # close() then closes the catalog's pooled connections too
        self.alias = alias
        self.collection = collection
        self.load_model = load_model  # model id -> EmbeddingModel (cached by the caller)
        self.config = config or SearchConfig()
        # Milvus and Postgres calls of one search run here; every job is a leaf (waits on nothing in the pool)
        self.pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="kb-search")
        self._published: tuple[float, str, SpecRecord] | None = None
        self._sizes: tuple[float, dict[str, int]] | None = None  # knowledge_base_chunks(), when read
        self._loaded: str | None = None  # the collection this searcher loaded (again after a failure)
        self._lock = threading.Lock()

    def close(self) -> None:
        self.pool.shutdown(wait=False)
        if self.owns_catalog:
            self.catalog.close_pool()

    def forget_published(self) -> None:
        """Ask Milvus again which collection is published and load it (after the server restarted)."""
        self._published = self._loaded = None

    def warm_up(self) -> list[str]:
        """Load what the first query would otherwise wait for (the collection, the model, jieba); best effort.

        Returns what could not be warmed (e.g. nothing published yet): searches then report it.
        """
        problems = []
        query_terms("预热 warm")
        if self.config.language_policy == "translate":
            english_words("预热")
        try:
            collection = self.collection or published_collection(self.client, self.catalog, self.alias)
            if collection:  # without a deadline: the embedded engine reads every row into memory first
                load(self.client, collection)
            _, spec = self.published()
            self.load_model(spec["model"]).encode_queries(["warm up"])
        except Exception as error:
            problems.append(f"{type(error).__name__}: {short(error)}")
        return problems

    # entry point -------------------------------------------------------------------------------
    def search(self, request: SearchRequest) -> SearchResponse:
        """The request's results, warnings and the time of each stage (``timings_ms``, ``request.STAGES``)."""
        started = time.perf_counter()
        response = self._search(request)
        response.add_ms("total", started)
        return response

    def _search(self, request: SearchRequest) -> SearchResponse:
        if not request.query.strip():
            raise ValueError("query is empty")
        if request.limit < 1:
            raise ValueError("limit must be at least 1")
        request = focused(request)  # the question without its instructions to the answerer
        strategy = request.strategy or self.config.strategy
        rank = rank_function(strategy)
        for attempt in range(2):
            response = SearchResponse(strategy=strategy)
            try:
                response.results = rank(self, request, response)
                break
            except Exception as error:  # any chunk-search failure falls back to pages, never a 500
                loaded, self._published, self._loaded = self._loaded, None, None
                if attempt == 0 and loaded and not_loaded(error):
                    # released behind this searcher's back (Milvus Lite restarted, another client released
                    # it): load it again and search again rather than answer this request from pages
                    log.info("collection %s was released; loading it and searching again", loaded)
                    continue
                # the response says so; the service logs one line an outage (lib/logs.py: Outages)
                log.debug("chunk search failed, answering from pages: %s: %s", type(error).__name__, short(error))
                response.warnings.append(
                    f"chunk search failed ({type(error).__name__}: {short(error)}); answered from pages (fallback)"
                )
                response.results = []
                return answer_from_pages(self.catalog, request, response)
        if not response.results and request.min_score is None and not request.filters:
            response.warnings.append("no chunk matched; answered from pages (fallback)")
            return answer_from_pages(self.catalog, request, response)
        known = scope.known_metadata(self, request.knowledge_base_ids) if response.results else {}
        budget = self.config.context_chars
        started = time.perf_counter()
        facts = self.page_facts(
            [(r["documentId"], r["pageIndex"]) for r in response.results], response, with_text=budget > 0
        )
        response.add_ms("pageFacts", started)
        if budget > 0:  # without the page text (page facts failed): the chunk, cut to the budget
            started = time.perf_counter()
            terms = question_terms(request.query, self.dictionary_words(request.query))
            texts = {key: fact.text or "" for key, fact in facts.items()}
            passages(response.results, texts, terms, budget, table_budget=self.config.table_context_chars)
            trim_repeats(response.results)  # a page's later results hand over what its earlier ones did not
            response.add_ms("context", started)
        for row in response.results:
            fact = facts.get((row["documentId"], row["pageIndex"]))
            row["pageImageUrl"] = asset_url(fact.image_key if fact else None)
            row["documentMetadata"] = known.get(row["documentId"])
            if row["documentId"] in response.last_good:
                row["versionNotice"] = response.last_good[row["documentId"]]
        for notice in sorted(
            {response.last_good[r["documentId"]] for r in response.results if r["documentId"] in response.last_good}
        ):
            response.warnings.append(notice)
        return response

    # stages strategies build on ------------------------------------------------------------------
    def candidates(self, request: SearchRequest, response: SearchResponse) -> list[JsonObject]:
        """Every candidate of the dense and BM25 searches of the requested knowledge bases, scored
        (neither cut nor ordered)."""
        query = self.prepare(request, response)
        return self.score(response, query, self.fan_out(request, query))

    def prepare(self, request: SearchRequest, response: SearchResponse) -> Query:
        """The request's query against the published collection, with that collection's model."""
        collection, spec = self.published()
        model = self.load_model(spec["model"])
        if model.dimension != spec["dimension"]:
            raise RuntimeError(
                f"model {spec['model']} gives {model.dimension}-d vectors, "
                f"collection {collection} holds {spec['dimension']}-d"
            )
        languages = tuple(spec.get("languages") or ["en"])
        translated = self.dictionary_words(request.query)
        english = english_words(request.query, translated) if translated else []
        text, share, warning = dense_query_text(
            request.query, languages, self.config.language_policy, english, self.config.translated_weight
        )
        if warning:
            response.warnings.append(warning)
        extra = english if self.config.translate_bm25 else []
        documents = scope.scope(self, request.query, request.knowledge_base_ids, request.filters, response.warnings)
        bm25_text = bm25_query(request.query, extra) if self.config.bm25_content_words else request.query
        return Query(
            request.query,
            collection,
            model,
            text,
            share,
            limit=max(self.config.candidates, request.limit),
            bm25_text=bm25_text,
            translations=translated,
            documents=documents,
        )

    def dictionary_words(self, query: str) -> dict[str, list[str]]:
        """The English dictionary words of a Chinese query's words under the ``translate`` policy (``{}``
        otherwise), whether or not the model reads Chinese: BM25, the rerank and the context use them."""
        if self.config.language_policy == "translate" and has_chinese(query):
            return translations(query)
        return {}

    def fan_out(
        self,
        request: SearchRequest,
        query: Query,
        pages: str | None = None,
        dense_search: bool = True,
        bm25_search: bool = True,
    ) -> Found:
        """The dense and BM25 searches of the requested knowledge bases (see ``fanout.start``), in the
        documents the request's filters and the question's cues leave (``scope.py``)."""
        return self.start_fan_out(request, query, pages, dense_search, bm25_search).result()

    def start_fan_out(
        self,
        request: SearchRequest,
        query: Query,
        pages: str | None = None,
        dense_search: bool = True,
        bm25_search: bool = True,
    ) -> fanout.Pending:
        """``fan_out`` started (the query embedded, the searches running): ``.result()`` waits for them."""
        if query.documents is not None:
            only = in_filter("document_id", query.documents) if query.documents else "document_id == ''"
            pages = f"({pages}) and ({only})" if pages else only
        return fanout.start(
            self.client,
            self.pool,
            query,
            request.knowledge_base_ids,
            self.config.milvus_timeout_s,
            pages=pages,
            dense_search=dense_search,
            bm25_search=bm25_search,
        )

    def dense_bounded(self, request: SearchRequest) -> bool:
        """Whether this search's dense stage reads only the located pages' chunks (pageindex, ``located.py``): on the
        embedded engine, whose dense index is an exact scan of every row (``stores/vectors.py``), once the collection
        holds more than ``dense_exact_chunks`` chunks. A Milvus server searches its configured index."""
        if engine(self.client).dense_index != "flat":
            return False
        # the scan reads every row of the collection, whichever knowledge bases the filter keeps
        return sum(self.knowledge_base_chunks().values()) > self.config.dense_exact_chunks

    def knowledge_base_chunks(self) -> dict[str, int]:
        """Chunks that serve in each knowledge base (read at most once per ``scope.TTL_S``; {} without Postgres)."""
        cached = self._sizes
        if cached is not None and time.monotonic() - cached[0] < scope.TTL_S:
            return cached[1]
        try:
            sizes = self.catalog.knowledge_base_chunks()
        except Exception:  # no sizes (Postgres unavailable): the exact dense search, as for a small knowledge base
            return cached[1] if cached else {}
        self._sizes = (time.monotonic(), sizes)
        return sizes

    def score(
        self, response: SearchResponse, query: Query, found: Found, pages: Sequence[tuple[str, int]] = ()
    ) -> list[JsonObject]:
        """The hybrid score of every candidate (see ``scoring``; BM25 from ``lexical_scores``), with
        warnings for degraded modes. What the candidates need of the catalog is read once (``candidate_rows``:
        their documents' rows, term counts, the BM25 statistics not read yet, and the marks of their pages and
        of ``pages``, kept in ``response.pages``)."""
        timeout = self.config.milvus_timeout_s
        for stage, ms in found.timings.items():
            response.timings_ms[stage] = round(response.timings_ms.get(stage, 0.0) + ms, 1)
        started = time.perf_counter()
        rows = candidate_rows(self.catalog, self.config, response, query, found, pages)
        found = served(response, found, rows)
        response.add_ms("versions", started)
        if self.config.kept_bm25_statistics:
            started = time.perf_counter()
            found = rescored(query.bm25_text or query.text, found, rows, response.warnings)
            response.add_ms("lexicalStatistics", started)
        started = time.perf_counter()
        scored = scoring.score(
            query,
            found,
            self.config.weights,
            response.warnings,
            lambda chunk_ids: stored_vectors(self.client, query.collection, chunk_ids, timeout),
        )
        response.add_ms("fusion", started)
        return scored

    def page_facts(
        self, pages: list[tuple[str, int]], response: SearchResponse, with_text: bool = False
    ) -> dict[tuple[str, int], PageFacts]:
        """Page image keys and table-of-contents marks (and page texts) from Postgres; without them, a warning.
        What this search read already (``response.pages``) is not read again."""
        if "page facts unavailable" in " ".join(response.warnings):
            return {}
        missing = [
            key
            for key in dict.fromkeys(pages)
            if key not in response.pages or (with_text and response.pages[key].text is None)
        ]
        if missing:
            try:
                response.pages.update(self.catalog.page_facts(missing, with_text))
            except Exception as error:
                response.warnings.append(
                    f"page facts unavailable ({type(error).__name__}: {short(error)}): "
                    "no page images, table-of-contents pages not demoted"
                )
                return {}
        return {key: response.pages[key] for key in pages if key in response.pages}

    def published(self) -> tuple[str, SpecRecord]:
        """The collection the alias publishes and its embedding spec (reused for ``spec_ttl_s``), loaded.

        Searches name the collection, not the alias, so a query is embedded with the model of the
        collection it searches even while the alias is being swapped. When the alias cannot be read (on
        the embedded engine it is a catalog row: Postgres is away), the collection last read goes on
        serving.
        """
        with self._lock:
            cached = self._published
            if cached and time.monotonic() - cached[0] < self.config.spec_ttl_s:
                return cached[1], cached[2]
        timeout = self.config.milvus_timeout_s
        try:
            collection = self.collection or published_collection(self.client, self.catalog, self.alias, timeout)
        except Exception as error:
            if cached is not None:
                log.debug("the alias %r is not readable, %s goes on serving: %s", self.alias, cached[1], short(error))
                return cached[1], cached[2]
            raise RuntimeError(f"nothing is published under the alias {self.alias!r} ({short(error)})") from None
        if collection is None:
            raise RuntimeError(f"nothing is published under the alias {self.alias!r}")
        spec = collection_spec(self.client, collection, timeout)
        if collection != self._loaded:  # after a Milvus restart collections are not loaded
            load(self.client, collection, timeout)
            self._loaded = collection
        with self._lock:
            self._published = (time.monotonic(), collection, spec)
        return collection, spec
