"""Embedding-spec migration without downtime: the collection of the configured spec is filled beside the
published one from the lake (no re-parse), validated, and published by an atomic swap (the alias on a
Milvus server, the catalog on the embedded engine: ``stores.vectors.publish``); the previous collection
is retired and kept for rollback.

The steps are Dagster runs (``launch/store_changes.py``, ``defs/sensors.py``): the backfill re-materializes
``embeddings`` and ``milvus_collection`` for every document that serves a version (vectors of unchanged
embedding inputs are reused when the model is the same); ``collection_candidate`` validates with a
blocking check (``validate``); ``collection_alias`` swaps what is published (``swap``). Until the swap,
changed documents are written into both collections (``steps.publish_document``).

Validation: every carried document has exactly its published version's chunk rows as entities and the
collection nothing else, vectors have the spec's dimension, and on golden queries drawn from the corpus
(section titles, and the opening words of chunks) the new collection finds the right document at least
as often as the published one, less a tolerance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pymilvus import MilvusClient

from kb_assets.embedding.model import EmbeddingModel
from kb_assets.lib.json_types import JsonObject
from kb_assets.pipeline.versions import Staleness
from kb_assets.retrieval.search import Searcher, SearchRequest
from kb_assets.stores.catalog import Catalog, Document
from kb_assets.stores.entities import count_entities, count_version, stored_vectors
from kb_assets.stores.lake import Lake
from kb_assets.stores.vectors import (
    SCHEMA_VERSION,
    collection_exists,
    collection_spec,
    load,
    publish,
    published_collection,
    retire,
)

GOLDEN_QUERIES = 60
QUALITY_TOLERANCE = 0.05
GoldenQuery = tuple[str, str, str]  # (query, document id, knowledge base)


@dataclass(frozen=True)
class MigrationDue:
    """The published collection's spec differs from the configured one."""

    published: str  # the collection that serves
    published_model: str
    configured_model: str
    reason: str


@dataclass(frozen=True)
class Validation:
    """A candidate collection against the published one (``validate``); kept as the run's metadata
    (``as_json``) and read back from it (``from_json``)."""

    previous: str | None
    collection: str
    entities: int
    chunk_rows: int
    documents: int
    not_carried: tuple[str, ...]  # failed documents whose last good version it does not hold
    golden_queries: int
    quality_new: float  # golden-query document hit@5
    quality_published: float
    dimension: int
    problems: tuple[str, ...]

    def as_json(self) -> JsonObject:
        return {
            "previous": self.previous,
            "collection": self.collection,
            "entities": self.entities,
            "chunkRows": self.chunk_rows,
            "documents": self.documents,
            "notCarried": list(self.not_carried),
            "goldenQueries": self.golden_queries,
            "quality": {"new": self.quality_new, "published": self.quality_published},
            "dimension": self.dimension,
            "problems": list(self.problems),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Validation:
        return cls(
            data["previous"],
            data["collection"],
            data["entities"],
            data["chunkRows"],
            data["documents"],
            tuple(data["notCarried"]),
            data["goldenQueries"],
            data["quality"]["new"],
            data["quality"]["published"],
            data["dimension"],
            tuple(data["problems"]),
        )


@dataclass(frozen=True)
class Swap:
    previous: str | None
    published: str
    entities: int
    stopped_serving: tuple[str, ...]  # failed documents whose last good version was not carried over


@dataclass(frozen=True)
class Rollback:
    published: str
    previous: str | None


def migration_documents(
    docs: list[Document], stale: dict[str, Staleness], current: dict[str, str]
) -> dict[str, Staleness]:
    """The documents a collection migration backfills from the lake: published documents stale only by
    the embedding spec, and failed documents whose last good version still serves (carried over when
    its chunks are still in the lake)."""
    picked = {}
    for doc in docs:
        why = stale.get(doc.document_id)
        if doc.status == "published" and why is not None and why.migration:
            picked[doc.document_id] = why
        elif (
            doc.status == "failed"
            and doc.published_version
            and (doc.step_versions or {}).get("milvus_collection") != current["milvus_collection"]
        ):
            picked[doc.document_id] = Staleness(
                "embeddings", "its last good version is carried into the new collection", migration=True
            )
    return picked


def migration_due(client: MilvusClient, catalog: Catalog, alias: str, model_id: str) -> MigrationDue | None:
    """What the published collection holds against the configured spec, when they differ (None when they
    agree or nothing is published yet: the first ingest publishes its own collection)."""
    current = published_collection(client, catalog, alias)
    if current is None:
        return None
    spec = collection_spec(client, current)
    if spec["model"] == model_id and spec.get("schemaVersion", SCHEMA_VERSION) == SCHEMA_VERSION:
        return None
    return MigrationDue(
        published=current,
        published_model=spec["model"],
        configured_model=model_id,
        reason=f"{alias} publishes {current} ({spec['model']}, schema "
        f"{spec.get('schemaVersion')}); the configuration asks for {model_id}, schema {SCHEMA_VERSION}",
    )


def golden_queries(lake: Lake, document_ids: list[str], limit: int = GOLDEN_QUERIES) -> list[GoldenQuery]:
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


def document_hit_rate(searcher: Searcher, queries: list[GoldenQuery]) -> float:
    """Share of queries whose document is among the top 5 chunk results (page fallback never counts)."""
    hits = 0
    for query, document_id, kb in queries:
        results = searcher.search(SearchRequest(query, [kb], limit=5, min_score=-1.0)).results
        hits += any(r["documentId"] == document_id and r["retrievalSource"] != "fallback_pages" for r in results)
    return hits / len(queries) if queries else 1.0


def candidate_hit_rate(
    client: MilvusClient,
    catalog: Catalog,
    collection: str,
    load_model: Callable[[str], EmbeddingModel],
    queries: list[GoldenQuery],
) -> float:
    """The hit rate of a collection searched the way the service will search it."""
    searcher = Searcher(client, catalog, f"{collection}__candidate", load_model, collection=collection)
    try:
        return document_hit_rate(searcher, queries)
    finally:
        searcher.close()


def carried_documents(
    catalog: Catalog, client: MilvusClient, collection: str
) -> tuple[list[Document], list[Document], list[str]]:
    """The documents that serve a version, split into those the collection holds exactly (their published
    version's chunk rows, as entities), failed documents whose last good version it does not hold (not
    carried over), and problems (a published document held wrongly)."""
    carried: list[Document] = []
    not_carried: list[Document] = []
    problems: list[str] = []
    for doc in catalog.list_documents():
        if doc.status == "deleted" or not doc.published_version:
            continue
        found = count_version(client, collection, doc.document_id, doc.published_version)
        if found == doc.chunk_count and found:
            carried.append(doc)
        elif doc.status != "published" and found == 0:
            not_carried.append(doc)
        else:
            problems.append(
                f"{doc.source_path}: {found} entities of its published version for {doc.chunk_count} chunk rows"
            )
    return carried, not_carried, problems


def validate(
    catalog: Catalog,
    lake: Lake,
    client: MilvusClient,
    collection: str,
    alias: str,
    dimension: int,
    load_model: Callable[[str], EmbeddingModel],
) -> Validation:
    """The candidate collection against the published one: entity counts, dimension, golden queries."""
    current = published_collection(client, catalog, alias)
    carried, not_carried, problems = carried_documents(catalog, client, collection)
    expected = sum(doc.chunk_count or 0 for doc in carried)
    entities = count_entities(client, collection)
    if entities != expected:
        problems.append(
            f"{entities} entities for {expected} chunk rows of the documents it carries ({entities - expected:+d})"
        )
    spec = collection_spec(client, collection)
    sample = (
        stored_vectors(client, collection, [lake.read("chunks", carried[0].document_id)["chunk_id"][0]])
        if carried
        else {}
    )
    dimensions = {spec["dimension"], *(len(v) for v in sample.values())}
    if dimensions != {dimension}:
        problems.append(f"vectors of dimension {sorted(dimensions)}, the model gives {dimension}")
    queries = golden_queries(lake, [d.document_id for d in carried if d.status == "published"])
    new_quality = candidate_hit_rate(client, catalog, collection, load_model, queries)
    old_quality = candidate_hit_rate(client, catalog, current, load_model, queries) if current else 0.0
    if new_quality < old_quality - QUALITY_TOLERANCE:
        problems.append(
            f"golden-query document hit@5 {new_quality:.3f} is worse than the published collection's {old_quality:.3f}"
        )
    return Validation(
        previous=current,
        collection=collection,
        entities=entities,
        chunk_rows=expected,
        documents=len(carried),
        not_carried=tuple(d.source_uri for d in not_carried),
        golden_queries=len(queries),
        quality_new=round(new_quality, 3),
        quality_published=round(old_quality, 3),
        dimension=dimension,
        problems=tuple(problems),
    )


def swap(catalog: Catalog, client: MilvusClient, alias: str, collection: str) -> Swap:
    """Publish the (validated) collection, atomically; the previous one is retired and kept for rollback.
    Failed documents whose last good version was not carried over stop serving."""
    previous = published_collection(client, catalog, alias)
    _, not_carried, _ = carried_documents(catalog, client, collection)
    dropped = {doc.document_id for doc in not_carried}
    load(client, collection)
    publish(client, catalog, alias, collection)  # atomic: searches never see a gap
    entities = count_entities(client, collection)
    with catalog.connect() as conn:
        catalog.set_collection_state(conn, collection, "published", entity_count=entities)
        if previous and previous != collection:
            catalog.set_collection_state(conn, previous, "retired")
        for doc in catalog.list_documents():
            if doc.status == "deleted" or not doc.published_version:
                continue
            if doc.document_id in dropped:
                catalog.update_document(conn, doc.document_id, published_version=None, collection_name=None)
            else:
                catalog.update_document(conn, doc.document_id, collection_name=collection)
    if previous and previous != collection:
        retire(client, previous)
    return Swap(previous, collection, entities, tuple(d.source_uri for d in not_carried))


def rollback(catalog: Catalog, client: MilvusClient, alias: str) -> Rollback:
    """Re-publish the most recently retired collection of the alias that still exists."""
    current = published_collection(client, catalog, alias)
    retired = [
        c
        for c in catalog.collections()
        if c.state == "retired" and c.alias == alias and c.name != current and collection_exists(client, c.name)
    ]
    if not retired:
        raise LookupError("no retired collection to roll back to")
    previous = max(retired, key=lambda c: c.published_at or c.created_at).name
    load(client, previous)
    publish(client, catalog, alias, previous)
    with catalog.connect() as conn:
        catalog.set_collection_state(conn, previous, "published")
        if current:
            catalog.set_collection_state(conn, current, "retired")
    if current:
        retire(client, current)
    return Rollback(published=previous, previous=current)
