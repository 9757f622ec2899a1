"""Consistency of the stores, per document: Postgres rows vs lake rows vs Milvus entities.

``verify`` reports problems; with ``repair`` it fixes what it can from the source of record and the
lake: re-syncs a published document's entities from its lake rows, removes entities and lake files of
deleted or unknown documents. What needs a re-run (missing lake rows) is reported, not guessed.
"""

from __future__ import annotations

from pymilvus import MilvusClient

from kb_assets.embedding.vectors import vectors_for
from kb_assets.stores.catalog import Catalog
from kb_assets.stores.lake import Lake
from kb_assets.stores.vectors import (
    chunk_entities,
    collection_spec,
    count_entities,
    delete_document,
    document_filter,
    document_ids,
    flush,
    published_collection,
    sync_document,
)


def verify(catalog: Catalog, lake: Lake, client: MilvusClient, alias: str, repair: bool = False,
           load_model=None) -> dict:
    """Problems per document; ``repair`` fixes them (``load_model``: model id -> EmbeddingModel, used to
    re-encode chunks whose lake vectors are of another spec than the published collection's)."""
    problems: list[dict] = []

    def problem(document_id: str | None, text: str, repaired: bool = False):
        problems.append({"documentId": document_id, "problem": text, "repaired": repaired})

    collection = published_collection(client, alias)
    documents = {d.document_id: d for d in catalog.list_documents()}
    for doc in documents.values():
        chunks = lake.read("chunks", doc.document_id)
        vectors = lake.read("embeddings", doc.document_id)
        entities = count_entities(client, collection, document_filter(doc.document_id)) if collection else 0
        if doc.status == "deleted":
            if entities or chunks.height or vectors.height:
                if repair:
                    delete_document(client, collection, doc.document_id)
                    lake.delete("chunks", doc.document_id)
                    lake.delete("embeddings", doc.document_id)
                problem(doc.document_id, f"deleted document still has {entities} entities, {chunks.height} chunk "
                        f"rows, {vectors.height} vectors", repair)
            continue
        if doc.status != "published":
            continue
        if not chunks.height:
            problem(doc.document_id, "published document has no chunk rows in the lake: re-ingest it")
            continue
        if doc.published_version and (chunks["document_version"] != doc.published_version).any():
            problem(doc.document_id, "lake chunks are not of the published version: re-ingest it")
        if set(vectors["chunk_id"].to_list()) != set(chunks["chunk_id"].to_list()):
            problem(doc.document_id, f"{chunks.height} chunk rows but {vectors.height} vectors: re-ingest it")
            continue
        if collection is None:
            continue
        if doc.chunk_count != chunks.height or entities != chunks.height:
            repaired = False
            if repair and load_model is not None:
                spec = collection_spec(client, collection)
                [(vectors, _)] = vectors_for([(chunks, vectors)], load_model(spec["model"]), spec["model"], "repair")
                sync_document(client, collection, doc.document_id, chunk_entities(chunks, vectors))
                with catalog.connect() as conn:
                    catalog.update_document(conn, doc.document_id, chunk_count=chunks.height,
                                            collection_name=collection)
                repaired = True
            problem(doc.document_id, f"{chunks.height} chunk rows, {entities} Milvus entities, "
                    f"{doc.chunk_count} recorded chunks", repaired)
    if collection:
        for document_id in sorted(document_ids(client, collection, excluding=list(documents))):
            if repair:
                delete_document(client, collection, document_id)
            problem(document_id, "Milvus entities of a document Postgres does not know", repair)
    for table in ("chunks", "embeddings"):
        for document_id in lake.document_ids(table):
            if document_id not in documents:
                if repair:
                    lake.delete(table, document_id)
                problem(document_id, f"lake {table} of a document Postgres does not know", repair)
    if repair and collection:
        flush(client, collection)
    return {"consistent": not problems, "collection": collection, "problems": problems}
