"""Milvus entities of one document: build them from lake rows, sync them (upsert the changed, delete the
stale), count, list and read them back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

import numpy as np
from pymilvus import MilvusClient, MilvusException

if TYPE_CHECKING:
    import polars as pl

from kb_assets.stores.vectors import INT_FIELDS, OUTPUT_FIELDS, SCALAR_FIELDS, engine, in_filter, milvus_string

T = TypeVar("T")
Entity = dict[str, Any]  # one chunk's Milvus entity (or a row Milvus returns), as pymilvus takes and gives it


class EntityCounts(TypedDict, total=False):
    """What syncing a document's entities did (``sync_document``); publishing adds what it recorded."""

    written: int
    deleted: int
    kept: int
    entities: int
    alsoWritten: int  # written into a migration's published collection too
    note: str


# The most rows one Milvus query returns (its limit must be 1..16,384; the embedded engine cuts a query
# without a limit at 16,383 rows, silently): larger reads go in windows of chunk_index (``query_all``).
QUERY_LIMIT = 16384


def chunk_entities(chunks: pl.DataFrame, embeddings: pl.DataFrame, dimension: int | None = None) -> list[Entity]:
    """Milvus rows from a document's chunk rows joined to their vectors (every chunk must have one, all of
    one length: ``dimension`` where given).

    A vector of another length is refused here, before Milvus sees it: the embedded engine (Milvus Lite
    2.5.1) applies an upsert as a delete and an insert, so an upsert it refuses has already deleted every
    stored entity of the batch (docs/decisions.md).
    """
    import polars as pl  # the retrieval service imports this module and never needs polars

    joined = chunks.join(embeddings.select("chunk_id", "vector"), on="chunk_id", how="left")
    missing = joined.filter(pl.col("vector").is_null())["chunk_id"].to_list()
    if missing:
        raise ValueError(f"{len(missing)} chunks have no embedding, e.g. {missing[:3]}")
    lengths = joined["vector"].list.len()
    expected = dimension or (int(lengths[0]) if joined.height else 0)
    wrong = joined.filter(lengths != expected)
    if wrong.height:
        raise ValueError(
            f"{wrong.height} chunks have vectors of {int(wrong['vector'].list.len()[0])} dimensions, not"
            f" {expected}, e.g. {wrong['chunk_id'].to_list()[:3]}"
        )
    rows = []
    for row in joined.iter_rows(named=True):
        entity = {"chunk_id": row["chunk_id"], "content": row["content"], "dense": list(row["vector"])}
        entity.update({name: (row.get(name) or "")[:length] for name, length in SCALAR_FIELDS.items()})
        entity.update({name: int(row[name]) for name in INT_FIELDS})
        rows.append(entity)
    return rows


def not_loaded(error: Exception) -> bool:
    """Whether a Milvus call failed because its collection is released (Milvus Lite restarted, another
    client released it) or still loading."""
    return any(state in str(error) for state in ("released", "not loaded", "'loading'"))


def when_loaded(client: MilvusClient, collection: str, call):
    """``call()``; when the collection is released (Milvus Lite restarted, a retired collection) or still
    loading (another client's load), load it (which waits for that load) and call again: a collection the
    pipeline still writes to or purges from is loaded on demand."""
    try:
        return call()
    except MilvusException as error:
        if not not_loaded(error):
            raise
    client.load_collection(collection)
    return call()


def query_loaded(client: MilvusClient, collection: str, **query) -> list[Entity]:
    return when_loaded(client, collection, lambda: client.query(collection, **query))


def delete_loaded(client: MilvusClient, collection: str, flt: str) -> None:
    when_loaded(client, collection, lambda: client.delete(collection, filter=flt))


def query_all(client: MilvusClient, collection: str, flt: str, output_fields: list[str]) -> list[Entity]:
    """Every entity the filter selects, however many: one query when they fit ``QUERY_LIMIT``, else the
    filter read again in halves of the ``chunk_index`` range until each half fits."""

    def window(low: int, high: int) -> list[Entity]:
        bounded = f"chunk_index >= {low} and chunk_index < {high}" + (f" and ({flt})" if flt else "")
        rows = query_loaded(client, collection, filter=bounded, output_fields=output_fields, limit=QUERY_LIMIT)
        if len(rows) < QUERY_LIMIT:
            return rows
        if high - low == 1:
            raise RuntimeError(f"more than {QUERY_LIMIT} entities of {collection} share one chunk_index ({flt})")
        middle = (low + high) // 2
        return window(low, middle) + window(middle, high)

    rows = query_loaded(client, collection, filter=flt, output_fields=output_fields, limit=QUERY_LIMIT)
    if len(rows) < QUERY_LIMIT:
        return rows
    return window(0, 2**31 - 1)


def document_filter(document_id: str) -> str:
    """The entities of one document."""
    return f"document_id == {milvus_string(document_id)}"


def stored_entities(
    client: MilvusClient, collection: str, document_ids: list[str], with_vectors: bool = True
) -> dict[str, Entity]:
    """The documents' entities in the collection, by chunk id (one query for them all)."""
    fields = OUTPUT_FIELDS + (["dense"] if with_vectors else [])
    rows = query_all(client, collection, in_filter("document_id", document_ids), fields)
    return {row["chunk_id"]: row for row in rows}


def same_entity(stored: dict | None, entity: dict) -> bool:
    """Whether a stored entity already holds what ``entity`` would write (the vector compared when given)."""
    if stored is None:
        return False
    for name in ("content", *SCALAR_FIELDS, *INT_FIELDS):
        if stored.get(name) != entity.get(name):
            return False
    if "dense" in entity:
        ours, theirs = np.asarray(entity["dense"], dtype=np.float32), np.asarray(stored.get("dense"), dtype=np.float32)
        return ours.shape == theirs.shape and bool(np.allclose(ours, theirs, atol=1e-6))
    return True


def sync_document(
    client: MilvusClient, collection: str, document_id: str, entities: list[Entity], batch_size: int = 500, vectors=None
) -> EntityCounts:
    """Make the collection hold exactly these entities for the document: upsert only those that differ
    from what is stored (content, fields, vector), delete the document's other entities; returns counts.

    Entities given without ``dense`` get their vectors from ``vectors(entities) -> list of vectors``,
    called only for those written (a collection of another embedding spec: only what changed is encoded).
    """
    return sync_documents(client, collection, {document_id: entities}, batch_size, vectors)[document_id]


def sync_documents(
    client: MilvusClient,
    collection: str,
    entities: dict[str, list[Entity]],
    batch_size: int = 500,
    vectors=None,
) -> dict[str, EntityCounts]:
    """``sync_document`` for several documents at once (document id -> its entities): one read of what is
    stored, writes and deletes in batches of ``batch_size`` (a slice of small documents costs a few Milvus
    calls, not a few a document); counts by document id. Entities whose chunk id is not stored are
    inserted where the engine's upsert would scan the whole collection for them (``Engine.insert_new``:
    chunk ids are unique to their document, and the read above, under the documents' locks, found none of
    them); the others are upserted."""
    with_vectors = any(rows and "dense" in rows[0] for rows in entities.values())
    existing: dict[str, dict[str, dict]] = {document_id: {} for document_id in entities}
    for chunk_id, row in stored_entities(client, collection, list(entities), with_vectors).items():
        existing.setdefault(row["document_id"], {})[chunk_id] = row
    counts: dict[str, EntityCounts] = {}
    to_write, stale = [], []
    held: set[str] = set()
    for document_id, rows in entities.items():
        stored = existing[document_id]
        held.update(stored)
        changed = [e for e in rows if not same_entity(stored.get(e["chunk_id"]), e)]
        gone = sorted(set(stored) - {e["chunk_id"] for e in rows})
        counts[document_id] = {"written": len(changed), "deleted": len(gone), "kept": len(rows) - len(changed)}
        to_write += changed
        stale += gone
    if to_write and "dense" not in to_write[0]:
        to_write = [{**e, "dense": list(v)} for e, v in zip(to_write, vectors(to_write), strict=False)]
    added = [e for e in to_write if e["chunk_id"] not in held] if engine(client).insert_new else []
    replaced = [e for e in to_write if e["chunk_id"] in held] if added else to_write
    for start in range(0, len(added), batch_size):
        client.insert(collection, added[start : start + batch_size])
    for start in range(0, len(replaced), batch_size):
        client.upsert(collection, replaced[start : start + batch_size])
    for start in range(0, len(stale), batch_size):
        delete_loaded(client, collection, in_filter("chunk_id", stale[start : start + batch_size]))
    return counts


def entity_counts(client: MilvusClient, collection: str, document_ids: list[str], limit: int = 16384) -> dict[str, int]:
    """How many entities each document has in the collection (one query; at most ``limit`` rows read, so
    keep the documents' entities together below it)."""
    rows = query_loaded(
        client, collection, filter=in_filter("document_id", document_ids), output_fields=["document_id"], limit=limit
    )
    counts = dict.fromkeys(document_ids, 0)
    for row in rows:
        counts[row["document_id"]] = counts.get(row["document_id"], 0) + 1
    return counts


def weighted_groups(items: list[tuple[T, int]], limit: int) -> list[list[T]]:
    """The items in order, cut into groups of at most ``limit`` weight (an item heavier than that: a group of
    its own): the documents that share a Milvus call, by their entities."""
    groups: list[list[T]] = []
    size = 0
    for item, weight in items:
        if not groups or size + weight > limit:  # a group is never left empty
            groups.append([])
            size = 0
        groups[-1].append(item)
        size += weight
    return groups


def grouped_entity_counts(
    client: MilvusClient, collection: str, expected: dict[str, int], group_entities: int = 2000
) -> dict[str, int]:
    """How many entities each document has, for many documents: ``entity_counts`` of groups of about
    ``group_entities`` expected entities (``expected``: document id -> entities it should have), so that
    the count costs a query a group, not a pass over the collection a document; a group whose query read
    its limit (far more entities than expected) is counted document by document."""
    counts: dict[str, int] = {}
    for group in weighted_groups(list(expected.items()), group_entities):
        limit = 2 * sum(expected[d] for d in group) + 1
        held = entity_counts(client, collection, group, limit=limit)
        if sum(held.values()) >= limit:
            held = {d: count_entities(client, collection, document_filter(d)) for d in group}
        counts.update(held)
    return counts


def version_counts(client: MilvusClient, collection: str, document_id: str) -> dict[str, int]:
    """How many entities of each document version the collection holds for the document."""
    rows = query_all(client, collection, document_filter(document_id), ["document_version"])
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["document_version"]] = counts.get(row["document_version"], 0) + 1
    return counts


def count_version(client: MilvusClient, collection: str, document_id: str, version: str) -> int:
    """How many entities of this document version the collection holds."""
    return count_entities(
        client, collection, f"{document_filter(document_id)} and document_version == {milvus_string(version)}"
    )


def delete_stale_versions(client: MilvusClient, collection: str, document_id: str, keep_version: str | None) -> None:
    """Delete the document's entities of any version but ``keep_version`` (None: all of them)."""
    flt = document_filter(document_id)
    if keep_version is not None:
        flt += f" and document_version != {milvus_string(keep_version)}"
    delete_loaded(client, collection, flt)


def delete_document(client: MilvusClient, collection: str, document_id: str) -> None:
    delete_loaded(client, collection, document_filter(document_id))


def insert(client: MilvusClient, collection: str, entities: list[dict]) -> None:
    """Add entities as they are (bulk loads of new chunks; ``sync_document`` keeps a document in step)."""
    client.insert(collection, entities)


def clear(client: MilvusClient, collection: str) -> None:
    """Delete every entity of the collection."""
    delete_loaded(client, collection, 'chunk_id != ""')


def count_entities(client: MilvusClient, collection: str, flt: str = "") -> int:
    rows = query_loaded(client, collection, filter=flt, output_fields=["count(*)"])
    return int(rows[0]["count(*)"]) if rows else 0


def document_ids(
    client: MilvusClient, collection: str, excluding: list[str] | None = None, limit: int = 16384
) -> set[str]:
    """The documents that have entities in the collection (among the first ``limit`` entities read),
    less those ``excluding`` names."""
    flt = in_filter("document_id", excluding, negated=True) if excluding else ""
    rows = query_loaded(client, collection, filter=flt, output_fields=["document_id"], limit=limit)
    return {row["document_id"] for row in rows}


def chunk_document(
    client: MilvusClient, collection: str, chunk_id: str, knowledge_base_ids: list[str] | None = None
) -> str | None:
    """The document of a chunk, when it is in one of these knowledge bases (None: any); else None."""
    flt = f"chunk_id == {milvus_string(chunk_id)}"
    if knowledge_base_ids is not None:
        flt += f" and {in_filter('knowledge_base_id', knowledge_base_ids)}"
    rows = query_loaded(client, collection, filter=flt, output_fields=["document_id"], limit=1)
    return rows[0]["document_id"] if rows else None


def stored_vectors(
    client: MilvusClient, collection: str, chunk_ids: list[str], timeout: float | None = None
) -> dict[str, list[float]]:
    """The dense vectors stored for these chunks, by chunk id."""
    rows = query_loaded(
        client,
        collection,
        filter=in_filter("chunk_id", chunk_ids),
        output_fields=["chunk_id", "dense"],
        limit=len(chunk_ids),
        timeout=timeout,
    )
    return {row["chunk_id"]: row["dense"] for row in rows}
