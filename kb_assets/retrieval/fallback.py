"""Page fallback: when chunk search fails, or finds nothing and the request set no ``minScore``, pages
are read from Postgres (substring match of the query's words, Chinese words from jieba) and returned
with ``retrievalSource: "fallback_pages"`` and ``score: null``."""

from __future__ import annotations

from kb_assets.retrieval.query import query_terms
from kb_assets.retrieval.request import SearchRequest, SearchResponse, short
from kb_assets.retrieval.rows import page_row
from kb_assets.stores.catalog import Catalog


def answer_from_pages(catalog: Catalog, request: SearchRequest, response: SearchResponse) -> SearchResponse:
    """The response with pages as results; when Postgres fails too, no results and a warning."""
    try:
        pages = catalog.search_pages(query_terms(request.query), request.knowledge_base_ids, request.limit)
        response.results = [page_row(page) for page in pages]
    except Exception as error:
        response.warnings.append(f"page fallback failed ({type(error).__name__}: {short(error)})")
    return response
