"""Changing the embedding spec builds a new collection from the lake, validates it and swaps the alias;
rollback re-publishes the previous one. The second spec is the real MiniLM model truncated to 256-d."""

from __future__ import annotations

import pytest

from kb_assets.stores.vectors import published_collection
from kb_assets.stores.vectors import count_entities
from kb_assets.retrieval.search import SearchRequest

pytestmark = pytest.mark.slow


def test_spec_change_migrates_validates_swaps_and_rolls_back(handbook, catalog, lake, milvus_client, monkeypatch):
    from kb_assets.migration import migrate, rollback
    from kb_assets.retrieval.api import make_searcher
    from kb_assets.settings import Settings
    from kb_assets.stores.models import embedding_spec, load_model

    before = published_collection(milvus_client, "kb_chunks")
    before_count = count_entities(milvus_client, before)
    monkeypatch.setenv("KB_EMBEDDING_MODEL", "all-MiniLM-L6-v2@256")
    settings = Settings.from_env()
    model = load_model(settings.embedding_model)

    report = migrate(catalog, lake, milvus_client, model, embedding_spec(model), settings.alias, load_model)

    assert report["status"] == "published", report
    assert report["collection"] == "kb_chunks__minilm_l6__d256__v1" == published_collection(milvus_client, "kb_chunks")
    assert report["entities"] == report["chunkRows"] == before_count
    assert report["quality"]["published"] >= 0.8      # chunk search, not the page fallback, was measured
    assert report["quality"]["new"] >= report["quality"]["published"] - 0.05
    answer = make_searcher(settings).search(SearchRequest("How long are backups kept?", ["handbook"], limit=3))
    assert answer.results[0]["sourceUri"].endswith("platform-handbook.pdf")
    assert milvus_client.has_collection(before)                   # kept for rollback
    states = {c["name"]: c["state"] for c in catalog.collections()}
    assert states[before] == "retired" and states[report["collection"]] == "published"
    assert migrate(catalog, lake, milvus_client, model, embedding_spec(model), settings.alias,
                   load_model)["status"] == "unchanged"

    rolled = rollback(catalog, milvus_client, settings.alias)

    assert rolled == {"published": before, "previous": report["collection"]}
    assert published_collection(milvus_client, "kb_chunks") == before
    states = {c["name"]: c["state"] for c in catalog.collections()}
    assert states[before] == "published" and states[report["collection"]] == "retired"
