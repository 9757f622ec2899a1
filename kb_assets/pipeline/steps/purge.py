"""Purging documents whose files are gone from every store (Postgres keeps a tombstone row)."""

from __future__ import annotations

from dataclasses import dataclass

from pymilvus import MilvusClient

from kb_assets.lib.json_types import JsonObject
from kb_assets.stores.catalog import Catalog, Document
from kb_assets.stores.entities import count_entities, delete_document, document_filter
from kb_assets.stores.lake import Lake
from kb_assets.stores.objects import ObjectStore
from kb_assets.stores.vectors import collection_exists


@dataclass(frozen=True)
class PurgedDocument:
    """What purging a document removed."""

    document_id: str
    knowledge_base_id: str
    source_path: str
    source_uri: str
    entities_removed: dict[str, int]  # by collection
    chunk_rows_removed: int
    original: str  # what became of its stored original

    def as_json(self) -> JsonObject:
        return {
            "documentId": self.document_id,
            "knowledgeBaseId": self.knowledge_base_id,
            "sourcePath": self.source_path,
            "sourceUri": self.source_uri,
            "entitiesRemoved": self.entities_removed,
            "chunkRowsRemoved": self.chunk_rows_removed,
            "original": self.original,
        }


def purge_document(
    doc: Document, catalog: Catalog, store: ObjectStore, lake: Lake, client: MilvusClient, collections: list[str]
) -> PurgedDocument:
    """Remove a deleted document from Milvus, the lake and the object store; keep a tombstone row.
    Returns what was removed."""
    removed: dict[str, int] = {}
    for collection in collections:
        removed[collection] = count_entities(client, collection, document_filter(doc.document_id))
        delete_document(client, collection, doc.document_id)
    rows = lake.read("chunks", doc.document_id).height
    lake.delete("embeddings", doc.document_id)
    lake.delete("chunks", doc.document_id)
    shared = catalog.mark_deleted(doc.document_id, doc.object_key)
    if doc.object_key and not shared:
        store.delete(doc.object_key)
    store.delete_prefix(f"pages/{doc.document_id}")  # page images and figure crops of every version
    store.delete_prefix(f"figures/{doc.document_id}")
    return PurgedDocument(
        document_id=doc.document_id,
        knowledge_base_id=doc.knowledge_base_id,
        source_path=doc.source_path,
        source_uri=doc.source_uri,
        entities_removed=removed,
        chunk_rows_removed=rows,
        original=(f"kept (shared with another document): {doc.object_key}" if shared else f"deleted {doc.object_key}")
        if doc.object_key
        else "none stored",
    )


def purge_documents(
    gone: list[Document], catalog: Catalog, store: ObjectStore, lake: Lake, client: MilvusClient
) -> list[PurgedDocument]:
    """Purge documents whose files are gone from every collection, the lake and the object store."""
    if not gone:
        return []
    collections = [c.name for c in catalog.collections() if collection_exists(client, c.name)]
    with lake.batch():  # one deletion file a table; compaction removes the rows
        purged = [purge_document(doc, catalog, store, lake, client, collections) for doc in gone]
    for table in ("chunks", "embeddings"):
        lake.compact(table, force=True)
    return purged
