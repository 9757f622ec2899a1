"""The vector index: every Milvus call of kb-assets goes through this module.

Versioned collections of chunks, published through one alias. One collection holds every knowledge
base (``knowledge_base_id`` is the partition key); its name is derived from the schema version and the
embedding spec, and the spec is stored as a collection property. Filters are built only from
escaped literals (``milvus_string``), never from request text.

Every function takes the ``MilvusClient`` first; ``timeout`` (seconds, None: the client's) bounds the
call where the retrieval service needs a deadline.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
from pymilvus import DataType, Function, FunctionType, MilvusClient, MilvusException

if TYPE_CHECKING:
    import polars as pl

SCHEMA_VERSION = 1
# One analyzer for every language: jieba segments Chinese and keeps English words; lowercase makes
# "Backups" match "backups" (measured: the standard tokenizer finds nothing in Chinese).
BM25_ANALYZER = {"tokenizer": "jieba", "filter": ["lowercase"]}
CONTENT_MAX_CHARS = 8192
SCALAR_FIELDS = {
    "knowledge_base_id": 256, "document_id": 64, "document_version": 64, "document_title": 512,
    "source_uri": 2048, "section_title": 512, "page_label": 32, "kind": 16, "source_kind": 16,
    "mime": 128, "image_key": 512,
}
INT_FIELDS = ("page_index", "page_end", "chunk_index")
SPEC_PROPERTY = "kb_assets.embedding_spec"
# The dense index of a new collection (KB_MILVUS_DENSE_INDEX), COSINE: HNSW keeps each vector and its
# graph links in memory (~1.7 KB at 384-d); HNSW_SQ and IVF_SQ8 keep 8-bit codes (~4x less, a little
# recall lost); DISKANN keeps the graph and vectors on the query node's SSD (Milvus distributed with
# queryNode.disk enabled; Milvus Lite accepts it but never builds it).
DENSE_INDEXES = {
    "hnsw": ("HNSW", {"M": 16, "efConstruction": 200}),
    "hnsw_sq": ("HNSW_SQ", {"M": 16, "efConstruction": 200, "sq_type": "SQ8"}),
    "ivf_sq8": ("IVF_SQ8", {"nlist": 1024}),
    "diskann": ("DISKANN", {}),
}
OUTPUT_FIELDS = ["chunk_id", *SCALAR_FIELDS, *INT_FIELDS, "content"]


@dataclass(frozen=True)
class EmbeddingSpec:
    model: str
    dimension: int
    languages: tuple[str, ...]
    short_name: str

    def collection_name(self) -> str:
        return milvus_safe_name(f"kb_chunks__{self.short_name}__d{self.dimension}__v{SCHEMA_VERSION}")


def milvus_safe_name(name: str) -> str:
    """Milvus names allow [A-Za-z0-9_], start with a letter or _, at most 255 chars; encode the rest."""
    safe = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if safe != name:
        safe = f"{safe}_{hashlib.sha1(name.encode()).hexdigest()[:8]}"
    if not re.match(r"[A-Za-z_]", safe):
        safe = f"_{safe}"
    return safe[:255]


def build_schema(client: MilvusClient, spec: EmbeddingSpec):
    schema = client.create_schema(auto_id=False, description="kb-assets chunks")
    schema.add_field("chunk_id", DataType.VARCHAR, is_primary=True, max_length=64)
    for name, length in SCALAR_FIELDS.items():
        schema.add_field(name, DataType.VARCHAR, max_length=length,
                         is_partition_key=(name == "knowledge_base_id"))
    for name in INT_FIELDS:
        schema.add_field(name, DataType.INT32)
    schema.add_field("content", DataType.VARCHAR, max_length=CONTENT_MAX_CHARS * 4, enable_analyzer=True,
                     analyzer_params=BM25_ANALYZER)
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=spec.dimension)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(Function(name="content_bm25", function_type=FunctionType.BM25,
                                 input_field_names=["content"], output_field_names=["sparse"]))
    return schema


def ensure_collection(client: MilvusClient, spec: EmbeddingSpec, dense_index: str = "hnsw") -> str:
    """Create the collection of a spec if missing (dense ``DENSE_INDEXES[dense_index]``/COSINE, sparse
    BM25) and load it. An existing collection keeps the index it was built with."""
    name = spec.collection_name()
    if not client.has_collection(name):
        index_type, params = DENSE_INDEXES[dense_index]
        index_params = client.prepare_index_params()
        index_params.add_index("dense", index_type=index_type, metric_type="COSINE", params=params)
        index_params.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        client.create_collection(name, schema=build_schema(client, spec), index_params=index_params)
        # Milvus Lite keeps no schema description; collection properties persist
        client.alter_collection_properties(name, properties={SPEC_PROPERTY: json.dumps({
            "model": spec.model, "dimension": spec.dimension, "languages": list(spec.languages),
            "schemaVersion": SCHEMA_VERSION})})
    client.load_collection(name)
    return name


def published_collection(client: MilvusClient, alias: str) -> str | None:
    """The collection the alias points to, or None when nothing is published."""
    if alias not in client.list_aliases().get("aliases", []):
        return None
    return alias_target(client, alias)


def alias_target(client: MilvusClient, alias: str, timeout: float | None = None) -> str:
    """The collection the alias points to; raises when there is no such alias (one call, for search)."""
    return client.describe_alias(alias, timeout=timeout)["collection_name"]


def publish(client: MilvusClient, alias: str, collection: str) -> None:
    """Point the alias at a collection (atomic alter when it already exists)."""
    current = published_collection(client, alias)
    if current is None:
        client.create_alias(collection, alias)
    elif current != collection:
        client.alter_alias(collection, alias)


def unpublish(client: MilvusClient, alias: str) -> None:
    """Drop the alias; the collection it pointed to stays."""
    client.drop_alias(alias)


def collection_exists(client: MilvusClient, collection: str) -> bool:
    return client.has_collection(collection)


def load(client: MilvusClient, collection: str, timeout: float | None = None) -> None:
    """Load the collection into memory for search (again after a Milvus restart; a no-op when loaded)."""
    client.load_collection(collection, timeout=timeout)


def flush(client: MilvusClient, collection: str) -> None:
    """Seal the write-ahead log into indexed segments (searches after a bulk write get ~10x faster)."""
    client.flush(collection)


def collection_spec(client: MilvusClient, collection: str, timeout: float | None = None) -> dict:
    """The embedding spec stored with a collection (model, dimension, languages, schemaVersion)."""
    properties = client.describe_collection(collection, timeout=timeout).get("properties") or {}
    if SPEC_PROPERTY not in properties:
        raise RuntimeError(f"collection {collection} carries no embedding spec ({SPEC_PROPERTY})")
    return json.loads(properties[SPEC_PROPERTY])


def milvus_string(value: str) -> str:
    """A Milvus filter string literal; values from requests never become expression syntax.

    Quotes and backslashes are escaped (JSON rules, which Milvus's parser shares); control characters
    have no escape Milvus accepts, so they are refused.
    """
    value = str(value)
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError(f"filter value {value!r} contains control characters")
    return json.dumps(value, ensure_ascii=False)


def in_filter(field: str, values: list[str]) -> str:
    if field not in SCALAR_FIELDS and field != "chunk_id":
        raise ValueError(f"not a filterable field: {field}")
    return f"{field} in [{', '.join(milvus_string(v) for v in values)}]"


def pages_filter(ranges: dict[str, list[tuple[int, int]]]) -> str:
    """Chunks of these documents that touch these page ranges: {document_id: [(first, last), ...]}."""
    clauses = []
    for document_id, spans in ranges.items():
        touches = " or ".join(f"(page_index <= {int(last)} and page_end >= {int(first)})" for first, last in spans)
        clauses.append(f"(document_id == {milvus_string(document_id)} and ({touches}))")
    if not clauses:
        raise ValueError("pages_filter needs at least one page range")
    return " or ".join(clauses)


# entities of one document -----------------------------------------------------------------
def chunk_entities(chunks: "pl.DataFrame", embeddings: "pl.DataFrame") -> list[dict]:
    """Milvus rows from a document's chunk rows joined to their vectors (every chunk must have one)."""
    import polars as pl   # the retrieval service imports this module and never needs polars

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


def query_loaded(client: MilvusClient, collection: str, **query) -> list[dict]:
    return when_loaded(client, collection, lambda: client.query(collection, **query))


def delete_loaded(client: MilvusClient, collection: str, flt: str) -> None:
    when_loaded(client, collection, lambda: client.delete(collection, filter=flt))


def document_filter(document_id: str) -> str:
    """The entities of one document."""
    return f"document_id == {milvus_string(document_id)}"


def document_entities(client: MilvusClient, collection: str, document_id: str, with_vectors: bool = True) -> dict[str, dict]:
    """The document's entities in the collection, by chunk id (scalar fields and content; ``dense`` too)."""
    fields = OUTPUT_FIELDS + (["dense"] if with_vectors else [])
    rows = query_loaded(client, collection, filter=document_filter(document_id), output_fields=fields)
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


def sync_document(client: MilvusClient, collection: str, document_id: str, entities: list[dict],
                  batch_size: int = 500, vectors=None) -> dict:
    """Make the collection hold exactly these entities for the document: upsert only those that differ
    from what is stored (content, fields, vector), delete the document's other entities; returns counts.

    Entities given without ``dense`` get their vectors from ``vectors(entities) -> list of vectors``,
    called only for those written (a collection of another embedding spec: only what changed is encoded).
    """
    existing = document_entities(client, collection, document_id, with_vectors=bool(entities) and "dense" in entities[0])
    new_ids = {e["chunk_id"] for e in entities}
    to_write = [e for e in entities if not same_entity(existing.get(e["chunk_id"]), e)]
    if to_write and "dense" not in to_write[0]:
        to_write = [{**e, "dense": list(v)} for e, v in zip(to_write, vectors(to_write))]
    for start in range(0, len(to_write), batch_size):
        client.upsert(collection, to_write[start:start + batch_size])
    stale = sorted(set(existing) - new_ids)
    for start in range(0, len(stale), batch_size):
        delete_loaded(client, collection, in_filter("chunk_id", stale[start:start + batch_size]))
    return {"written": len(to_write), "deleted": len(stale), "kept": len(entities) - len(to_write)}


def version_counts(client: MilvusClient, collection: str, document_id: str) -> dict[str, int]:
    """How many entities of each document version the collection holds for the document."""
    rows = query_loaded(client, collection, filter=document_filter(document_id), output_fields=["document_version"])
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["document_version"]] = counts.get(row["document_version"], 0) + 1
    return counts


def count_version(client: MilvusClient, collection: str, document_id: str, version: str) -> int:
    """How many entities of this document version the collection holds."""
    return count_entities(client, collection,
                          f"{document_filter(document_id)} and document_version == {milvus_string(version)}")


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


def document_ids(client: MilvusClient, collection: str, excluding: list[str] | None = None,
                 limit: int = 16384) -> set[str]:
    """The documents that have entities in the collection (among the first ``limit`` entities read),
    less those ``excluding`` names."""
    flt = f"not ({in_filter('document_id', excluding)})" if excluding else ""
    rows = query_loaded(client, collection, filter=flt, output_fields=["document_id"], limit=limit)
    return {row["document_id"] for row in rows}


def chunk_document(client: MilvusClient, collection: str, chunk_id: str,
                   knowledge_base_ids: list[str] | None = None) -> str | None:
    """The document of a chunk, when it is in one of these knowledge bases (None: any); else None."""
    flt = f"chunk_id == {milvus_string(chunk_id)}"
    if knowledge_base_ids is not None:
        flt += f" and {in_filter('knowledge_base_id', knowledge_base_ids)}"
    rows = query_loaded(client, collection, filter=flt, output_fields=["document_id"], limit=1)
    return rows[0]["document_id"] if rows else None


def stored_vectors(client: MilvusClient, collection: str, chunk_ids: list[str],
                   timeout: float | None = None) -> dict[str, list[float]]:
    """The dense vectors stored for these chunks, by chunk id."""
    rows = query_loaded(client, collection, filter=in_filter("chunk_id", chunk_ids), output_fields=["chunk_id", "dense"],
                        limit=len(chunk_ids), timeout=timeout)
    return {row["chunk_id"]: row["dense"] for row in rows}


# search -----------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def dense_index_type(client: MilvusClient, collection: str) -> str:
    """The dense index a collection was built with (fixed for its life): asked once per client."""
    return client.describe_index(collection, "dense")["index_type"]


def dense_search_params(index_type: str, limit: int) -> dict:
    """The search-time parameters of a dense index type for ``limit`` hits."""
    if index_type.startswith("HNSW"):
        return {"ef": max(64, limit * 2)}
    if index_type.startswith("IVF"):
        return {"nprobe": 32}
    if index_type == "DISKANN":
        return {"search_list": max(100, limit * 2)}
    return {}


def search_dense(client: MilvusClient, collection: str, vector: list[float], flt: str, limit: int,
                 timeout: float | None = None) -> list:
    """The ``limit`` chunks nearest to the vector (COSINE, with the collection's dense index) among those
    the filter selects; each hit has ``id``, ``distance`` (the cosine) and ``entity`` (``OUTPUT_FIELDS``)."""
    params = dense_search_params(dense_index_type(client, collection), limit)
    return client.search(collection, data=[vector], anns_field="dense", limit=limit, filter=flt,
                         output_fields=OUTPUT_FIELDS, timeout=timeout,
                         search_params={"metric_type": "COSINE", "params": params})[0]


def search_bm25(client: MilvusClient, collection: str, text: str, flt: str, limit: int,
                timeout: float | None = None, with_vectors: bool = False) -> list:
    """The ``limit`` best BM25 matches of the text (jieba analyzer) among those the filter selects; each
    hit's ``distance`` is its BM25 score (negative on Milvus Lite); ``with_vectors``: the entities carry
    their stored ``dense`` vector too (cheaper than reading it afterwards)."""
    return client.search(collection, data=[text], anns_field="sparse", limit=limit, filter=flt,
                         output_fields=OUTPUT_FIELDS + ["dense"] * with_vectors, timeout=timeout,
                         search_params={"metric_type": "BM25"})[0]
