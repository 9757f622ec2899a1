"""Writing one document's chunks into a collection: upsert current, delete stale, never touch others."""

from __future__ import annotations

import polars as pl
from pymilvus import MilvusClient

from kb_assets.index.collections import INT_FIELDS, SCALAR_FIELDS, in_filter, milvus_string


def chunk_entities(chunks: pl.DataFrame, embeddings: pl.DataFrame) -> list[dict]:
    """Milvus rows from a document's chunk rows joined to their vectors (every chunk must have one)."""
    joined = chunks.join(embeddings.select("chunk_id", "vector"), on="chunk_id", how="left")
    missing = joined.filter(pl.col("vector").is_null())["chunk_id"].to_list()
    if missing:
        raise ValueError(f"{len(missing)} chunks have no embedding, e.g. {missing[:3]}")
    rows = []
    for row in joined.iter_rows(named=True):
        entity = {"chunk_id": row["chunk_id"], "content": row["content"], "dense": list(row["vector"])}
        entity.update({name: (row.get(name) or "")[:length] for name, length in SCALAR_FIELDS.items()})
        entity.update({name: int(row[name]) for name in INT_FIELDS})
        rows.append(entity)
    return rows


def document_chunk_ids(client: MilvusClient, collection: str, document_id: str) -> set[str]:
    rows = client.query(collection, filter=f"document_id == {milvus_string(document_id)}",
                        output_fields=["chunk_id"])
    return {row["chunk_id"] for row in rows}


def sync_document(client: MilvusClient, collection: str, document_id: str, entities: list[dict],
                  batch_size: int = 500) -> dict:
    """Make the collection hold exactly these entities for the document; returns counts."""
    existing = document_chunk_ids(client, collection, document_id)
    new_ids = {e["chunk_id"] for e in entities}
    to_write = [e for e in entities if e["chunk_id"] not in existing]
    for start in range(0, len(to_write), batch_size):
        client.upsert(collection, to_write[start:start + batch_size])
    stale = sorted(existing - new_ids)
    for start in range(0, len(stale), batch_size):
        client.delete(collection, filter=in_filter("chunk_id", stale[start:start + batch_size]))
    return {"written": len(to_write), "deleted": len(stale), "kept": len(existing & new_ids)}


def delete_document(client: MilvusClient, collection: str, document_id: str) -> None:
    client.delete(collection, filter=f"document_id == {milvus_string(document_id)}")


def count_entities(client: MilvusClient, collection: str, flt: str = "") -> int:
    rows = client.query(collection, filter=flt, output_fields=["count(*)"])
    return int(rows[0]["count(*)"]) if rows else 0
