"""The published collection rebuilt from the lake, when the catalog names one that Milvus does not hold:
a ``KB_HOME`` of Milvus Lite 3.x (its data folder moved aside when the embedded engine first starts,
``services.milvus``), or an engine whose data was lost. Nothing is re-encoded: the lake keeps every
chunk row and its vector. ``Stores.milvus`` runs it once, before anything else uses the engine.

A document is carried when the lake holds its published version's chunk rows with vectors of the
collection's model; any other (the lake holds a newer version, or vectors of another model) is left out
and listed: ``kb-assets verify --repair`` re-encodes what the spec changed, a re-ingest the rest.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import polars as pl
from pymilvus import MilvusClient

from kb_assets.stores.catalog import Catalog
from kb_assets.stores.catalog.records import CollectionVersion
from kb_assets.stores.entities import chunk_entities, count_entities, insert
from kb_assets.stores.lake import Lake
from kb_assets.stores.vectors import EmbeddingSpec, ensure_collection, flush, publish

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Restored:
    """A published collection rebuilt from the lake."""

    collection: str
    documents: int
    entities: int
    left_out: list[str]  # documents the lake could not rebuild (verify --repair reports them)
    seconds: float


BATCH = 2000  # rows a Milvus insert (the embedded engine slows ~10x past ~4,000)


def missing_published(catalog: Catalog, client: MilvusClient, alias: str) -> CollectionVersion | None:
    """The catalog's row of the collection published under the alias, when Milvus lacks that collection."""
    name = catalog.published_collection(alias)
    if name is None or client.has_collection(name):
        return None
    return catalog.collection(name)


def restore_published(catalog: Catalog, lake: Lake, client: MilvusClient, alias: str) -> Restored | None:
    """Rebuild the published collection from the lake when Milvus lacks it (None when it is there)."""
    row = missing_published(catalog, client, alias)
    if row is None:
        return None
    started = time.monotonic()
    name = row.name
    log.warning("the published collection %s is not in Milvus: rebuilding it from the lake (no re-encoding)", name)
    spec = EmbeddingSpec(row.model, row.dimension, tuple(row.languages), short_name="")
    created = ensure_collection(client, spec, dense_index="hnsw", name=name)
    carried, left_out, pending = [], [], []
    for doc in catalog.list_documents():
        if doc.status == "deleted" or not doc.published_version:
            continue
        chunks = lake.read("chunks", doc.document_id).filter(pl.col("document_version") == doc.published_version)
        vectors = lake.read("embeddings", doc.document_id).filter(pl.col("model") == row.model)
        if chunks.height != (doc.chunk_count or 0) or not chunks.height:
            left_out.append(f"{doc.source_path}: the lake holds no chunk rows of its published version")
            continue
        if not set(chunks["chunk_id"].to_list()) <= set(vectors["chunk_id"].to_list()):
            left_out.append(f"{doc.source_path}: the lake holds no {row.model} vectors of its chunks")
            continue
        pending += chunk_entities(chunks, vectors)
        carried.append(doc.document_id)
        while len(pending) >= BATCH:
            insert(client, created, pending[:BATCH])
            pending = pending[BATCH:]
    if pending:
        insert(client, created, pending)
    flush(client, created)
    publish(client, catalog, alias, created)  # the catalog's record again; on a server, the alias too
    entities = count_entities(client, created)
    with catalog.connect() as conn:
        catalog.set_collection_state(conn, created, "published", entity_count=entities)
    report = Restored(created, len(carried), entities, left_out, round(time.monotonic() - started, 1))
    log.warning(
        "rebuilt %s from the lake: %d documents, %d entities in %.0f s; left out (run kb-assets verify --repair): %s",
        created,
        len(carried),
        entities,
        report.seconds,
        left_out or "none",
    )
    return report
