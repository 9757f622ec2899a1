"""The vector index: collections, their publication and filters (entities.py: one document's entities;
vector_search.py: searches). Every Milvus call of kb-assets goes through these three modules, and this
one alone knows which Milvus engine answers (``Engine``) and what differs between them.

Versioned collections of chunks, one of them published under an alias. One collection holds every
knowledge base; its name is derived from the schema version and the embedding spec, and the spec is
stored with it. Filters are built only from escaped literals (``milvus_string``), never from request
text.

The engines (``engine``, asked once per client):

- a Milvus server (standalone or distributed; Milvus Lite 3.x answers the same API): the alias
  publishes (``alter_alias`` swaps atomically), ``knowledge_base_id`` is the partition key, the spec is a
  collection property, the dense index is ``KB_MILVUS_DENSE_INDEX``;
- the embedded engine, Milvus Lite 2.5.1's C++ core (``services.milvus_engine``): it has no aliases, so
  the catalog names the published collection (``collection_versions.state``, swapped in one Postgres
  transaction); it refuses every filter once a partition key follows the primary key, so
  ``knowledge_base_id`` is a plain field (one in-memory segment: a key would prune nothing); it keeps no
  collection properties, so the spec is read from the schema's description (written on every engine);
  of its indexes only FLAT stays exact past 100,000 rows (IVF_FLAT and AUTOINDEX then switch to an
  index of the engine's own that ignores their parameters: recall@50 0.13 measured), so its dense
  index is FLAT; a retired collection is released (its rows leave memory; a search loads it again); an
  upsert there deletes its ids first, reading every stored row twice (its SQLite table has no index on
  the key), so entities it does not hold yet are inserted instead (``entities.sync_documents``).

Every function takes the ``MilvusClient`` first; ``timeout`` (seconds, None: the client's) bounds the
call where the retrieval service needs a deadline.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, NotRequired, TypedDict, cast

from pymilvus import DataType, Function, FunctionType, MilvusClient

if TYPE_CHECKING:
    from kb_assets.stores.catalog import Catalog

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
# The dense index of a new collection on a server (KB_MILVUS_DENSE_INDEX), COSINE: HNSW keeps each vector
# and its graph links in memory (~1.7 KB at 384-d); HNSW_SQ and IVF_SQ8 keep 8-bit codes (~4x less, a
# little recall lost); DISKANN keeps the graph and vectors on the query node's SSD (Milvus distributed
# with queryNode.disk enabled); FLAT is an exact scan (the embedded engine's).
DENSE_INDEXES = {
    "flat": ("FLAT", {}),
    "hnsw": ("HNSW", {"M": 16, "efConstruction": 200}),
    "hnsw_sq": ("HNSW_SQ", {"M": 16, "efConstruction": 200, "sq_type": "SQ8"}),
    "ivf_sq8": ("IVF_SQ8", {"nlist": 1024}),
    "diskann": ("DISKANN", {}),
}
OUTPUT_FIELDS = ["chunk_id", *SCALAR_FIELDS, *INT_FIELDS, "content"]


@dataclass(frozen=True)
class Engine:
    """What kb-assets uses that differs between the Milvus engines it runs on."""

    name: str
    aliases: bool  # the alias publishes; else the catalog names the published collection
    properties: bool  # the spec is also a collection property; else the schema description alone holds it
    partition_key: bool  # knowledge_base_id is the partition key; else a plain field
    dense_index: str | None  # the one dense index it gets; None: KB_MILVUS_DENSE_INDEX
    release_retired: bool  # a retired collection is released (its rows held in memory otherwise)
    insert_new: bool = False  # entities not stored yet are inserted, not upserted (its upsert scans every row)
    measured_chunks: int | None = None  # the largest collection its search was measured at; None: no limit known


SERVER = Engine(
    "Milvus server", aliases=True, properties=True, partition_key=True, dense_index=None, release_retired=False
)
EMBEDDED = Engine(
    "embedded Milvus Lite 2.5.1",
    aliases=False,
    properties=False,
    partition_key=False,
    dense_index="flat",
    release_retired=True,
    insert_new=True,
    measured_chunks=503_602,  # docs/decisions.md, "Search at half a million chunks (issue 51)": measured end to end
)


def size_note(engine: Engine, chunks: int) -> str | None:
    """What to tell a user whose collection has grown past the range its engine was measured at."""
    if engine.measured_chunks is None or chunks <= engine.measured_chunks:
        return None
    return (
        f"{chunks:,} chunks is past the {engine.name}'s measured range ({engine.measured_chunks:,} chunks): "
        "search may slow down; point KB_MILVUS_URI at a Milvus server (deploy/README.md)"
    )


_ENGINES: weakref.WeakKeyDictionary[MilvusClient, Engine] = weakref.WeakKeyDictionary()
_ENGINES_LOCK = threading.Lock()


def engine(client: MilvusClient, timeout: float | None = None) -> Engine:
    """The engine behind the client (one call per client): the embedded engine reports no build (a Milvus
    server its version tags, Milvus Lite 3.x ``milvus_lite``)."""
    with _ENGINES_LOCK:
        known = _ENGINES.get(client)
    if known is None:
        built = client.get_server_version(detail=True, timeout=timeout).get("version")
        known = SERVER if built else EMBEDDED
        with _ENGINES_LOCK:
            _ENGINES[client] = known
    return known


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
    schema = client.create_schema(auto_id=False, description=json.dumps(spec_record(spec)))
    schema.add_field("chunk_id", DataType.VARCHAR, is_primary=True, max_length=64)
    partition_key = engine(client).partition_key
    for name, length in SCALAR_FIELDS.items():
        schema.add_field(
            name, DataType.VARCHAR, max_length=length, is_partition_key=partition_key and name == "knowledge_base_id"
        )
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


class SpecRecord(TypedDict):
    """The embedding spec as stored with a collection (JSON: ``spec_record`` writes it, ``collection_spec`` reads it
    back); readers take a record without ``languages`` or ``schemaVersion`` as English, of this schema version."""

    model: str
    dimension: int
    languages: NotRequired[list[str]]
    schemaVersion: NotRequired[int]


def spec_record(spec: EmbeddingSpec) -> SpecRecord:
    """What is stored with a collection of the spec (``collection_spec`` reads it back)."""
    return {
        "model": spec.model,
        "dimension": spec.dimension,
        "languages": list(spec.languages),
        "schemaVersion": SCHEMA_VERSION,
    }


def ensure_collection(
    client: MilvusClient, spec: EmbeddingSpec, dense_index: str = "hnsw", name: str | None = None
) -> str:
    """Create the collection of a spec (``name``: under that name, not the spec's) if missing (dense
    ``DENSE_INDEXES[dense_index]``/COSINE, or the engine's own dense index; sparse BM25) and load it. An
    existing collection keeps the index it was built with; one whose create failed halfway (a refused
    index leaves the collection without it) gets its missing indexes."""
    name = name or spec.collection_name()
    found = engine(client)
    index_type, params = DENSE_INDEXES[found.dense_index or dense_index]
    indexes = {"dense": (index_type, "COSINE", params), "sparse": ("SPARSE_INVERTED_INDEX", "BM25", {})}
    if client.has_collection(name):
        indexes = {field: index for field, index in indexes.items() if field not in client.list_indexes(name)}
    index_params = client.prepare_index_params()
    for field, (kind, metric, index_options) in indexes.items():
        index_params.add_index(field, index_type=kind, metric_type=metric, params=index_options)
    if not client.has_collection(name):
        client.create_collection(name, schema=build_schema(client, spec), index_params=index_params)
        if found.properties:  # Milvus Lite 3.x keeps no schema description; its properties persist
            client.alter_collection_properties(name, properties={SPEC_PROPERTY: json.dumps(spec_record(spec))})
    elif indexes:
        client.create_index(name, index_params)
    client.load_collection(name)
    return name


def published_collection(
    client: MilvusClient, catalog: Catalog, alias: str, timeout: float | None = None
) -> str | None:
    """The collection published under the alias, or None when nothing is: the alias's target on a
    server, the catalog's published collection on the embedded engine."""
    if not engine(client, timeout).aliases:
        return catalog.published_collection(alias)
    if alias not in client.list_aliases(timeout=timeout).get("aliases", []):
        return None
    return client.describe_alias(alias, timeout=timeout)["collection_name"]


def publish(client: MilvusClient, catalog: Catalog, alias: str, collection: str) -> None:
    """Publish a collection under the alias, atomically: ``alter_alias`` on a server (the catalog's
    states are the caller's to record), one catalog transaction on the embedded engine (the collection
    must be recorded)."""
    if not engine(client).aliases:
        catalog.publish_collection(alias, collection)
        return
    current = published_collection(client, catalog, alias)
    if current is None:
        client.create_alias(collection, alias)
    elif current != collection:
        client.alter_alias(collection, alias)


def retire(client: MilvusClient, collection: str) -> None:
    """A collection that stopped being published: kept for rollback, and out of memory where the engine
    holds every row in it."""
    if engine(client).release_retired and client.has_collection(collection):
        client.release_collection(collection)


def collection_exists(client: MilvusClient, collection: str) -> bool:
    return client.has_collection(collection)


def load(client: MilvusClient, collection: str, timeout: float | None = None) -> None:
    """Load the collection into memory for search (again after a Milvus restart; a no-op when loaded)."""
    client.load_collection(collection, timeout=timeout)


def flush(client: MilvusClient, collection: str) -> None:
    """Seal the write-ahead log into indexed segments (searches after a bulk write get ~10x faster)."""
    client.flush(collection)


def collection_spec(client: MilvusClient, collection: str, timeout: float | None = None) -> SpecRecord:
    """The embedding spec stored with a collection (model, dimension, languages, schemaVersion): its
    property where the engine keeps properties, else its schema description."""
    described = client.describe_collection(collection, timeout=timeout)
    properties = described.get("properties") or {}
    if SPEC_PROPERTY in properties:
        return json.loads(properties[SPEC_PROPERTY])
    try:
        spec = json.loads(described.get("description") or "")
    except ValueError:
        spec = None
    if not isinstance(spec, dict) or "model" not in spec:
        raise RuntimeError(f"collection {collection} carries no embedding spec ({SPEC_PROPERTY} or its description)")
    return cast(SpecRecord, spec)


def milvus_string(value: str) -> str:
    """A Milvus filter string literal; values from requests never become expression syntax.

    Quotes and backslashes are escaped (JSON rules, which Milvus's parser shares); control characters
    have no escape Milvus accepts, so they are refused.
    """
    value = str(value)
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError(f"filter value {value!r} contains control characters")
    return json.dumps(value, ensure_ascii=False)


def in_filter(field: str, values: list[str], negated: bool = False) -> str:
    """The entities whose field is one of the values (``negated``: none of them; ``not in``, as every
    engine parses it: the embedded one refuses ``not (... in ...)``)."""
    if field not in SCALAR_FIELDS and field != "chunk_id":
        raise ValueError(f"not a filterable field: {field}")
    return f"{field} {'not in' if negated else 'in'} [{', '.join(milvus_string(v) for v in values)}]"


def pages_filter(ranges: dict[str, list[tuple[int, int]]]) -> str:
    """Chunks of these documents that touch these page ranges: {document_id: [(first, last), ...]}."""
    clauses = []
    for document_id, spans in ranges.items():
        touches = " or ".join(f"(page_index <= {int(last)} and page_end >= {int(first)})" for first, last in spans)
        clauses.append(f"(document_id == {milvus_string(document_id)} and ({touches}))")
    if not clauses:
        raise ValueError("pages_filter needs at least one page range")
    return " or ".join(clauses)
