"""The dense index of large collections (KB_MILVUS_DENSE_INDEX): on a Milvus server (Milvus Lite 3.2.2
served as one) quantized indexes build and answer dense searches with their own search parameters; the
embedded engine builds FLAT whatever is configured (its other indexes lose recall past 100,000 rows)."""

from __future__ import annotations

import math

import pytest

from kb_assets.settings import DENSE_INDEXES, Settings
from kb_assets.stores import vector_search, vectors
from kb_assets.stores.entities import insert


def test_every_dense_index_setting_has_build_and_search_parameters():
    assert set(vectors.DENSE_INDEXES) == set(DENSE_INDEXES)
    assert Settings.from_env({}).milvus_dense_index == "hnsw"
    assert Settings.from_env({"KB_MILVUS_DENSE_INDEX": "IVF_SQ8"}).milvus_dense_index == "ivf_sq8"
    with pytest.raises(ValueError, match="KB_MILVUS_DENSE_INDEX='ivf_pq': expected one of hnsw, hnsw_sq"):
        Settings.from_env({"KB_MILVUS_DENSE_INDEX": "ivf_pq"})
    for name, (index_type, _) in vectors.DENSE_INDEXES.items():
        params = vector_search.dense_search_params(index_type, 10)
        assert params == {} if index_type == "FLAT" else params, name  # an exact scan takes no parameter


@pytest.fixture(scope="module")
def server_client(tmp_path_factory):
    from kb_assets.services import milvus_client
    from kb_assets_tests.milvus_servers import lite3_server

    with lite3_server(tmp_path_factory.mktemp("milvus-server") / "data") as server:
        yield milvus_client(server.uri)


@pytest.mark.services
@pytest.mark.parametrize(
    ("engine", "dense_index", "built"),
    [("server", "hnsw_sq", "HNSW_SQ"), ("server", "ivf_sq8", "IVF_SQ8"), ("embedded", "hnsw", "FLAT")],
)
def test_a_dense_index_builds_and_finds_the_nearest_chunk(request, engine, dense_index, built):
    client = request.getfixturevalue("milvus_client" if engine == "embedded" else "server_client")
    spec = vectors.EmbeddingSpec(model="test-index", dimension=8, languages=("en",), short_name=f"idx_{dense_index}")
    collection = vectors.ensure_collection(client, spec, dense_index)
    try:
        entities = []
        for i in range(40):
            angle = i * math.pi / 40
            entity = {
                "chunk_id": f"c{i}",
                "content": f"chunk {i}",
                "dense": [math.cos(angle), math.sin(angle)] + [0.1] * 6,
            }
            entity.update({name: "" for name in vectors.SCALAR_FIELDS} | {"knowledge_base_id": "index-test"})
            entity.update({name: 0 for name in vectors.INT_FIELDS})
            entities.append(entity)
        insert(client, collection, entities)
        vectors.flush(client, collection)

        assert vector_search.dense_index_type(client, collection) == built
        hits = vector_search.search_dense(
            client, collection, entities[17]["dense"], 'knowledge_base_id == "index-test"', 3
        )
        assert hits[0].id == "c17" and {h.id for h in hits} <= {"c16", "c17", "c18", "c15", "c19"}
    finally:
        client.drop_collection(collection)
        vector_search.dense_index_type.cache_clear()
