"""kb-assets verify finds store inconsistencies per document and repairs what it can."""

from __future__ import annotations

import pytest

from kb_assets.stores.vectors import milvus_string
from kb_assets.stores.vectors import count_entities, delete_document
from kb_assets.verify import verify

pytestmark = pytest.mark.slow


def test_verify_reports_consistent_stores_after_ingest(handbook, catalog, lake, milvus_client, settings):
    report = verify(catalog, lake, milvus_client, settings.alias)
    assert report["consistent"], report["problems"]


def test_verify_repairs_missing_entities_and_orphans(handbook, catalog, lake, milvus_client, settings):
    collection = handbook.published["collection"]
    doc = next(d for d in catalog.list_documents(["handbook"]) if d.source_path == "runbook.html")
    flt = f"document_id == {milvus_string(doc.document_id)}"
    expected = lake.read("chunks", doc.document_id).height
    delete_document(milvus_client, collection, doc.document_id)
    orphan = {"chunk_id": "orphan-chunk", "document_id": "doc-unknown", "knowledge_base_id": "handbook",
              "content": "stray entity", "dense": [0.0] * 383 + [1.0]}
    milvus_client.insert(collection, [{**orphan, **{k: "" for k in ("document_version", "document_title",
                                       "source_uri", "section_title", "page_label", "kind", "source_kind", "mime",
                                       "image_key")}, "page_index": 0, "page_end": 0, "chunk_index": 0}])

    found = verify(catalog, lake, milvus_client, settings.alias)
    assert not found["consistent"]
    assert {p["documentId"] for p in found["problems"]} == {doc.document_id, "doc-unknown"}

    from kb_assets.stores.models import load_model

    repaired = verify(catalog, lake, milvus_client, settings.alias, repair=True, load_model=load_model)
    assert all(p["repaired"] for p in repaired["problems"])
    assert count_entities(milvus_client, collection, flt) == expected
    assert count_entities(milvus_client, collection, 'document_id == "doc-unknown"') == 0
    assert verify(catalog, lake, milvus_client, settings.alias)["consistent"]


def test_a_released_collection_is_loaded_on_demand(handbook, milvus_client):
    """Milvus Lite brings collections back released after a restart; counting, reading and purging load them."""
    collection = handbook.published["collection"]
    before = count_entities(milvus_client, collection)
    milvus_client.release_collection(collection)
    assert count_entities(milvus_client, collection) == before > 0
