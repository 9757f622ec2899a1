"""The vector index: collections, the alias and filters (entities.py: one document's entities;
vector_search.py: searches). Every Milvus call of kb-assets goes through these three modules.

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
from typing import TYPE_CHECKING

from pymilvus import DataType, Function, FunctionType, MilvusClient

if TYPE_CHECKING:
    pass

SCHEMA_VERSION = 1
# One analyzer for every language: jieba segments Chinese and keeps English words; lowercase makes
# "Backups" match "backups" (measured: the standard tokenizer finds nothing in Chinese).
BM25_ANALYZER = {"tokenizer": "jieba", "filter": ["lowercase"]}
CONTENT_MAX_CHARS = 8192
SCALAR_FIELDS = {
    "knowledge_base_id": 256,
    "document_id": 64,
    "document_version": 64,
    "document_title": 512,
    "source_uri": 2048,
    "section_title": 512,
    "page_label": 32,
    "kind": 16,
    "source_kind": 16,
    "mime": 128,
    "image_key": 512,
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
        schema.add_field(name, DataType.VARCHAR, max_length=length, is_partition_key=(name == "knowledge_base_id"))
    for name in INT_FIELDS:
        schema.add_field(name, DataType.INT32)
    schema.add_field(
        "content",
        DataType.VARCHAR,
        max_length=CONTENT_MAX_CHARS * 4,
        enable_analyzer=True,
        analyzer_params=BM25_ANALYZER,
    )
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=spec.dimension)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(
        Function(
            name="content_bm25",
            function_type=FunctionType.BM25,
            input_field_names=["content"],
            output_field_names=["sparse"],
        )
    )
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
        client.alter_collection_properties(
            name,
            properties={
                SPEC_PROPERTY: json.dumps(
                    {
                        "model": spec.model,
                        "dimension": spec.dimension,
                        "languages": list(spec.languages),
                        "schemaVersion": SCHEMA_VERSION,
                    }
                )
            },
        )
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
