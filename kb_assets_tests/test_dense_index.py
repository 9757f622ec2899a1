"""The dense index of large collections (KB_MILVUS_DENSE_INDEX): quantized indexes build and answer
dense searches with their own search parameters, on a real Milvus Lite server."""

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
        assert vector_search.dense_search_params(index_type, 10), name


@pytest.mark.parametrize("dense_index", ["hnsw_sq", "ivf_sq8"])
def test_a_quantized_dense_index_builds_and_finds_the_nearest_chunk(milvus_client, dense_index):
    spec = vectors.EmbeddingSpec(model="test-index", dimension=8, languages=("en",), short_name=f"idx_{dense_index}")
    collection = vectors.ensure_collection(milvus_client, spec, dense_index)
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
        insert(milvus_client, collection, entities)
        vectors.flush(milvus_client, collection)

        assert vector_search.dense_index_type(milvus_client, collection) == vectors.DENSE_INDEXES[dense_index][0]
        hits = vector_search.search_dense(
            milvus_client, collection, entities[17]["dense"], 'knowledge_base_id == "index-test"', 3
        )
        assert hits[0].id == "c17" and {h.id for h in hits} <= {"c16", "c17", "c18", "c15", "c19"}
    finally:
        milvus_client.drop_collection(collection)
        vector_search.dense_index_type.cache_clear()
