"""kb-assets verify finds store inconsistencies per document and repairs what it can."""

from __future__ import annotations

import pytest

from kb_assets.pipeline.verify import verify
from kb_assets.stores.entities import count_entities, delete_document
from kb_assets.stores.vectors import milvus_string

pytestmark = pytest.mark.slow


def test_verify_reports_consistent_stores_after_ingest(handbook, catalog, lake, milvus_client, settings):
    report = verify(catalog, lake, milvus_client, settings.alias)
    assert report.consistent, report.problems


def test_verify_repairs_missing_entities_and_orphans(handbook, catalog, lake, milvus_client, settings):
    collection = handbook.published.collection
    doc = next(d for d in catalog.list_documents(["handbook"]) if d.source_path == "runbook.html")
    flt = f"document_id == {milvus_string(doc.document_id)}"
    expected = lake.read("chunks", doc.document_id).height
    delete_document(milvus_client, collection, doc.document_id)
    orphan = {
        "chunk_id": "orphan-chunk",
        "document_id": "doc-unknown",
        "knowledge_base_id": "handbook",
        "content": "stray entity",
        "dense": [0.0] * 383 + [1.0],
    }
    milvus_client.insert(
        collection,
        [
            {
                **orphan,
                **{
                    k: ""
                    for k in (
                        "document_version",
                        "document_title",
                        "source_uri",
                        "section_title",
                        "page_label",
                        "kind",
                        "source_kind",
                        "mime",
                        "image_key",
                    )
                },
                "page_index": 0,
                "page_end": 0,
                "chunk_index": 0,
            }
        ],
    )

    found = verify(catalog, lake, milvus_client, settings.alias)
    assert not found.consistent
    assert {p.document_id for p in found.problems} == {doc.document_id, "doc-unknown"}

    from kb_assets.stores.models import load_model

    repaired = verify(catalog, lake, milvus_client, settings.alias, repair=True, load_model=load_model)
    assert all(p.repaired for p in repaired.problems)
    assert count_entities(milvus_client, collection, flt) == expected
    assert count_entities(milvus_client, collection, 'document_id == "doc-unknown"') == 0
    assert verify(catalog, lake, milvus_client, settings.alias).consistent


def test_a_released_collection_is_loaded_on_demand(handbook, milvus_client):
    """Milvus Lite brings collections back released after a restart; counting, reading and purging load them."""
    collection = handbook.published.collection
    before = count_entities(milvus_client, collection)
    milvus_client.release_collection(collection)
    assert count_entities(milvus_client, collection) == before > 0


@pytest.fixture
def searcher(settings):
    """A searcher of the Milvus Lite server that runs now (earlier tests kill and restart it)."""
    from kb_assets.service.api import make_searcher

    searcher = make_searcher(settings)
    yield searcher
    searcher.close()


def test_verify_repairs_bm25_statistics_from_the_lake(handbook, catalog, lake, milvus_client, settings, searcher):
    """Statistics missing (a failed document's last good version is never re-published, so the next run
    would not write them) or torn are a problem; repair rewrites them from the serving chunk rows."""
    from kb_assets.lib.lexical import terms
    from kb_assets.retrieval.request import SearchRequest

    missing, torn = [d for d in catalog.list_documents(["handbook"]) if (d.chunk_count or 0) > 1][:2]
    chunks = lake.read("chunks", missing.document_id)
    asked = sorted(set(terms(chunks["content"][0])))[:8]
    kept_before = {d.document_id: catalog.kept_term_chunks(d.document_id) for d in (missing, torn)}
    statistics_before = catalog.term_statistics(asked, ["handbook"])
    request = SearchRequest(chunks["content"][0][:200], ["handbook"], limit=50, strategy="hybrid")
    assert not searcher.search(request).warnings
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute("DELETE FROM chunk_terms WHERE document_id = %s", (missing.document_id,))
        cur.execute("UPDATE documents SET term_count = NULL WHERE document_id = %s", (missing.document_id,))
        cur.execute("DELETE FROM chunk_terms WHERE chunk_id = %s", (sorted(kept_before[torn.document_id])[0],))
    try:
        assert any("BM25 statistics not kept" in w for w in searcher.search(request).warnings)
        found = verify(catalog, lake, milvus_client, settings.alias)
        assert not found.consistent
        problems = {p.document_id: p.problem for p in found.problems}
        assert problems.keys() == {missing.document_id, torn.document_id, None}
        assert "BM25 term counts of knowledge base handbook" in problems[None]  # its chunk rows went, not its counts
        assert "no BM25 statistics kept" in problems[missing.document_id]
        assert f"kept for {torn.chunk_count - 1} of its {torn.chunk_count} chunks" in problems[torn.document_id]
    finally:
        repaired = verify(catalog, lake, milvus_client, settings.alias, repair=True)
    assert all(p.repaired for p in repaired.problems)
    assert verify(catalog, lake, milvus_client, settings.alias).consistent
    assert {d: catalog.kept_term_chunks(d) for d in kept_before} == kept_before
    assert catalog.term_statistics(asked, ["handbook"]) == statistics_before
    assert not searcher.search(request).warnings
