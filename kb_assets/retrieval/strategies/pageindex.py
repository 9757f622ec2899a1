"""``pageindex`` (the default): locate candidate pages first, search chunks on them, rank pages.

1. Locate (Postgres): pages scored by the query's words in PageIndex node titles and keywords and in
   page summaries and keywords (``Catalog.locate_pages``; never table-of-contents pages).
2. Search chunks on those pages: the best by BM25 among those holding a query term, from the kept term
   counts and page ranges (``located.py``; a BM25 search filtered to the pages where none are kept),
   read with their stored vectors and so given both scores; the hybrid search of the
   whole knowledge base runs beside the locating (a relevant page that nothing located still takes
   part, ranked by its chunks). A dense search on the located pages too changed no figure of the dev
   or paraphrased sets and costs another filtered search (Milvus Lite: ~200 ms at 100k chunks), so
   there is none.
3. Assemble: a page's relevance is its best chunk's hybrid score plus the locating weight x its
   locating score; pages in that order (table-of-contents pages last). The locating weight is
   ``locate_weight`` (0.3) for a query ranked lexically and ``locate_weight_read`` (0.15) for one the
   model reads, mixed by the query's dense share: where chunk scores carry meaning, a bonus from titles
   and summaries buries pages whose summary misses the detail asked for (issue 15). Each page gives its
   best chunk at the page's rank and up to ``chunks_per_page`` - 1 more (best first, none next to one
   taken, so each passage is new text), each ranked by its own hybrid score (with the page's bonus,
   second chunks pushed located pages out of the top 5 of Chinese paraphrases). Every row keeps its
   hybrid score.
   A question that names a statement in its own words ("per the cash flow statement", "using the balance
   sheet", "statement of operations": ``statements.named_statements``) adds ``named_statement`` (0.3) to the
   pages of that statement's nodes in the documents searched (``namedStatement`` in a row's ``scores``):
   the discussion pages that talk about the same figure no longer rank above the table that holds it.
   Filings dev (102 questions) hit@1 / hit@5 0.41 / 0.84 -> 0.77 / 0.96 (statement figures 0.39 -> 0.94
   at rank 1); 0.1 gave 0.59 / 0.93, 0.6 0.78 / 0.96 (``docs/retrieval-log.md`` section 8).
4. Page coverage, for a question of at least ``page_coverage_terms`` (8) terms (a detail question, not
   a title or its paraphrase): each of the ``page_coverage_pages`` (20) best pages adds
   ``page_coverage`` (0.3) x the weighted share of the question's terms its best context window holds
   (``context.coverage``; ``pageCoverage`` in a row's ``scores``), which tells neighbouring pages of one
   section apart by the detail. Dev split of the detail set, Chinese hit@1 / hit@5 0.69 / 0.85 -> 0.75 /
   0.88, English unchanged (0.92 / 0.99), titles unchanged, paraphrases hit@5 0.87 -> 0.90. For every
   question (no term floor) at 0.15 the paraphrases lost 0.02-0.03 hit@1; at 0.5, four Chinese details
   fell; on the best 10 pages only, one gain of three was left; the second-best chunk of a page added to
   its relevance (0.1-0.3) lost Chinese hit@1 (0.69 -> 0.65).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, TypeVar

from kb_assets.lib.json_types import JsonObject
from kb_assets.retrieval.context import Term, coverage, occurrences, question_terms, rarity
from kb_assets.retrieval.located import searched, start_located
from kb_assets.retrieval.page_scorer import PAGES, order_pages
from kb_assets.retrieval.query import Query, query_terms
from kb_assets.retrieval.request import SearchRequest, SearchResponse, elapsed_ms, short
from kb_assets.retrieval.rerank import question_words, rerank
from kb_assets.retrieval.routing import (
    MAX_DOCUMENTS,
    WHY,
    Routing,
    exact_pages,
    expanded,
    routed_pages,
    routing,
    title_words,
)
from kb_assets.retrieval.scoring import rank_key
from kb_assets.settings import SearchConfig
from kb_assets.stores.catalog.locating import LocatedPage
from kb_assets.structure.statements import named_statements, statement_family

if TYPE_CHECKING:
    from kb_assets.retrieval.search import Searcher

T = TypeVar("T")
ROUTED_CHUNKS = 40  # at most this many chunks of the routed pages are read (two a page)


def rank(searcher: Searcher, request: SearchRequest, response: SearchResponse) -> list[JsonObject]:
    query = searcher.prepare(request, response)  # embeds nothing yet; names the documents searched
    # past the engine's exact range the dense stage reads the located pages' chunks, not the knowledge base
    bounded = searcher.dense_bounded(request)
    route = routing(request.query) if searcher.config.analysis else None
    nodes = None
    if route is not None and (query.documents is None or len(query.documents) <= MAX_DOCUMENTS):
        query.bm25_text = expanded(query.bm25_text or query.text, route.words)
        nodes = searcher.pool.submit(
            _timed, searcher.catalog.evidence_nodes, request.knowledge_base_ids, query.documents
        )
    locating = searcher.pool.submit(
        _timed,
        searcher.catalog.locate_pages,
        query_terms(request.query),
        request.query,
        request.knowledge_base_ids,
        searcher.config.pageindex_pages,
        query.documents,
    )
    named = named_statements(request.query)
    statements = None
    if named and searcher.config.named_statement:
        read = searcher.catalog.statement_nodes
        statements = searcher.pool.submit(_timed, read, request.knowledge_base_ids, query.documents)
    searches = searcher.start_fan_out(request, query, dense_search=not bounded)  # the query embedded here
    # the located pages' chunks read while the searches run (and the routed pages' beside them)
    located: list[LocatedPage] = []
    try:
        located, response.timings_ms["locate"] = locating.result()
    except Exception as error:
        response.warnings.append(
            f"pageindex: locating pages failed ({type(error).__name__}: {short(error)}); ranked by chunks only"
        )
    reading = start_located(searcher, response, query, located, None, (), bounded) if located else None
    routed = routed_list(response, route, nodes) if route is not None and nodes is not None else []
    routing_read = (
        start_located(searcher, response, query, routed, min(ROUTED_CHUNKS, 2 * len(routed)), route.titles, bounded)
        if route is not None and routed
        else None
    )
    found = searches.result()
    for pending in (reading, routing_read):
        if pending is not None:
            more, unread = pending()
            found = found.merge(more)
            if unread:
                found = found.merge(searched(searcher, request, query, unread))
    if not located:
        response.warnings.append("pageindex: no page located by titles, summaries or keywords")
    if bounded and not located and not routed:  # nothing located: the dense search of the whole knowledge base
        found = found.merge(searcher.fan_out(request, query, bm25_search=False))
    pages = [(p.document_id, p.page_index) for p in located + routed]
    rows = searcher.score(response, query, found, pages)
    rows = [r for r in rows if request.min_score is None or r["score"] >= request.min_score]
    config = searcher.config
    started = time.perf_counter()
    if config.rerank_coverage or config.rerank_proximity:
        rerank(rows, question_words(request.query, query.translations), config.rerank_coverage, config.rerank_proximity)
    response.add_ms("rerank", started)
    locate_score = {(p.document_id, p.page_index): p.score for p in located}
    by_page: dict[tuple[str, int], list[JsonObject]] = {}
    for row in sorted(rows, key=rerank_key):
        by_page.setdefault(_located_page(row, locate_score), []).append(row)
    weight = locate_weight(searcher.config, query)
    relevance = {key: _value(chunks[0]) + weight * locate_score.get(key, 0.0) for key, chunks in by_page.items()}
    if statements is not None:
        add_named_statement(searcher, response, statements, named, by_page, relevance)
    if route is not None and route.pages:
        for key in route.pages.keys() & relevance.keys():
            relevance[key] += config.analysis * route.pages[key]
            for row in by_page[key]:
                row["scores"]["analysis"] = round(config.analysis * route.pages[key], 6)
                if key in route.exact:
                    row["scores"]["analysisStatement"] = row["scores"]["analysis"]
    read_best_pages(searcher, response, by_page, relevance, max(config.page_coverage_pages, PAGES, request.limit))
    terms = question_terms(request.query, query.translations)
    texts: dict[tuple[str, int], str] = {}
    if config.page_coverage and len(terms) >= config.page_coverage_terms:
        texts = add_page_coverage(searcher, response, terms, by_page, relevance)
    if config.page_scorer:
        question = {
            "asked": route is not None,
            "named_question": bool(named),
            "long": len(terms) >= 8,
            "why": bool(WHY.search(request.query)),
        }
        order_pages(searcher, request, response, by_page, relevance, locate_score, question, texts)
    started = time.perf_counter()
    toc = searcher.page_facts(list(by_page), response)
    response.add_ms("pageFacts", started)
    return assemble(
        by_page, relevance, {key for key in by_page if key in toc and toc[key].is_toc}, searcher.config.chunks_per_page
    )[: request.limit]


def read_best_pages(
    searcher: Searcher,
    response: SearchResponse,
    by_page: dict[tuple[str, int], list[JsonObject]],
    relevance: dict[tuple[str, int], float],
    count: int,
) -> None:
    """Read the texts of the ``count`` best pages (and of their chunks' first pages) in one catalog read, before
    the stages that read them: page coverage, the page scorer and each result's context
    (``Searcher.page_facts`` keeps them in ``response.pages``)."""
    started = time.perf_counter()
    head = sorted(relevance, key=lambda key: -relevance[key])[:count]
    wanted = dict.fromkeys(head)
    for key in head:
        for row in by_page[key][: searcher.config.chunks_per_page + 1]:
            wanted[(row["documentId"], row["pageIndex"])] = None
    searcher.page_facts(list(wanted), response, with_text=True)
    response.add_ms("pageFacts", started)


def routed_list(
    response: SearchResponse,
    route: Routing,
    nodes: Future[tuple[list[tuple[str, str, str, int, int]], float]],
) -> list[LocatedPage]:
    """The pages the question's analyses route to (``routing.py``; ``route.pages``, ``route.exact`` and
    ``route.titles`` set in place), as located pages of score 0 (their chunks are read as the located pages' are)."""
    try:
        read, took = nodes.result()
    except Exception as error:
        response.warnings.append(
            f"pageindex: reading the analyses' nodes failed ({type(error).__name__}: {short(error)})"
        )
        return []
    response.timings_ms["locate"] = round(response.timings_ms.get("locate", 0.0) + took, 1)
    route.pages = routed_pages(read, route.weights)
    route.exact = exact_pages(read, route.weights)
    route.titles = title_words(read, route.weights)
    return [LocatedPage(d, p, 0.0) for d, p in sorted(route.pages)]


def add_page_coverage(
    searcher: Searcher,
    response: SearchResponse,
    terms: list[Term],
    by_page: dict[tuple[str, int], list[JsonObject]],
    relevance: dict[tuple[str, int], float],
) -> dict[tuple[str, int], str]:
    """Add ``page_coverage`` x the page's ``pageCoverage`` to the relevance of the ``page_coverage_pages``
    best pages (in place): the weighted share of the question's terms that the page's best context window
    holds, terms weighted by their rarity among those pages (``context.py``). Returns the pages' texts."""
    started = time.perf_counter()
    config = searcher.config
    head = sorted(relevance, key=lambda key: -relevance[key])[: config.page_coverage_pages]
    texts = {key: fact.text or "" for key, fact in searcher.page_facts(head, response, with_text=True).items()}
    found = {key: occurrences(terms, text) for key, text in texts.items()}
    weights = rarity(list(found.values()))
    for key, text in texts.items():
        share = coverage(found[key], len(text), weights, config.context_chars or 800)
        for row in by_page[key]:
            row["scores"]["pageCoverage"] = round(share, 6)
        relevance[key] += config.page_coverage * share
    response.add_ms("pageCoverage", started)
    return texts


def add_named_statement(
    searcher: Searcher,
    response: SearchResponse,
    statements: Future[tuple[list[tuple[str, str, int, int]], float]],
    named: set[str],
    by_page: dict[tuple[str, int], list[JsonObject]],
    relevance: dict[tuple[str, int], float],
) -> None:
    """Add ``named_statement`` to the relevance of the pages of the statements the question names (in place;
    ``namedStatement`` in a row's ``scores``): "per the cash flow statement" puts the statement's pages above
    the discussion pages that talk about the same figure."""
    try:
        nodes, took = statements.result()
    except Exception as error:
        response.warnings.append(f"pageindex: reading statement nodes failed ({type(error).__name__}: {short(error)})")
        return
    response.timings_ms["locate"] = round(response.timings_ms.get("locate", 0.0) + took, 1)
    pages = {
        (document_id, page)
        for document_id, title, start, end in nodes
        if statement_family(title) in named
        for page in range(start, end + 1)
    }
    for key in pages & relevance.keys():
        relevance[key] += searcher.config.named_statement
        for row in by_page[key]:
            row["scores"]["namedStatement"] = searcher.config.named_statement


def _timed(read: Callable[..., T], *args) -> tuple[T, float]:
    """What a catalog read returned (the located pages, the statement nodes) and its milliseconds."""
    started = time.perf_counter()
    return read(*args), elapsed_ms(started)


def locate_weight(config: SearchConfig, query: Query) -> float:
    """The weight of a page's locating score: ``locate_weight`` for a query ranked lexically, moving to
    ``locate_weight_read`` with the share of the query the model reads."""
    share = query.share if query.dense_text else 0.0
    return config.locate_weight + (config.locate_weight_read - config.locate_weight) * share


def assemble(
    by_page: dict[tuple[str, int], list[JsonObject]],
    relevance: dict[tuple[str, int], float],
    toc: set[tuple[str, int]],
    chunks_per_page: int,
) -> list[JsonObject]:
    """Results from each page's chunks (best first): its best chunk at the page's relevance, up to
    ``chunks_per_page`` - 1 more, none next to one taken, at their own scores; table-of-contents pages last."""
    items = []
    for key, chunks in by_page.items():
        taken: list[JsonObject] = []
        for row in chunks:
            if len(taken) == chunks_per_page:
                break
            if all(abs((row["chunkIndex"] or 0) - (t["chunkIndex"] or 0)) > 1 for t in taken):
                taken.append(row)
        for number, row in enumerate(taken):
            items.append((key in toc, -(relevance[key] if number == 0 else _value(row)), number, key, row))
    items.sort(key=lambda item: item[:4])
    return [item[-1] for item in items]


def _value(row: JsonObject) -> float:
    """A chunk's value for ordering: its second-stage score where there is one, else its hybrid score."""
    return row["scores"].get("rerank", row["score"])


def rerank_key(row: JsonObject) -> tuple:
    """Chunks by their second-stage score (the hybrid score without one), then as ``rank_key``."""
    return (-_value(row),) + rank_key(row)[1:]


def _located_page(row: JsonObject, located: dict[tuple[str, int], float]) -> tuple[str, int]:
    """The located page a chunk belongs to (a chunk spanning pages counts for the first located one)."""
    for page in range(row["pageIndex"], row["pageEnd"] + 1):
        if (row["documentId"], page) in located:
            return row["documentId"], page
    return row["documentId"], row["pageIndex"]
