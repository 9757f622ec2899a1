"""The retrieval service (FastAPI): search, pages, lineage, images, knowledge bases and their documents,
the web page at ``/`` (``routes.py``, ``static/``) and the MCP tools at ``/mcp``. OpenAPI at /docs.

Auth: ``KB_API_KEYS="key1=kbA,kbB;key2=*"``, sent as ``Authorization: Bearer KEY``; a key reads only
its knowledge bases; a request without a valid key is 401 with ``WWW-Authenticate: Bearer
resource_metadata="<base>/.well-known/oauth-protected-resource"`` (RFC 9728, as ``/mcp``). Images and
original files are also served on short-lived signed URLs (``signing.py``), which is what
``pageImageUrl``/``figureImageUrl``/``fileUrl`` hold. Without keys the service answers loopback clients only
(and ``kb-assets serve`` binds 127.0.0.1). Every route but ``/healthz`` and ``/readyz`` answers only
requests to an allowed ``Host`` (``auth.HostPolicy``: loopback names, ``KB_PUBLIC_URL``,
``KB_ALLOWED_HOSTS``), else 421. A store that is down answers 503 with the reason, a malformed request
4xx, a body that does not arrive within ``KB_BODY_TIMEOUT_S`` 408, each an RFC 9457 problem (``errors.py``);
the embedded Milvus engine and Postgres are restarted when they stop (``healing.py``).
"""

from __future__ import annotations

import dataclasses
import logging
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import Depends, FastAPI, Header, HTTPException, Request

from kb_assets.lib.logs import Outages
from kb_assets.retrieval.rows import ASSETS_PATH
from kb_assets.retrieval.search import Searcher
from kb_assets.retrieval.strategies import STRATEGIES
from kb_assets.service.auth import Caller, HostCheck, HostPolicy, is_loopback
from kb_assets.service.errors import (
    PROBLEM_RESPONSES,
    RETRY_AFTER_S,
    BodyTimeout,
    check_knowledge_base_ids,
    install_error_handlers,
    problem,
)
from kb_assets.service.handlers import Service
from kb_assets.service.schemas import SearchAnswer, SearchBody
from kb_assets.settings import SearchConfig, Settings
from kb_assets.stores import Stores
from kb_assets.stores.catalog import Catalog
from kb_assets.stores.entities import count_entities
from kb_assets.stores.vectors import engine, published_collection, size_note

log = logging.getLogger("kb_assets.retrieval")


def make_searcher(settings: Settings, config: SearchConfig | None = None) -> Searcher:
    """A Searcher on the published alias, with the service's Postgres statement timeout."""
    config = config or settings.search
    if config.strategy not in STRATEGIES:
        raise ValueError(f"KB_SEARCH_STRATEGY={config.strategy!r}: not one of {', '.join(STRATEGIES)}")
    stores = Stores(settings)
    return Searcher(
        client=stores.milvus,
        catalog=stores.catalog_with_timeout(config.postgres_timeout_ms),
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


def create_app(settings: Settings, searcher: Searcher | None = None, heal: bool | None = None) -> FastAPI:
    """The service. ``heal``: restart the embedded Milvus engine and Postgres when they stop (default: when
    the app builds its own searcher, as ``kb-assets serve`` does)."""
    from kb_assets.service.mcp import METADATA_PATH, base_url, mcp_app
    from kb_assets.service.routes import web_router

    hosts = HostPolicy.from_settings(settings)  # a bad KB_ALLOWED_HOSTS / KB_PUBLIC_URL fails here
    own_searcher = searcher is None
    service = Service(settings, searcher or make_searcher(settings), heal=own_searcher if heal is None else heal)
    mcp = mcp_app(service)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        service.start()
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(mcp.lifespan())  # the MCP session manager
            yield
        service.stop()
        if own_searcher:
            service.searcher.close()

    app = FastAPI(title="kb-assets retrieval", version="0.1.0", lifespan=lifespan, responses=PROBLEM_RESPONSES)
    app.state.service = service
    install_error_handlers(app, service.outages)
    app.add_middleware(BodyTimeout, timeout_s=settings.body_timeout_s)

    if not service.keys.enabled:

        @app.middleware("http")
        async def loopback_only(request: Request, call_next):
            """Without KB_API_KEYS nobody is authenticated: answer this machine only."""
            if not is_loopback(request.client.host if request.client else None):
                return problem(403, "no API keys are configured: this service answers 127.0.0.1 only")
            return await call_next(request)

    app.add_middleware(HostCheck, policy=hosts, keyed=service.keys.enabled)  # outermost: before any body is read

    def caller(request: Request, authorization: str | None = Header(default=None)) -> Caller:
        """The caller of a Bearer key (its knowledge bases); 401 without a valid key when keys are set,
        naming the RFC 9728 protected-resource metadata as ``/mcp`` does."""
        found = service.keys.from_header(authorization)
        if found is None:
            challenge = f'resource_metadata="{base_url(service, request)}{METADATA_PATH}"'
            if authorization:
                challenge = f'error="invalid_token", {challenge}'
            raise HTTPException(
                401,
                "missing or unknown API key (send Authorization: Bearer KEY)",
                headers={"WWW-Authenticate": f"Bearer {challenge}"},
            )
        return found

    def signed_or_bearer(
        request: Request, subject: str, k: str | None, e: str | None, s: str | None, authorization: str | None
    ) -> Caller:
        """The caller of a signed URL of ``subject`` (``k``, ``e``, ``s``; 403 when it is not valid), else
        of the ``Authorization`` header."""
        if s is None:
            return caller(request, authorization)
        who = service.signer.caller(service.keys, subject, k, e, s)
        if who is None:
            raise HTTPException(403, "this signed URL has expired or is not valid: ask for a new one")
        return who

    @app.get("/healthz")
    def healthz():
        """Liveness: the process answers (any Host, no data)."""
        return {"status": "ok", "alias": settings.alias}

    @app.get("/readyz")
    def readyz():
        """Readiness: 200 when Postgres and Milvus answer, else a 503 problem naming the store that does not
        (any Host; the reason goes to the log, not to the unauthenticated caller)."""
        checks = {
            "Postgres": lambda: _postgres_answers(service.searcher.catalog),
            "Milvus": lambda: _milvus_answers(service.searcher),
        }
        down = [store for store, check in checks.items() if not _answers(store, check, service.outages)]
        if down:
            kind = f"{down[0].lower()}_unavailable" if len(down) == 1 else "service_unavailable"
            return problem(503, f"{' and '.join(down)} unavailable", kind, {"Retry-After": RETRY_AFTER_S})
        note = _size_note(service.searcher)
        return {"status": "ready", **({"note": note} if note else {})}

    @app.post("/v1/kb/search", response_model=SearchAnswer)
    def search(body: SearchBody, who: Caller = Depends(caller)):
        """Hybrid (or pageindex) chunk search with page fallback (the README's API section)."""
        knowledge_base_ids = check_knowledge_base_ids(body.knowledgeBaseIds)
        filters = {"period": body.period, "kind": body.kind, "organisation": body.organisation}
        return service.search(
            who,
            body.query,
            knowledge_base_ids,
            body.limit,
            body.minScore,
            body.strategy,
            filters if any(filters.values()) else None,
        )

    @app.get("/v1/documents/{document_id}/pages/{page_index}")
    def page(document_id: str, page_index: int, who: Caller = Depends(caller)):
        """One page: text, label, parser and mode, size (the units of lineage regions), a signed image URL."""
        return service.page(document_id, page_index, who)

    @app.get("/v1/chunks/{chunk_id}/lineage")
    def lineage(chunk_id: str, who: Caller = Depends(caller)):
        """Chunk -> pages (text, size, signed image URL) -> document version -> file, the runs that wrote
        each asset, the regions of the pages the chunk covers, and whether it verifies."""
        return service.lineage(chunk_id, who)

    @app.get(ASSETS_PATH + "/{key:path}")
    def asset(
        request: Request,
        key: str,
        k: str | None = None,
        e: str | None = None,
        s: str | None = None,
        authorization: str | None = Header(default=None),
    ):
        """A page or figure image: on a signed URL (``k``, ``e``, ``s``: what search, page and lineage
        answers hold), or with ``Authorization: Bearer``."""
        return service.asset(key, signed_or_bearer(request, key, k, e, s, authorization))

    app.include_router(web_router(service, caller, signed_or_bearer))
    app.router.routes.append(mcp.route)
    return app


def _postgres_answers(catalog: Catalog) -> None:
    with catalog.reader() as conn, conn.cursor() as cur:
        cur.execute("SELECT 1")


def _size_note(searcher: Searcher) -> str | None:
    """Where the published collection has grown past its engine's measured range, what to do (else None)."""
    runs_on = engine(searcher.client)
    if runs_on.measured_chunks is None:
        return None
    try:
        collection = published_collection(searcher.client, searcher.catalog, searcher.alias)
        return size_note(runs_on, count_entities(searcher.client, collection)) if collection else None
    except Exception:  # readiness answered already; the note is advice
        return None


def _milvus_answers(searcher: Searcher) -> None:
    searcher.client.list_collections(timeout=searcher.config.milvus_timeout_s)


def _answers(store: str, check, outages: Outages) -> bool:
    """True when ``check()`` returns; else the outage is logged (its first failure)."""
    try:
        check()
    except Exception as error:  # any failure of the store's client means not ready
        outages.failed(store, f"{type(error).__name__}: {' '.join(str(error).split())[:200]}")
        return False
    outages.answered(store)
    return True
