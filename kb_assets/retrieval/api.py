"""The retrieval service (FastAPI): search, pages, lineage, assets, health. OpenAPI at /docs."""

from __future__ import annotations

from functools import lru_cache

from fastapi import Depends, FastAPI, Header, HTTPException
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field

from kb_assets.defs.resources import build_resources
from kb_assets.embedding.model import EmbeddingModel
from kb_assets.lineage import ChunkNotFound, chunk_lineage
from kb_assets.retrieval.search import SearchRequest, Searcher, Weights
from kb_assets.settings import Settings


@lru_cache(maxsize=4)
def _model(model_id: str) -> EmbeddingModel:
    return EmbeddingModel(model_id)


def make_searcher(settings: Settings) -> Searcher:
    resources = build_resources(settings)
    return Searcher(
        client=resources["milvus"].client(),
        catalog=resources["catalog"].catalog(),
        alias=settings.alias,
        weights=Weights(settings.dense_weight, settings.lexical_weight, settings.exact_boost),
        load_model=_model,
    )


def parse_api_keys(spec: str) -> dict[str, set[str] | None]:
    """``key1=kbA,kbB;key2=*`` -> {key1: {kbA, kbB}, key2: None (every knowledge base)}."""
    keys: dict[str, set[str] | None] = {}
    for item in filter(None, (part.strip() for part in spec.split(";"))):
        key, _, scope = item.partition("=")
        kbs = {kb.strip() for kb in scope.split(",") if kb.strip()}
        keys[key.strip()] = None if "*" in kbs or not kbs else kbs
    return keys


class SearchBody(BaseModel):
    query: str = Field(min_length=1, max_length=2000)
    knowledgeBaseIds: list[str] | None = None
    limit: int = Field(10, ge=1, le=100)
    minScore: float | None = None
    strategy: str = "hybrid"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()
    api_keys = parse_api_keys(settings.api_keys)
    searcher = make_searcher(settings)
    resources = build_resources(settings)
    app = FastAPI(title="kb-assets retrieval", version="0.1.0")

    def allowed_kbs(authorization: str | None = Header(default=None)) -> set[str] | None:
        """The knowledge bases the caller may read (None: all); 401 without a valid key when keys are set."""
        if not api_keys:
            return None
        token = (authorization or "").removeprefix("Bearer ").strip()
        if token not in api_keys:
            raise HTTPException(401, "missing or unknown API key (send Authorization: Bearer KEY)")
        return api_keys[token]

    @app.get("/healthz")
    def healthz():
        return {"status": "ok", "alias": settings.alias}

    @app.post("/v1/kb/search")
    def search(body: SearchBody, scope: set[str] | None = Depends(allowed_kbs)):
        requested = body.knowledgeBaseIds
        if scope is not None:
            if requested and not set(requested) <= scope:
                raise HTTPException(403, f"this key may not read {sorted(set(requested) - scope)}")
            requested = requested or sorted(scope)
        request = SearchRequest(query=body.query, knowledge_base_ids=requested, limit=body.limit,
                                min_score=body.minScore, strategy=body.strategy)
        try:
            return searcher.search(request).as_json()
        except ValueError as error:
            raise HTTPException(422, str(error)) from None

    @app.get("/v1/documents/{document_id}/pages/{page_index}")
    def page(document_id: str, page_index: int, scope: set[str] | None = Depends(allowed_kbs)):
        catalog = resources["catalog"].catalog()
        doc = catalog.get_document(document_id)
        if doc is None or (scope is not None and doc.knowledge_base_id not in scope):
            raise HTTPException(404, f"no document {document_id}")
        for record in catalog.read_pages(document_id):
            if record["page_index"] == page_index:
                return {"documentId": document_id, "pageIndex": page_index, "pageLabel": record["page_label"],
                        "text": record["text"], "summary": record["summary"], "keywords": record["keywords"],
                        "parser": record["parser"], "mode": record["mode"], "version": record["version"]}
        raise HTTPException(404, f"document {document_id} has no page {page_index}")

    @app.get("/v1/chunks/{chunk_id}/lineage")
    def lineage(chunk_id: str, scope: set[str] | None = Depends(allowed_kbs)):
        try:
            record = chunk_lineage(chunk_id, resources["catalog"].catalog(), resources["lake"].lake(),
                                   resources["milvus"].client(), settings.alias)
        except ChunkNotFound as error:
            raise HTTPException(404, str(error)) from None
        if scope is not None and record["document"]["knowledgeBaseId"] not in scope:
            raise HTTPException(404, f"chunk {chunk_id} is in no document you may read")
        return record

    @app.get("/v1/assets/{key:path}")
    def asset(key: str, _: set[str] | None = Depends(allowed_kbs)):
        store = resources["object_store"].store()
        if ".." in key.split("/") or not key.startswith(("pages/", "figures/")) or not store.exists(key):
            raise HTTPException(404, f"no asset {key}")
        return FileResponse(str(store.path(key)))

    return app
