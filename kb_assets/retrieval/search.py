"""Hybrid search over the published alias: dense COSINE + normalized BM25 + exact-match boost.

``final = dense_weight * dense + lexical_weight * lexical + exactBoost``. Dense and BM25 searches run
separately; BM25 scores are divided by the best BM25 score among the candidates; the candidates are
unioned. A candidate found by BM25 only gets its dense score computed from its stored vector; a
candidate found by dense only gets lexical 0 (it was not among the BM25 top candidates). When the
query's language is one the embedding model does not read (Chinese for MiniLM), the dense score is
noise: it is computed on the query's words the model reads, or dropped (weight moved to lexical).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import numpy as np
from pymilvus import MilvusClient

from kb_assets.chunking.text import normalize_ws
from kb_assets.embedding.model import EmbeddingModel
from kb_assets.index.collections import OUTPUT_FIELDS, collection_spec, in_filter, published_collection
from kb_assets.storage.catalog import Catalog
from kb_assets.structure.summaries import tokenize

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


@dataclass
class Weights:
    dense: float = 0.82
    lexical: float = 0.18
    exact_boost: float = 0.05


@dataclass
class SearchRequest:
    query: str
    knowledge_base_ids: list[str] | None = None
    limit: int = 10
    min_score: float | None = None
    strategy: str = "hybrid"


@dataclass
class SearchResponse:
    results: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    timings_ms: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        return {"results": self.results, "warnings": self.warnings}


def dense_query_text(query: str, languages: tuple[str, ...]) -> tuple[str, str | None]:
    """The part of the query the model can read, and a warning when some of it was dropped."""
    if "zh" in languages or not _CJK.search(query):
        return query, None
    latin = " ".join(_LATIN_WORD.findall(query))
    if not latin:
        return "", "dense score not used: the embedding model does not read Chinese; ranked by BM25"
    return latin, f"dense score computed on the query's non-Chinese words only ({latin!r})"


class Searcher:
    """Searches the collection the alias publishes, with the model recorded for that collection."""

    def __init__(self, client: MilvusClient, catalog: Catalog, alias: str, weights: Weights,
                 load_model, candidates: int = 50):
        self.client = client
        self.catalog = catalog
        self.alias = alias
        self.weights = weights
        self.load_model = load_model          # model id -> EmbeddingModel (cached by the caller)
        self.candidates = candidates

    def search(self, request: SearchRequest) -> SearchResponse:
        response = SearchResponse()
        if not request.query.strip():
            raise ValueError("query is empty")
        try:
            response.results = self._hybrid(request, response)
        except Exception as error:  # any chunk-search failure falls back to pages, never a 500
            response.warnings.append(f"chunk search failed ({type(error).__name__}: {error}); page fallback")
            response.results = []
            return self._fallback(request, response)
        if not response.results and request.min_score is None:
            return self._fallback(request, response)
        return response

    # hybrid ----------------------------------------------------------------------------------
    def _hybrid(self, request: SearchRequest, response: SearchResponse) -> list[dict]:
        collection = published_collection(self.client, self.alias)
        if collection is None:
            raise RuntimeError(f"nothing is published under the alias {self.alias!r}")
        spec = collection_spec(self.client, collection)
        model: EmbeddingModel = self.load_model(spec["model"])
        if model.dimension != spec["dimension"]:
            raise RuntimeError(f"model {spec['model']} gives {model.dimension}-d vectors, "
                               f"collection {collection} holds {spec['dimension']}-d")
        flt = in_filter("knowledge_base_id", request.knowledge_base_ids) if request.knowledge_base_ids else ""
        limit = max(self.candidates, request.limit * 5)

        dense_text, warning = dense_query_text(request.query, tuple(spec.get("languages", ["en"])))
        if warning:
            response.warnings.append(warning)
        dense_weight, lexical_weight = self.weights.dense, self.weights.lexical
        if not dense_text:
            dense_weight, lexical_weight = 0.0, self.weights.dense + self.weights.lexical

        started = time.perf_counter()
        hits: dict[str, dict] = {}
        dense_scores: dict[str, float] = {}
        query_vector = None
        if dense_text:
            query_vector = model.encode([dense_text])[0]
            dense_hits = self.client.search(self.alias, data=[query_vector.tolist()], anns_field="dense",
                                            limit=limit, filter=flt, output_fields=OUTPUT_FIELDS,
                                            search_params={"metric_type": "COSINE", "params": {"ef": limit * 2}})
            for hit in dense_hits[0]:
                hits[hit.id] = hit["entity"]
                dense_scores[hit.id] = float(hit.distance)
        response.timings_ms["dense"] = round((time.perf_counter() - started) * 1000, 1)

        started = time.perf_counter()
        bm25: dict[str, float] = {}
        bm25_hits = self.client.search(self.alias, data=[request.query], anns_field="sparse", limit=limit,
                                       filter=flt, output_fields=OUTPUT_FIELDS,
                                       search_params={"metric_type": "BM25"})
        for hit in bm25_hits[0]:
            hits.setdefault(hit.id, hit["entity"])
            bm25[hit.id] = abs(float(hit.distance))   # Milvus Lite returns -score
        response.timings_ms["bm25"] = round((time.perf_counter() - started) * 1000, 1)

        if query_vector is not None:
            missing = [chunk_id for chunk_id in hits if chunk_id not in dense_scores]
            if missing:
                for row in self.client.get(self.alias, ids=missing, output_fields=["chunk_id", "dense"]):
                    dense_scores[row["chunk_id"]] = float(np.dot(np.asarray(row["dense"], dtype=np.float32),
                                                                 query_vector))
        best_bm25 = max(bm25.values(), default=0.0)
        needle = normalize_ws(request.query).casefold()
        results = []
        for chunk_id, entity in hits.items():
            dense = dense_scores.get(chunk_id) if query_vector is not None else None
            lexical = bm25.get(chunk_id, 0.0) / best_bm25 if best_bm25 > 0 else 0.0
            exact = self.weights.exact_boost if needle and needle in normalize_ws(entity["content"]).casefold() else 0.0
            score = dense_weight * (dense or 0.0) + lexical_weight * lexical + exact
            if request.min_score is not None and score < request.min_score:
                continue
            results.append(result_row(entity, score, {"dense": dense, "lexical": lexical, "exactBoost": exact}))
        results.sort(key=lambda r: (-r["score"], r["chunkId"]))
        return results[: request.limit]

    # page fallback ---------------------------------------------------------------------------
    def _fallback(self, request: SearchRequest, response: SearchResponse) -> SearchResponse:
        try:
            terms = list(dict.fromkeys(tokenize(request.query)))[:20]
            pages = self.catalog.search_pages(terms, request.knowledge_base_ids, request.limit)
            response.results = [page_row(page) for page in pages]
        except Exception as error:
            response.warnings.append(f"page fallback failed ({type(error).__name__}: {error})")
        return response


def page_row(page: dict) -> dict:
    """A page-fallback result: page text from Postgres, no hybrid score."""
    row = result_row({**page, "content": page["text"][:2000], "page_end": page["page_index"]}, None,
                     {"dense": None, "lexical": None, "exactBoost": None}, source="fallback_pages")
    row["pageSummary"] = page.get("summary")
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
