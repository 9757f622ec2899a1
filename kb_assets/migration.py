"""Embedding-spec migration without downtime: build the spec's collection beside the published one
from the lake (no re-parse), validate it, swap the alias atomically; roll back to the previous one.

Validation: the new collection holds exactly one entity per chunk row, its vectors have the spec's
dimension, and on golden queries drawn from the corpus (section titles, and the opening words of
chunks) it finds the right document at least as often as the published collection, less a tolerance.
"""

from __future__ import annotations

import polars as pl
from pymilvus import MilvusClient

from kb_assets.embedding.model import EmbeddingModel
from kb_assets.embedding.vectors import vectors_for
from kb_assets.retrieval.search import Searcher, SearchRequest
from kb_assets.stores.catalog import Catalog
from kb_assets.stores.lake import Lake
from kb_assets.stores.vectors import (
    SCHEMA_VERSION,
    EmbeddingSpec,
    chunk_entities,
    collection_exists,
    count_entities,
    ensure_collection,
    flush,
    load,
    publish,
    published_collection,
    sync_document,
    unpublish,
)

GOLDEN_QUERIES = 60
QUALITY_TOLERANCE = 0.05


def golden_queries(lake: Lake, document_ids: list[str], limit: int = GOLDEN_QUERIES) -> list[tuple[str, str, str]]:
    """(query, document id, knowledge base) drawn deterministically from the lake's chunks."""
    rows = []
    for document_id in document_ids:
        chunks = lake.read("chunks", document_id)
        for row in chunks.sort("chunk_index").iter_rows(named=True):
            words = row["content"].split()
            query = row["section_title"] if row["section_title"] and row["chunk_index"] % 2 else " ".join(words[:8])
            if query:
                rows.append((query, document_id, row["knowledge_base_id"]))
    step = max(1, len(rows) // limit)
    return rows[::step][:limit]


def document_hit_rate(searcher: Searcher, queries: list[tuple[str, str, str]]) -> float:
    """Share of queries whose document is among the top 5 chunk results (page fallback never counts)."""
    hits = 0
    for query, document_id, kb in queries:
        results = searcher.search(SearchRequest(query, [kb], limit=5, min_score=-1.0)).results
        hits += any(r["documentId"] == document_id and r["retrievalSource"] != "fallback_pages" for r in results)
    return hits / len(queries) if queries else 1.0


def candidate_hit_rate(client: MilvusClient, catalog: Catalog, collection: str, load_model,
                       queries: list[tuple[str, str, str]]) -> float:
    """The hit rate of a collection searched the way the service will search it: through an alias
    (a temporary one, dropped afterwards)."""
    alias = f"{collection}__candidate"
    publish(client, alias, collection)
    searcher = Searcher(client, catalog, alias, load_model)
    try:
        return document_hit_rate(searcher, queries)
    finally:
        searcher.close()
        unpublish(client, alias)


def migrate(catalog: Catalog, lake: Lake, client: MilvusClient, model: EmbeddingModel, spec: EmbeddingSpec,
            alias: str, load_model, progress=lambda message: None, dense_index: str = "hnsw") -> dict:
    """Build, validate and publish the collection of ``spec`` (with that dense index, when it is new);
    the published one is kept for rollback."""
    current = published_collection(client, alias)
    target = spec.collection_name()
    if current == target:
        return {"status": "unchanged", "published": target}
    ensure_collection(client, spec, dense_index)
    with catalog.connect() as conn:
        catalog.record_collection(conn, name=target, alias=alias, schema_version=SCHEMA_VERSION, model=spec.model,
                                  dimension=spec.dimension, languages=list(spec.languages), state="building")
        catalog.set_collection_state(conn, target, "building")
    documents = [d for d in catalog.list_documents() if d.status == "published"]
    doc_vectors: dict[str, pl.DataFrame] = {}
    expected = 0
    for done, doc in enumerate(documents, 1):
        chunks = lake.read("chunks", doc.document_id)
        [(vectors, _)] = vectors_for([(chunks, lake.read("embeddings", doc.document_id))], model, spec.model, "migrate")
        sync_document(client, target, doc.document_id, chunk_entities(chunks, vectors))
        doc_vectors[doc.document_id] = vectors
        expected += chunks.height
        progress(f"documents {done}/{len(documents)}")
    flush(client, target)

    problems = []
    entities = count_entities(client, target)
    if entities != expected:
        problems.append(f"{entities} entities for {expected} chunk rows")
    queries = golden_queries(lake, [d.document_id for d in documents])
    new_quality = candidate_hit_rate(client, catalog, target, load_model, queries)
    old_quality = candidate_hit_rate(client, catalog, current, load_model, queries) if current else 0.0
    if new_quality < old_quality - QUALITY_TOLERANCE:
        problems.append(f"golden-query document hit@5 {new_quality:.3f} is worse than the published "
                        f"collection's {old_quality:.3f}")
    report = {"previous": current, "collection": target, "entities": entities, "chunkRows": expected,
              "goldenQueries": len(queries), "quality": {"new": round(new_quality, 3), "published": round(old_quality, 3)}}
    with catalog.connect() as conn:
        if problems:
            catalog.set_collection_state(conn, target, "failed", entity_count=entities)
            return {**report, "status": "failed", "problems": problems, "published": current}
        publish(client, alias, target)       # alter_alias: atomic, searches never see a gap
        catalog.set_collection_state(conn, target, "published", entity_count=entities)
        if current:
            catalog.set_collection_state(conn, current, "retired")
        for doc in documents:
            catalog.update_document(conn, doc.document_id, collection_name=target)
    for document_id, vectors in doc_vectors.items():
        lake.write("embeddings", document_id, vectors)
    return {**report, "status": "published", "published": target}


def rollback(catalog: Catalog, client: MilvusClient, alias: str) -> dict:
    """Re-publish the most recently retired collection that still exists."""
    current = published_collection(client, alias)
    retired = [c for c in catalog.collections() if c["state"] == "retired" and c["name"] != current
               and collection_exists(client, c["name"])]
    if not retired:
        raise LookupError("no retired collection to roll back to")
    previous = max(retired, key=lambda c: c["published_at"] or c["created_at"])["name"]
    load(client, previous)
    publish(client, alias, previous)
    with catalog.connect() as conn:
        catalog.set_collection_state(conn, previous, "published")
        if current:
            catalog.set_collection_state(conn, current, "retired")
    return {"published": previous, "previous": current}
