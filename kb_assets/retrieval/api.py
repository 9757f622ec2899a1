"""The retrieval service (FastAPI): search, pages, lineage, assets, health. OpenAPI at /docs.

Auth: ``KB_API_KEYS="key1=kbA,kbB;key2=*"``, sent as ``Authorization: Bearer KEY``; a key reads only
its knowledge bases. Without keys the service answers loopback clients only (and ``kb-assets serve``
binds 127.0.0.1).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
from contextlib import asynccontextmanager
from typing import Annotated, Literal

from fastapi import Depends, FastAPI, Header, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from pydantic import BaseModel, Field, StringConstraints

from kb_assets.lineage import ChunkNotFound, chunk_lineage
from kb_assets.page_images import ensure_page_image
from kb_assets.retrieval.config import SearchConfig
from kb_assets.retrieval.rows import ASSETS_PATH, asset_url
from kb_assets.retrieval.search import Searcher, SearchRequest
from kb_assets.retrieval.strategies import STRATEGIES
from kb_assets.settings import Settings
from kb_assets.stores import Stores
from kb_assets.stores.catalog import Catalog


def make_searcher(settings: Settings, config: SearchConfig | None = None) -> Searcher:
    """A Searcher on the published alias, with the service's Postgres statement timeout."""
    config = config or settings.search
    if config.strategy not in STRATEGIES:
        raise ValueError(f"KB_SEARCH_STRATEGY={config.strategy!r}: not one of {', '.join(STRATEGIES)}")
    stores = Stores(settings)
    return Searcher(
        client=stores.milvus,
        catalog=Catalog(stores.catalog.dsn, statement_timeout_ms=config.postgres_timeout_ms),
        alias=settings.alias,
        load_model=stores.model,
        config=config,
        owns_catalog=True,
    )


def one_thread_per_query(settings: Settings) -> Settings:
    """The settings of a process that serves queries (not ingest): each query encodes with one
    intra-op thread. Queries are one sentence: parallelism comes from concurrent requests. Measured
    on a busy 2-core machine (torch): 25 ms a query with one thread, ~490 ms with two."""
    return dataclasses.replace(settings, encoder_threads=1)


def parse_api_keys(spec: str) -> dict[str, set[str] | None]:
    """``key1=kbA,kbB;key2=*`` -> {key1: {kbA, kbB}, key2: None (every knowledge base)}."""
    keys: dict[str, set[str] | None] = {}
    for item in filter(None, (part.strip() for part in spec.split(";"))):
        key, _, scope = item.partition("=")
        kbs = {kb.strip() for kb in scope.split(",") if kb.strip()}
        if not key.strip() or not kbs:
            raise ValueError(f"KB_API_KEYS: {item!r} is not KEY=kbA,kbB or KEY=*")
        keys[key.strip()] = None if "*" in kbs else kbs
    return keys


# the strategy names of the registry: validated, and listed in OpenAPI
StrategyName = Literal[STRATEGIES]  # type: ignore[valid-type]
KnowledgeBaseId = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$")]


class SearchBody(BaseModel):
    query: str = Field(min_length=1, max_length=2000)
    knowledgeBaseIds: list[KnowledgeBaseId] | None = Field(
        None, max_length=100, description="Knowledge bases to search; none: every one the caller may read.")
    limit: int = Field(10, ge=1, le=100)
    minScore: float | None = Field(None, description="Drop hybrid results below this score (then no page fallback).")
    strategy: StrategyName | None = Field(None, description="None: the configured default.")


class Scores(BaseModel):
    dense: float | None
    lexical: float | None
    exactBoost: float | None


class SearchResult(BaseModel):
    chunkId: str | None
    documentId: str
    knowledgeBaseId: str
    documentTitle: str | None
    sourceUri: str | None
    pageIndex: int
    pageEnd: int
    pageLabel: str | None = None
    chunkIndex: int | None
    sectionTitle: str | None
    content: str
    score: float | None = Field(description="null for fallback rows")
    scores: Scores
    retrievalSource: Literal["hybrid", "fallback_pages"]
    pageImageUrl: str | None = None
    figureImageUrl: str | None = None
    pageSummary: str | None = None


class SearchAnswer(BaseModel):
    results: list[SearchResult]
    warnings: list[str]


def is_loopback(host: str | None) -> bool:
    """127.0.0.0/8, ::1 or ``localhost``: this machine only."""
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return host == "localhost"


def create_app(settings: Settings, searcher: Searcher | None = None) -> FastAPI:
    api_keys = parse_api_keys(settings.api_keys)
    own_searcher = searcher is None
    searcher = searcher or make_searcher(settings)
    stores = Stores(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        for problem in searcher.warm_up():
            logging.getLogger("kb_assets.retrieval").warning("search is not ready yet: %s", problem)
        yield
        if own_searcher:
            searcher.close()

    app = FastAPI(title="kb-assets retrieval", version="0.1.0", lifespan=lifespan)

    if not api_keys:
        @app.middleware("http")
        async def loopback_only(request: Request, call_next):
            """Without KB_API_KEYS nobody is authenticated: answer this machine only."""
            if not is_loopback(request.client.host if request.client else None):
                return JSONResponse({"detail": "no API keys are configured: this service answers 127.0.0.1 only"},
                                    status_code=403)
            return await call_next(request)

    def allowed_kbs(authorization: str | None = Header(default=None)) -> set[str] | None:
        """The knowledge bases the caller may read (None: all); 401 without a valid key when keys are set."""
        if not api_keys:
            return None
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or token.strip() not in api_keys:
            raise HTTPException(401, "missing or unknown API key (send Authorization: Bearer KEY)",
                                headers={"WWW-Authenticate": "Bearer"})
        return api_keys[token.strip()]

    @app.get("/healthz")
    def healthz():
        return {"status": "ok", "alias": settings.alias}

    @app.post("/v1/kb/search", response_model=SearchAnswer)
    def search(body: SearchBody, scope: set[str] | None = Depends(allowed_kbs)):
        """Hybrid (or pageindex) chunk search with page fallback; see DESIGN.md sections 6 and 9."""
        requested = list(dict.fromkeys(body.knowledgeBaseIds)) if body.knowledgeBaseIds else None
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
        catalog = stores.catalog
        doc = catalog.get_document(document_id)
        if doc is None or (scope is not None and doc.knowledge_base_id not in scope):
            raise HTTPException(404, f"no document {document_id}")
        for record in catalog.read_pages(document_id):
            if record["page_index"] == page_index:
                return {"documentId": document_id, "pageIndex": page_index, "pageLabel": record["page_label"],
                        "text": record["text"], "summary": record["summary"], "keywords": record["keywords"],
                        "parser": record["parser"], "mode": record["mode"], "version": record["version"],
                        "pageImageUrl": asset_url(record["image_key"])}
        raise HTTPException(404, f"document {document_id} has no page {page_index}")

    @app.get("/v1/chunks/{chunk_id}/lineage")
    def lineage(chunk_id: str, scope: set[str] | None = Depends(allowed_kbs)):
        try:
            return chunk_lineage(chunk_id, stores.catalog, stores.lake,
                                 stores.milvus, settings.alias, scope)
        except ChunkNotFound as error:
            raise HTTPException(404, str(error)) from None

    @app.get(ASSETS_PATH + "/{key:path}")
    def asset(key: str, scope: set[str] | None = Depends(allowed_kbs)):
        """A page or figure image; its key names its document (``pages/<documentId>/...``), whose
        knowledge base the caller must be allowed to read."""
        store = stores.objects
        parts = key.split("/")
        if ".." in parts or len(parts) < 3 or parts[0] not in ("pages", "figures"):
            raise HTTPException(404, f"no asset {key}")
        if scope is not None:
            doc = stores.catalog.get_document(parts[1])
            if doc is None or doc.knowledge_base_id not in scope:
                raise HTTPException(404, f"no asset {key}")
        if not ensure_page_image(key, stores.catalog, store):   # a page image is rendered on first request
            raise HTTPException(404, f"no asset {key}")
        path = store.path(key)
        if path.protocol in ("", "file", "local"):
            return FileResponse(path.path)
        return RedirectResponse(path.fs.sign(path.path, expiration=300), status_code=307)  # S3: presigned

    return app
