"""``hybrid``: every chunk of the requested knowledge bases is a candidate (the dense and BM25 searches
of each knowledge base, merged), ranked by its hybrid score; then min score and one global top-k."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb_assets.lib.json_types import JsonObject
from kb_assets.retrieval.request import SearchRequest, SearchResponse
from kb_assets.retrieval.scoring import rank_key

if TYPE_CHECKING:
    from kb_assets.retrieval.search import Searcher


def rank(searcher: Searcher, request: SearchRequest, response: SearchResponse) -> list[JsonObject]:
    rows = searcher.candidates(request, response)
    rows = [r for r in rows if request.min_score is None or r["score"] >= request.min_score]
    rows.sort(key=rank_key)
    return rows[: request.limit]
