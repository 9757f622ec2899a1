"""Chunk lineage: chunk -> page(s) -> document version -> stored file, with the runs that wrote each
asset (only a run that wrote that document's rows or entities: ``entities_run``), and the regions of its
pages the chunk covers (page units; images scale to ``width``/``height``).

A chunk's document is looked up by the chunk id (``locate_document``: indexes only); then only that
document's lake rows are read. Page texts are cut at ``MAX_PAGE_CHARS`` (``truncated``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pymilvus import MilvusClient

from kb_assets.lib.json_types import JsonObject
from kb_assets.lib.text import normalize_ws
from kb_assets.retrieval.rows import asset_url
from kb_assets.stores.catalog import Catalog, Document
from kb_assets.stores.catalog.reads import MAX_PAGE_CHARS
from kb_assets.stores.entities import chunk_document
from kb_assets.stores.vectors import published_collection

if TYPE_CHECKING:
    import polars as pl

    from kb_assets.stores.lake import Lake

# chunk ids are the first 32 hex digits of a sha256 (``chunking.chunker.chunk_id``)
CHUNK_ID = re.compile(r"[0-9a-f]{32}")


class ChunkNotFound(LookupError):
    """No chunk of that id in a document the caller may read (the message names nothing else)."""


def chunk_found_in_pages(chunk: dict, page_texts: dict[int, str]) -> bool:
    """The lineage property: content (less a repeated table header) is in the joined text of its pages."""
    content = chunk["content"]
    header = chunk.get("table_header")
    if header and content.startswith(header):
        content = content[len(header) :]
    joined = "\n".join(page_texts.get(i, "") for i in range(chunk["page_index"], chunk["page_end"] + 1))
    return normalize_ws(content) in normalize_ws(joined)


def locate_document(
    chunk_id: str, client: MilvusClient | None, alias: str, catalog: Catalog, scope: set[str] | None = None
) -> str:
    """The document of a chunk, within ``scope`` (knowledge bases; None: all), found through indexes, never
    by reading the lake: the catalog's ``chunk_terms`` (every chunk that serves, by its primary key), else
    the published collection (documents published before term counts were kept), asked with an escaped
    filter that carries the scope. An id neither holds is not found; nothing outside the scope is read."""
    not_found = ChunkNotFound(f"chunk {chunk_id} is in no document you may read")
    if not CHUNK_ID.fullmatch(chunk_id):
        raise not_found
    if scope is not None and not scope:
        raise not_found
    kbs = sorted(scope) if scope is not None else None
    document_id = catalog.chunk_document(chunk_id, kbs)
    if document_id is None and client is not None:
        try:
            collection = published_collection(client, catalog, alias)
            document_id = chunk_document(client, collection, chunk_id, kbs) if collection else None
        except Exception:  # nothing published or Milvus down: the catalog has answered
            document_id = None
    if document_id is None:
        raise not_found
    return document_id


def entities_run(doc: Document | None, chunk_version: str) -> str | None:
    """The run that last wrote the document's entities, when the chunk is of the version they hold (a run
    that published nothing new, such as a retry that found every entity in place, is not credited)."""
    if doc is None or doc.published_version != chunk_version:
        return None
    return doc.published_run_id


def chunk_lineage(
    chunk_id: str, catalog: Catalog, lake: Lake, client: MilvusClient | None, alias: str, scope: set[str] | None = None
) -> JsonObject:
    """A chunk's lineage; ``scope`` (knowledge bases the caller may read, None: all) is enforced
    before any store is read, and a chunk outside it is not found."""
    document_id = locate_document(chunk_id, client, alias, catalog, scope)
    doc = catalog.get_document(document_id)
    if scope is not None and (doc is None or doc.knowledge_base_id not in scope):
        raise ChunkNotFound(f"chunk {chunk_id} is in no document you may read")
    chunks = lake.read("chunks", document_id).filter(chunk_id=chunk_id)
    if chunks.is_empty():
        raise ChunkNotFound(f"chunk {chunk_id} is no longer in document {document_id}")
    chunk = chunks.row(0, named=True)
    pages = [p for p in catalog.read_pages(document_id) if chunk["page_index"] <= p["page_index"] <= chunk["page_end"]]
    found = chunk_found_in_pages(chunk, {p["page_index"]: p["text"] for p in pages})
    same_version = (
        doc is not None
        and all(p["version"] == chunk["document_version"] for p in pages)
        and doc.version == chunk["document_version"]
    )
    nodes = catalog.read_nodes(document_id)
    embeddings = lake.read("embeddings", document_id).filter(chunk_id=chunk_id)
    runs = [
        ("parsed_pages", pages[0]["run_id"] if pages else None),
        ("pageindex_trees", nodes[0]["run_id"] if nodes else None),
        ("chunks", chunk["run_id"]),
        ("embeddings", embeddings["run_id"][0] if embeddings.height else None),
        ("milvus_collection", entities_run(doc, chunk["document_version"])),
    ]
    return {
        "chunkId": chunk_id,
        "chunkIndex": chunk["chunk_index"],
        "content": chunk["content"],
        "sectionTitle": chunk["section_title"],
        "pageIndex": chunk["page_index"],
        "pageEnd": chunk["page_end"],
        "pages": [
            {
                "pageIndex": p["page_index"],
                "pageLabel": p["page_label"],
                "parser": p["parser"],
                "mode": p["mode"],
                "version": p["version"],
                "runId": p["run_id"],
                "text": p["text"][:MAX_PAGE_CHARS],
                "truncated": len(p["text"]) > MAX_PAGE_CHARS,
                "width": p.get("width"),
                "height": p.get("height"),
                "imageUrl": asset_url(p["image_key"]),
            }
            for p in pages
        ],
        # the page areas the chunk covers, in the units of its pages' width/height (top-left origin)
        "regions": [
            {"pageIndex": r["page_index"], "l": r["l"], "t": r["t"], "r": r["r"], "b": r["b"]}
            for r in chunk.get("regions") or []
        ],
        "kind": chunk["kind"],
        "tableHeader": chunk["table_header"],
        "document": {
            "documentId": document_id,
            "knowledgeBaseId": chunk["knowledge_base_id"],
            "title": chunk["document_title"],
            "sourceUri": chunk["source_uri"],
            "version": chunk["document_version"],
            "currentVersion": doc.version if doc else None,
            "status": doc.status if doc else None,
            "objectKey": doc.object_key if doc else None,
            "sizeBytes": doc.size_bytes if doc else None,
            "mime": doc.mime if doc else chunk["mime"],
            "sourceKind": doc.source_kind if doc else chunk["source_kind"],
            "pageCount": doc.page_count if doc else None,
        },
        "runs": [{"asset": asset, "runId": run_id} for asset, run_id in runs],
        "runIds": {
            "chunks": chunk["run_id"],
            "pages": pages[0]["run_id"] if pages else None,
            "document": doc.last_run_id if doc else None,
        },
        "verified": bool(found and same_version),
        "verification": {"contentFoundInPages": found, "versionsMatch": same_version},
    }


def chunk_records(chunks: pl.DataFrame) -> list[JsonObject]:
    """A document's chunk rows in page order, as the CLI and the service show them (camelCase)."""
    return [
        {
            "chunkId": c["chunk_id"],
            "chunkIndex": c["chunk_index"],
            "pageIndex": c["page_index"],
            "pageEnd": c["page_end"],
            "pageLabel": c["page_label"],
            "kind": c["kind"],
            "sectionTitle": c["section_title"],
            "content": c["content"],
            "embeddingInput": c["embedding_input"],
            "tableHeader": c["table_header"],
            "imageKey": c["image_key"],
            "documentVersion": c["document_version"],
            "runId": c["run_id"],
        }
        for c in chunks.sort("page_index", "chunk_index").iter_rows(named=True)
    ]
