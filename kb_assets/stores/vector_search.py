"""Searches of a collection: dense (COSINE on the configured index) and BM25 (Milvus's function on
`content`), each bounded by a timeout."""

from __future__ import annotations

from functools import lru_cache

from pymilvus import MilvusClient

from kb_assets.stores.entities import Entity
from kb_assets.stores.vectors import OUTPUT_FIELDS, in_filter


@lru_cache(maxsize=64)
def dense_index_type(client: MilvusClient, collection: str) -> str:
    """The dense index a collection was built with (fixed for its life): asked once per client."""
    return client.describe_index(collection, "dense")["index_type"]


def dense_search_params(index_type: str, limit: int) -> dict[str, int]:
    """The search-time parameters of a dense index type for ``limit`` hits."""
    if index_type.startswith("HNSW"):
        return {"ef": max(64, limit * 2)}
    if index_type.startswith("IVF"):
        return {"nprobe": 32}
    if index_type == "DISKANN":
        return {"search_list": max(100, limit * 2)}
    return {}


def search_dense(
    client: MilvusClient, collection: str, vector: list[float], flt: str, limit: int, timeout: float | None = None
) -> list:
    """The ``limit`` chunks nearest to the vector (COSINE, with the collection's dense index) among those
    the filter selects; each hit has ``id``, ``distance`` (the cosine) and ``entity`` (``OUTPUT_FIELDS``)."""
    params = dense_search_params(dense_index_type(client, collection), limit)
    return client.search(
        collection,
        data=[vector],
        anns_field="dense",
        limit=limit,
        filter=flt,
        output_fields=OUTPUT_FIELDS,
        timeout=timeout,
        search_params={"metric_type": "COSINE", "params": params},
    )[0]


def search_bm25(
    client: MilvusClient,
    collection: str,
    text: str,
    flt: str,
    limit: int,
    timeout: float | None = None,
    with_vectors: bool = False,
) -> list:
    """The ``limit`` best BM25 matches of the text (jieba analyzer) among those the filter selects; each
    hit's ``distance`` is its BM25 score (negative on Milvus Lite); ``with_vectors``: the entities carry
    their stored ``dense`` vector too (cheaper than reading it afterwards)."""
    return client.search(
        collection,
        data=[text],
        anns_field="sparse",
        limit=limit,
        filter=flt,
        output_fields=OUTPUT_FIELDS + ["dense"] * with_vectors,
        timeout=timeout,
        search_params={"metric_type": "BM25"},
    )[0]


def entities_by_id(
    client: MilvusClient,
    collection: str,
    chunk_ids: list[str],
    timeout: float | None = None,
    with_vectors: bool = False,
) -> dict[str, Entity]:
    """The entities of these chunks (``OUTPUT_FIELDS``, plus ``dense`` when ``with_vectors``), by chunk id:
    a lookup by primary key, not a pass over the collection (``entities.stored_vectors``: the vectors alone)."""
    if not chunk_ids:
        return {}
    rows = client.query(
        collection,
        filter=in_filter("chunk_id", chunk_ids),
        output_fields=OUTPUT_FIELDS + ["dense"] * with_vectors,
        limit=len(chunk_ids),
        timeout=timeout,
    )
    return {row["chunk_id"]: row for row in rows}
