"""What the service does for one caller, whatever the route (REST, the web page, MCP): search, a page,
a chunk's lineage, knowledge bases and their documents, a document's chunks, the stored images and
original files. Scope is checked before any store is read; image and file URLs in every answer are
signed for the caller (``kb_assets/service/signing.py``).

An original file is served inline under its own name and the type of its extension, in a sandbox
(``Content-Security-Policy: sandbox``, ``nosniff``): an HTML or SVG document runs no script on the
service's origin, where the web page keeps its key."""

from __future__ import annotations

import logging
import mimetypes
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from fastapi import HTTPException
from fastapi.responses import FileResponse, RedirectResponse, StreamingResponse

from kb_assets.lib.json_types import JsonObject
from kb_assets.lib.logs import Outages
from kb_assets.pipeline.lineage import ChunkNotFound, chunk_lineage, chunk_records
from kb_assets.pipeline.page_images import ensure_page_image, original_of
from kb_assets.retrieval.rows import asset_url
from kb_assets.retrieval.scope import unknown_knowledge_bases
from kb_assets.retrieval.search import Searcher, SearchRequest
from kb_assets.service.auth import ApiKeys, Caller
from kb_assets.service.errors import Problem, check_id
from kb_assets.service.healing import milvus_watchdog, postgres_watchdog
from kb_assets.service.signing import UrlSigner
from kb_assets.settings import Settings
from kb_assets.stores import Stores
from kb_assets.stores.catalog import Document
from kb_assets.stores.catalog.connection import libpq_url
from kb_assets.stores.catalog.reads import MAX_PAGE_CHARS

log = logging.getLogger("kb_assets.retrieval")
KNOWN_TTL_S = 10.0  # how long the knowledge bases' names are reused (an unknown name reads them again)
IMAGE_FOLDERS = ("pages", "figures")
SANDBOX = {"Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff"}


class Service:
    def __init__(self, settings: Settings, searcher: Searcher, heal: bool = False):
        self.settings = settings
        self.searcher = searcher
        self.stores = Stores(settings)
        self.keys = ApiKeys(settings.api_keys)
        self._known: tuple[float, set[str]] | None = None  # (when, knowledge bases holding documents)
        self.outages = Outages(log)  # the service's log: one line when a store goes away, one when it is back
        self.signer = UrlSigner(settings.url_signing_secret, settings.url_ttl_seconds)
        # the embedded Milvus engine and Postgres are restarted when they stop (an external URI is not ours)
        self.watchdog = milvus_watchdog(settings.home, self.use_milvus) if heal and not settings.milvus_uri else None
        self.postgres_watchdog = (
            postgres_watchdog(settings.home, settings.postgres_binaries, self.use_postgres)
            if heal and not settings.postgres_url
            else None
        )

    # lifecycle -----------------------------------------------------------------------------------
    def start(self) -> None:
        for problem in self.searcher.warm_up():
            log.warning("search is not ready yet: %s", problem)
        for watchdog in (self.watchdog, self.postgres_watchdog):
            if watchdog is not None:
                watchdog.start()

    def stop(self) -> None:
        for watchdog in (self.watchdog, self.postgres_watchdog):
            if watchdog is not None:
                watchdog.stop()

    def use_milvus(self, uri: str) -> None:
        """After the Milvus server came back: a client of its URI (the same one when the port did not change)."""
        self.searcher.client = self.stores.milvus_at(uri)  # one client per URI and process
        self.searcher.forget_published()

    def use_postgres(self, dsn: str) -> None:
        """After Postgres came back: its pooled connections reconnect by themselves on the same port; on
        another one (the old port was taken meanwhile) the service's catalogs move to it."""
        if libpq_url(dsn) == self.searcher.catalog.dsn:
            return
        old = self.searcher.catalog
        self.searcher.catalog = self.stores.catalog_at(dsn, old.statement_timeout_ms)
        if self.searcher.owns_catalog:
            old.close_pool()

    # search ---------------------------------------------------------------------------------------
    def search(
        self,
        caller: Caller,
        query: str,
        knowledge_base_ids: list[str] | None = None,
        limit: int = 10,
        min_score: float | None = None,
        strategy: str | None = None,
        filters: dict[str, str | None] | None = None,
    ) -> JsonObject:
        """The one search of ``POST /v1/kb/search`` and the MCP tool ``kb_search``: 404 naming the knowledge
        bases the caller may read for a name that is not one of them (a name outside the caller's scope
        looks the same as one that does not exist), 422 for a request the searcher refuses."""
        self.check_knowledge_bases(caller, knowledge_base_ids or [])
        kbs = knowledge_base_ids and list(dict.fromkeys(knowledge_base_ids))
        kbs = kbs or (None if caller.scope is None else sorted(caller.scope))
        request = SearchRequest(
            query=query, knowledge_base_ids=kbs, limit=limit, min_score=min_score, strategy=strategy, filters=filters
        )
        try:
            answer = self.searcher.search(request).as_json()
        except ValueError as error:
            raise HTTPException(422, str(error)) from None
        failed = next((w for w in answer["warnings"] if w.startswith("chunk search failed")), None)
        if failed is None:
            self.outages.answered("Milvus")
        else:
            self.outages.failed(
                "Milvus", failed.removeprefix("chunk search failed ").removesuffix("; answered from pages (fallback)")
            )
            if self.watchdog is not None:
                self.watchdog.poke()
        self.outages.answered("Postgres")  # the search read the catalog (else it would have raised)
        self.signer.sign_rows(answer["results"], caller)
        for row in answer["results"]:  # the card's link to the original (the lineage panel has it too)
            row["fileUrl"] = self.signer.sign_file(row["documentId"], caller)
        return answer

    def check_knowledge_bases(self, caller: Caller, names: list[str]) -> None:
        """404 for a name the caller may not read or that holds no document, naming those it may read (the
        command line's words). The names are read again when one is not known (a new knowledge base); while
        Postgres does not answer, the search goes on unchecked (it answers from what it can)."""
        wanted = set(names)
        if not wanted:
            return
        readable = self._readable(caller, fresh=False)
        if readable is not None and not wanted <= readable:
            readable = self._readable(caller, fresh=True)  # made since it was read, or really unknown
        if readable is None or wanted <= readable:
            return
        unknown = unknown_knowledge_bases(sorted(wanted - readable), sorted(readable))
        raise Problem(404, unknown, "unknown_knowledge_base")

    def _readable(self, caller: Caller, fresh: bool) -> set[str] | None:
        """The knowledge bases (of documents, deleted ones too) that the caller may read (cached
        KNOWN_TTL_S), None when Postgres does not answer."""
        now = time.monotonic()
        if fresh or self._known is None or now - self._known[0] > KNOWN_TTL_S:
            try:
                rows = self.searcher.catalog.knowledge_base_counts()
            except Exception as error:  # the search itself reports the outage
                log.debug("knowledge bases not read: %s", error)
                return None
            self._known = (now, {row.knowledge_base_id for row in rows})
        return {name for name in self._known[1] if caller.may_read(name)}

    # documents, pages, lineage ------------------------------------------------------------------------
    def readable_document(self, document_id: str, caller: Caller):
        """The document, when the caller may read it; else 404 (the same answer as for no document)."""
        check_id(document_id, "document")
        doc = self.stores.catalog.get_document(document_id)
        if doc is None or not caller.may_read(doc.knowledge_base_id):
            raise HTTPException(404, f"no document {document_id}")
        return doc

    def page(self, document_id: str, page_index: int, caller: Caller) -> JsonObject:
        """A page of the document's published version only (404 naming why otherwise: nothing published,
        or the catalog holds another version's pages); text past ``MAX_PAGE_CHARS`` is cut (``truncated``)."""
        doc = self.readable_document(document_id, caller)
        why = f"{doc.status}: {doc.error}" if doc.error else doc.status
        if doc.published_version is None:
            raise HTTPException(404, f"document {document_id} has no published version ({why})")
        record = (
            self.stores.catalog.read_page(document_id, page_index, MAX_PAGE_CHARS) if 0 <= page_index < 2**31 else None
        )
        if record is None:
            raise HTTPException(404, f"document {document_id} has no page {page_index}")
        if record["version"] != doc.published_version:
            raise HTTPException(
                404,
                f"document {document_id}: its stored pages are of version "
                f"{record['version'][:12]}, which is not published ({why}); the pages of its "
                f"published version {doc.published_version[:12]} are no longer kept",
            )
        return {
            "documentId": document_id,
            "pageIndex": page_index,
            "pageLabel": record["page_label"],
            "pageCount": doc.page_count,
            "text": record["text"],
            "truncated": record["text_chars"] > MAX_PAGE_CHARS,
            "textChars": record["text_chars"],
            "summary": record["summary"],
            "keywords": record["keywords"],
            "parser": record["parser"],
            "mode": record["mode"],
            "version": record["version"],
            "width": record["width"],
            "height": record["height"],
            "pageImageUrl": self.signer.sign_url(asset_url(record["image_key"]), caller),
        }

    def lineage(self, chunk_id: str, caller: Caller) -> JsonObject:
        check_id(chunk_id, "chunk")
        try:
            found = chunk_lineage(
                chunk_id,
                self.stores.catalog,
                self.stores.lake,
                self.searcher.client,
                self.settings.alias,
                None if caller.scope is None else set(caller.scope),
            )
        except ChunkNotFound as error:
            raise HTTPException(404, str(error)) from None
        self.signer.sign_rows(found["pages"], caller)
        found["document"]["fileUrl"] = self.signer.sign_file(found["document"]["documentId"], caller)
        for run in found["runs"]:
            run["url"] = self.run_url(run["runId"])
        return found

    def knowledge_bases(self, caller: Caller) -> JsonObject:
        counts = self.stores.catalog.knowledge_base_counts(None if caller.scope is None else sorted(caller.scope))
        return {
            "knowledgeBases": [
                {
                    "knowledgeBaseId": c.knowledge_base_id,
                    "documents": c.documents,
                    "published": c.published,
                    "failed": c.failed,
                    "pending": c.pending,
                }
                for c in counts
            ]
        }

    def documents(self, knowledge_base_id: str, caller: Caller) -> JsonObject:
        check_id(knowledge_base_id, "knowledge base")
        if not caller.may_read(knowledge_base_id):
            raise Problem(404, f"no knowledge base {knowledge_base_id}", "unknown_knowledge_base")
        docs = self.stores.catalog.list_documents([knowledge_base_id])
        return {"documents": [self.document_row(d) for d in docs]}

    def document_row(self, d: Document) -> JsonObject:
        return {
            "documentId": d.document_id,
            "knowledgeBaseId": d.knowledge_base_id,
            "sourcePath": d.source_path,
            "sourceUri": d.source_uri,
            "title": d.title,
            "version": d.version,
            "sizeBytes": d.size_bytes,
            "mime": d.mime,
            "sourceKind": d.source_kind,
            "status": d.status,
            "error": d.error,
            "pages": d.page_count,
            "chunks": d.chunk_count,
            "lastRunId": d.last_run_id,
            "lastRunUrl": self.run_url(d.last_run_id),
            "updatedAt": d.updated_at.isoformat() if d.updated_at is not None else None,
            "metadata": d.metadata,
        }

    def document_chunks(self, document_id: str, caller: Caller) -> JsonObject:
        """The document, a signed URL of its original, and its chunks in page order (the lake's rows: those
        of one file version, ``published`` when it is the version search serves)."""
        doc = self.readable_document(document_id, caller)
        chunks = self.stores.lake.read("chunks", document_id)
        version = chunks["document_version"][0] if chunks.height else None
        return {
            "document": self.document_row(doc),
            "fileUrl": self.signer.sign_file(document_id, caller),
            "version": version,
            "published": version is not None and version == doc.published_version,
            "chunks": chunk_records(chunks),
        }

    def run_url(self, run_id: str | None) -> str | None:
        """The run's page in the Dagster UI, when KB_DAGSTER_URL is set."""
        return f"{self.settings.dagster_url}/runs/{run_id}" if run_id and self.settings.dagster_url else None

    # images ----------------------------------------------------------------------------------------
    def asset(self, key: str, caller: Caller):
        """A page or figure image; its key names its document (``pages/<documentId>/...``), whose
        knowledge base the caller must be allowed to read. Anything else is 404."""
        check_id(key, "asset")
        parts = key.split("/")
        if len(parts) < 3 or parts[0] not in IMAGE_FOLDERS or any(p in ("", ".", "..") for p in parts):
            raise HTTPException(404, f"no asset {key}")
        doc = self.stores.catalog.get_document(parts[1])
        if doc is None or not caller.may_read(doc.knowledge_base_id):
            raise HTTPException(404, f"no asset {key}")
        ensure_page_image(key, self.stores.catalog, self.stores.objects)  # a page image is rendered on first request
        return self.stored_file(key, "image/png", f"no asset {key}")

    def original_file(self, document_id: str, caller: Caller):
        """The original file of the document's published version (else of its current one)."""
        doc = self.readable_document(document_id, caller)
        version = doc.published_version or doc.version
        key = original_of(doc, version) if version else None
        missing = f"the original file of document {document_id} is not stored ({doc.status})"
        if key is None:
            raise HTTPException(404, missing)
        name = PurePosixPath(doc.source_path).name
        return self.stored_file(key, media_type_of(name), missing, name)

    def stored_file(self, key: str, media_type: str, missing: str, name: str | None = None):
        """A file of the object store. An image: sent from a local folder, else a 307 to a presigned S3 URL
        (300 s). An original (``name``): sent by the service, inline under its name and sandboxed, from a
        folder or streamed from S3 (a presigned URL cannot carry the type and name to every S3 server:
        SeaweedFS refuses such a URL's signature)."""
        path = self.stores.objects.path(key)
        headers = {**SANDBOX, "Content-Disposition": content_disposition(name)} if name else None
        if path.protocol in ("", "file", "local"):
            if not Path(path.path).is_file():  # a folder (pages/<doc>/) is no file
                raise HTTPException(404, missing)
            return FileResponse(path.path, media_type=media_type, headers=headers)
        if not path.is_file():
            raise HTTPException(404, missing)
        if headers is None:
            return RedirectResponse(path.fs.sign(path.path, expiration=300), status_code=307)  # S3: presigned
        return StreamingResponse(blocks(path), media_type=media_type, headers=headers)


def blocks(path, size: int = 1 << 20) -> Iterator[bytes]:
    """A stored file in blocks of ``size`` bytes."""
    with path.open("rb") as stream:
        while block := stream.read(size):
            yield block


def media_type_of(name: str) -> str:
    """The type of a file by its extension (text as UTF-8)."""
    media = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return f"{media}; charset=utf-8" if media.startswith("text/") else media


def content_disposition(name: str) -> str:
    """``inline`` with the file's name (RFC 6266; a non-ASCII name as ``filename*``)."""
    ascii_name = name.encode("ascii", "replace").decode().replace('"', "_").replace("\\", "_")
    return f"inline; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name)}"
