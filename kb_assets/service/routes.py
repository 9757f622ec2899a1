"""The web page at ``/`` and the endpoints only it needed so far: knowledge bases with document counts,
a knowledge base's documents, a document's chunks by page (the document view), a document's original
file (on a signed URL or with a key), and what the service offers (strategies, the Dagster UI's address).

The page is three static files under ``static/`` (HTML, CSS, JavaScript; no build step, nothing from a
CDN), shipped in the wheel as package data. It asks for an API key, keeps it in the tab's session
storage and sends it as ``Authorization: Bearer``; images come on signed URLs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, Header, HTTPException, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse

from kb_assets.lib.names import KNOWLEDGE_BASE_ID_PATTERN
from kb_assets.retrieval import search_version
from kb_assets.retrieval.strategies import STRATEGIES
from kb_assets.service.auth import Caller
from kb_assets.service.schemas import DocumentChunks, Documents, KnowledgeBases, ServiceInfo
from kb_assets.service.signing import file_subject

STATIC = Path(__file__).resolve().parent / "static"
STATIC_FILES = {"app.js": "text/javascript", "app.css": "text/css", "favicon.svg": "image/svg+xml"}


def web_router(service, caller: Callable[..., Caller], signed_or_bearer: Callable[..., Caller]) -> APIRouter:
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    def index():
        return FileResponse(
            STATIC / "index.html", media_type="text/html; charset=utf-8", headers={"Cache-Control": "no-cache"}
        )

    @router.get("/static/{name}", include_in_schema=False)
    def static(name: str):
        if name not in STATIC_FILES:
            raise HTTPException(404, f"no file {name}")
        return FileResponse(STATIC / name, media_type=STATIC_FILES[name], headers={"Cache-Control": "no-cache"})

    @router.get("/v1/knowledge-bases", response_model=KnowledgeBases)
    def knowledge_bases(who: Caller = Depends(caller)):
        """The knowledge bases this key may read, with their documents by status."""
        return service.knowledge_bases(who)

    @router.get("/v1/knowledge-bases/{knowledge_base_id}/documents", response_model=Documents)
    def documents(
        knowledge_base_id: Annotated[str, PathParam(pattern=KNOWLEDGE_BASE_ID_PATTERN)], who: Caller = Depends(caller)
    ):
        """A knowledge base's documents: status, pages, chunks, last run and the reason when failed (422
        for a name that breaks ``kb_assets/lib/names.py``'s pattern)."""
        return service.documents(knowledge_base_id, who)

    @router.get("/v1/documents/{document_id}/chunks", response_model=DocumentChunks)
    def document_chunks(document_id: str, who: Caller = Depends(caller)):
        """A document (as in its knowledge base's list, with a signed ``fileUrl`` of its original) and its
        chunks in page order: page, section, text."""
        return service.document_chunks(document_id, who)

    @router.get("/v1/documents/{document_id}/file")
    def original_file(
        request: Request,
        document_id: str,
        k: str | None = None,
        e: str | None = None,
        s: str | None = None,
        authorization: str | None = Header(default=None),
    ):
        """The document's original file (of its published version), inline, its type by its extension: on a
        signed URL (``fileUrl`` of lineage and document answers) or with ``Authorization: Bearer``."""
        who = signed_or_bearer(request, file_subject(document_id), k, e, s, authorization)
        return service.original_file(document_id, who)

    @router.get("/v1/service", response_model=ServiceInfo)
    def info(who: Caller = Depends(caller)):
        """Search strategies (the registry's), the default, the Dagster UI runs link to, and the search's version
        (the ranking code's and its page scorer's)."""
        settings = service.settings
        return {
            "strategies": list(STRATEGIES),
            "defaultStrategy": settings.search.strategy,
            "dagsterUrl": settings.dagster_url or None,
            "signedUrlSeconds": settings.url_ttl_seconds,
            "searchVersion": search_version(),
        }

    return router
