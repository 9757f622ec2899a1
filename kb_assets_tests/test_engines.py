"""The vector index on each Milvus engine kb-assets runs on (``stores/vectors.py`` is the one adapter): the
embedded engine (Milvus Lite 2.5.1's C++ core, under KB_HOME) and a Milvus server (Milvus Lite 3.2.2 served
as one: aliases, collection properties, partition keys). The same calls publish, swap and roll back, read the
spec back, filter by knowledge base and pages, repair a half-made collection; on real engines.

``KB_TEST_MILVUS_URI`` adds another server to the publication test (its collections are plain ones: any
Milvus 2.x holds them). PyPI's ``milvus`` 2.3.5, the one Milvus server that installs here, predates sparse
vectors and the BM25 function, so it holds no kb-assets collection; docs/decisions.md says what it ran."""

from __future__ import annotations

import os
import uuid

import pytest

from kb_assets.pipeline import migration
from kb_assets.pipeline.steps.publish import publish_if_unpublished
from kb_assets.services import milvus_client as connect
from kb_assets.stores.catalog import Catalog
from kb_assets.stores.entities import (
    QUERY_LIMIT,
    count_entities,
    document_ids,
    insert,
    stored_entities,
    sync_documents,
    version_counts,
)
from kb_assets.stores.vectors import (
    EMBEDDED,
    INT_FIELDS,
    SCALAR_FIELDS,
    SCHEMA_VERSION,
    SERVER,
    EmbeddingSpec,
    build_schema,
    collection_spec,
    engine,
    ensure_collection,
    in_filter,
    pages_filter,
    published_collection,
    spec_record,
)
from kb_assets_tests.databases import database_on
from kb_assets_tests.milvus_servers import lite3_server
from kb_assets_tests.test_publish_slices import CountingClient

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with lite3_server(tmp_path_factory.mktemp("milvus-server") / "data") as process:
        yield process


@pytest.fixture(scope="module")
def own_catalog(catalog):
    """A catalog database of its own: the collections recorded here never reach the session's."""
    own = Catalog(database_on(catalog.dsn, "engines_test", fresh=True))
    own.ensure_schema()
    return own


@pytest.fixture(params=["embedded", "server"])
def client(request, milvus_client, server):
    return milvus_client if request.param == "embedded" else connect(server.uri)


@pytest.fixture(params=["embedded", "server", "KB_TEST_MILVUS_URI"])
def any_client(request, milvus_client, server):
    if request.param == "KB_TEST_MILVUS_URI":
        if not os.environ.get("KB_TEST_MILVUS_URI"):
            pytest.skip("KB_TEST_MILVUS_URI names no other Milvus server")
        return connect(os.environ["KB_TEST_MILVUS_URI"])
    return milvus_client if request.param == "embedded" else connect(server.uri)


def _spec(name: str) -> EmbeddingSpec:
    return EmbeddingSpec(
        model="test-engines", dimension=8, languages=("en",), short_name=f"{name}_{uuid.uuid4().hex[:6]}"
    )


def _entity(chunk: int, document: str = "doc-1", kb: str = "kb-a", page: int = 0, version: str = "v1") -> dict:
    entity = {name: "" for name in SCALAR_FIELDS} | {name: 0 for name in INT_FIELDS}
    entity.update(
        chunk_id=f"{document}-{chunk}",
        document_id=document,
        document_version=version,
        knowledge_base_id=kb,
        content=f"chunk {chunk} of {document} about pumps",
        page_index=page,
        page_end=page,
        chunk_index=chunk,
        dense=[1.0, chunk / 10] + [0.1] * 6,
    )
    return entity


def _recorded(catalog: Catalog, client, spec: EmbeddingSpec, alias: str) -> str:
    """A plain collection of the spec's name with three entities, recorded as building (as an ingest
    records the spec's collection): publication needs nothing of the kb-assets schema."""
    name = spec.collection_name()
    client.create_collection(name, dimension=spec.dimension)
    client.insert(name, [{"id": i, "vector": [float(i + 1)] * spec.dimension} for i in range(3)])
    with catalog.connect() as conn:
        catalog.record_collection(
            conn,
            name=name,
            alias=alias,
            schema_version=SCHEMA_VERSION,
            model=spec.model,
            dimension=spec.dimension,
            languages=list(spec.languages),
            state="building",
        )
    return name


def test_each_engine_is_told_apart_by_what_it_reports(milvus_client, server):
    assert engine(milvus_client) is EMBEDDED and not EMBEDDED.aliases
    assert engine(connect(server.uri)) is SERVER and SERVER.aliases


def test_a_collection_is_published_swapped_and_rolled_back_on_each_engine(any_client, own_catalog):
    client = any_client
    alias = f"kb_test_{uuid.uuid4().hex[:8]}"
    first = _recorded(own_catalog, client, _spec("first"), alias)
    second = _recorded(own_catalog, client, _spec("second"), alias)
    try:
        assert published_collection(client, own_catalog, alias) is None
        assert publish_if_unpublished(client, own_catalog, alias, first) == first
        assert published_collection(client, own_catalog, alias) == first

        swapped = migration.swap(own_catalog, client, alias, second)
        assert (swapped.previous, swapped.published) == (first, second)
        assert published_collection(client, own_catalog, alias) == second
        states = {c.name: c.state for c in own_catalog.collections()}
        assert (states[first], states[second]) == ("retired", "published")
        if engine(client).aliases:  # a server: the alias moved, atomically
            assert client.describe_alias(alias)["collection_name"] == second
        else:  # the embedded engine: the catalog names it; the retired one left memory, its rows kept
            assert str(client.get_load_state(first)["state"]) == "NotLoad"
            assert count_entities(client, first) == 3

        rolled = migration.rollback(own_catalog, client, alias)
        assert (rolled.previous, rolled.published) == (second, first)
        assert published_collection(client, own_catalog, alias) == first
        assert {c.name: c.state for c in own_catalog.collections()}[second] == "retired"
    finally:
        if engine(client).aliases and alias in client.list_aliases().get("aliases", []):
            client.drop_alias(alias)
        for name in (first, second):
            client.drop_collection(name)


def test_the_spec_filters_and_scope_hold_on_each_engine(client):
    spec = _spec("scope")
    name = ensure_collection(client, spec, "hnsw")
    try:
        insert(
            client,
            name,
            [_entity(i, "doc-1", "kb-a", page=i) for i in range(4)]
            + [_entity(i, 'doc-"q\\uo"-中文', "kb-b", page=i) for i in range(3)],
        )
        assert collection_spec(client, name) == spec_record(spec)
        fields = {f["name"]: f for f in client.describe_collection(name)["fields"]}
        assert bool(fields["knowledge_base_id"].get("is_partition_key")) is engine(client).partition_key

        def chunks(flt: str) -> list[str]:
            return sorted(r["chunk_id"] for r in client.query(name, filter=flt, output_fields=["chunk_id"], limit=100))

        assert chunks(in_filter("knowledge_base_id", ["kb-b"])) == [f'doc-"q\\uo"-中文-{i}' for i in range(3)]
        assert chunks(pages_filter({"doc-1": [(1, 2)]})) == ["doc-1-1", "doc-1-2"]
        assert document_ids(client, name, excluding=["doc-1"]) == {'doc-"q\\uo"-中文'}  # ``not in``
        hits = client.search(
            name, [_entity(2)["dense"]], anns_field="dense", limit=2, filter=in_filter("knowledge_base_id", ["kb-a"])
        )
        assert hits[0][0].id == "doc-1-2"
        words = client.search(
            name, ["pumps"], anns_field="sparse", limit=10, filter=in_filter("knowledge_base_id", ["kb-b"])
        )
        assert len(words[0]) == 3
    finally:
        client.drop_collection(name)


def test_a_collection_whose_create_failed_halfway_gets_its_indexes(client):
    """A refused index left the collection without it, and a second ensure_collection took it as made."""
    spec = _spec("halfway")
    name = spec.collection_name()
    client.create_collection(name, schema=build_schema(client, spec))  # no index at all
    try:
        assert ensure_collection(client, spec, "hnsw") == name
        assert {"dense", "sparse"} <= set(client.list_indexes(name))
        dense = client.describe_index(name, "dense")["index_type"]
        assert dense == ("HNSW" if engine(client).dense_index is None else "FLAT")
        insert(client, name, [_entity(1)])
        assert count_entities(client, name) == 1
    finally:
        client.drop_collection(name)


def test_documents_are_synced_exactly_and_new_entities_are_inserted_where_upserts_scan(client):
    """``sync_documents`` leaves each document holding exactly its entities. On the embedded engine an upsert
    deletes its ids first by reading every stored row (its SQLite table has no index on the key), so the
    entities it does not hold yet are inserted and only changed ones upserted; a server upserts them all."""
    name = ensure_collection(client, _spec("sync"), "hnsw")
    counting = CountingClient(client)
    inserts = engine(client).insert_new
    try:
        first = {"doc-1": [_entity(i, "doc-1") for i in range(3)], "doc-2": [_entity(i, "doc-2") for i in range(2)]}
        counts = sync_documents(counting, name, first)
        assert counts == {
            "doc-1": {"written": 3, "deleted": 0, "kept": 0},
            "doc-2": {"written": 2, "deleted": 0, "kept": 0},
        }
        assert counting.calls == ({"query": 1, "insert": 1} if inserts else {"query": 1, "upsert": 1})

        counting.calls.clear()
        changed = {**_entity(1, "doc-1"), "content": "chunk 1 of doc-1 about valves"}
        second = {"doc-1": [_entity(0, "doc-1"), changed, _entity(3, "doc-1")], "doc-2": first["doc-2"]}
        counts = sync_documents(counting, name, second)
        assert counts["doc-1"] == {"written": 2, "deleted": 1, "kept": 1}  # chunk 1 changed, 3 new, 2 gone
        assert counts["doc-2"] == {"written": 0, "deleted": 0, "kept": 2}
        writes = {"insert": 1, "upsert": 1} if inserts else {"upsert": 1}
        assert counting.calls == {"query": 1, **writes, "delete": 1}  # one read, the writes, chunk 2 deleted

        held = stored_entities(client, name, ["doc-1", "doc-2"], with_vectors=False)
        assert sorted(held) == ["doc-1-0", "doc-1-1", "doc-1-3", "doc-2-0", "doc-2-1"]
        assert held["doc-1-1"]["content"] == "chunk 1 of doc-1 about valves"
        assert count_entities(client, name) == 5  # no chunk id held twice
    finally:
        client.drop_collection(name)


def test_reads_past_the_query_limit_return_every_entity(milvus_client):
    """The embedded engine cuts a query without a limit at 16,383 rows, silently; reads of a document's
    entities go in windows of chunk_index past the limit."""
    name = ensure_collection(milvus_client, _spec("many"), "hnsw")
    try:
        rows = [_entity(i, "doc-big", version="v1" if i % 3 else "v2") for i in range(QUERY_LIMIT + 200)]
        rows += [_entity(i, "doc-small") for i in range(5)]
        for start in range(0, len(rows), 2000):
            insert(milvus_client, name, rows[start : start + 2000])
        assert len(stored_entities(milvus_client, name, ["doc-big", "doc-small"], with_vectors=False)) == len(rows)
        big = version_counts(milvus_client, name, "doc-big")
        assert big == {
            "v1": sum(1 for r in rows[: QUERY_LIMIT + 200] if r["document_version"] == "v1"),
            "v2": big["v2"],
        }
        assert sum(big.values()) == QUERY_LIMIT + 200
    finally:
        milvus_client.drop_collection(name)
