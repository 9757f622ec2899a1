"""A refused or failed document serves nothing it did not publish: one that never published keeps no page
or PageIndex rows (and is published once the refusal is lifted), a failed newer version serves its last
good pages only while the catalog holds them, and a page's text is bounded (``truncated``)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from kb_assets.stores.catalog.reads import MAX_PAGE_CHARS

pytestmark = pytest.mark.slow

LOCAL = ("127.0.0.1", 50000)
MANUAL = "# Pump manual\n\n" + "\n\n".join(
    f"## Pump {n}\n\nPump {n} is primed with {n} litres of water before the valve {n} opens; its seal is checked "
    f"every {n + 2} weeks by the plant team, who log the pressure reading in the maintenance book."
    for n in range(1, 25)
)


@pytest.fixture(scope="module")
def client(settings):
    from kb_assets.service.api import create_app, make_searcher

    searcher = make_searcher(settings)
    yield TestClient(create_app(replace(settings, api_keys=""), searcher), client=LOCAL, base_url="http://localhost")
    searcher.close()


def the_document(catalog, kb: str):
    (doc,) = catalog.list_documents([kb])
    return doc


def test_document_refused_for_its_chunk_count_keeps_no_pages_and_serves_none(tmp_path, settings, catalog, client):
    from kb_assets.launch.ingest import ingest

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "pumps.md").write_text(MANUAL)
    report = ingest([folder], "refused-chunks", replace(settings, max_chunks_per_document=2))
    doc = the_document(catalog, "refused-chunks")
    assert doc.status == "failed" and "KB_MAX_CHUNKS_PER_DOCUMENT" in report.failures[0].reason
    assert catalog.read_pages(doc.document_id) == [] and catalog.read_nodes(doc.document_id) == []
    answer = client.get(f"/v1/documents/{doc.document_id}/pages/0")
    assert answer.status_code == 404
    assert "has no published version (failed: " in answer.json()["detail"]
    assert "KB_MAX_CHUNKS_PER_DOCUMENT" in answer.json()["detail"]

    # the budget lifted: the unchanged file is retried when asked (else it is reported as still failing)
    assert not ingest([folder], "refused-chunks", settings, retry_failed=True).failures
    doc = the_document(catalog, "refused-chunks")
    assert doc.status == "published" and doc.published_version == doc.version
    page = client.get(f"/v1/documents/{doc.document_id}/pages/0").json()
    assert "Pump 1 is primed" in page["text"] and page["truncated"] is False and page["version"] == doc.version


def test_failed_newer_version_serves_its_last_good_pages_only_while_they_are_kept(tmp_path, settings, catalog, client):
    from kb_assets.launch.ingest import ingest

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "pumps.md").write_text("# Pump 1\n\nPump 1 is primed with one litre of water.\n")
    assert not ingest([folder], "newer-fails", settings).failures
    first = the_document(catalog, "newer-fails")

    # refused at raw_files for its size: the pages of the published version are still what the catalog holds
    (folder / "pumps.md").write_text(MANUAL)
    small_files = replace(settings, parse=replace(settings.parse, max_file_bytes=1000))
    assert "KB_PARSE_MAX_FILE_BYTES" in ingest([folder], "newer-fails", small_files).failures[0].reason
    page = client.get(f"/v1/documents/{first.document_id}/pages/0")
    assert page.status_code == 200 and page.json()["version"] == first.version
    assert "one litre of water" in page.json()["text"]

    # refused at chunks: its pages replaced the published version's, and are not served
    assert ingest([folder], "newer-fails", replace(settings, max_chunks_per_document=2), retry_failed=True).failures
    doc = the_document(catalog, "newer-fails")
    assert doc.status == "failed" and doc.published_version == first.version != doc.version
    assert {p["version"] for p in catalog.read_pages(doc.document_id)} == {doc.version}
    answer = client.get(f"/v1/documents/{doc.document_id}/pages/0")
    assert answer.status_code == 404
    detail = answer.json()["detail"]
    assert f"version {doc.version[:12]}, which is not published (failed: " in detail
    assert f"published version {first.version[:12]} are no longer kept" in detail


def test_a_long_page_is_cut_with_a_flag_in_the_page_and_the_lineage(tmp_path, settings, catalog, lake, client):
    from kb_assets.launch.ingest import ingest

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "pumps.md").write_text("# Pump 1\n\nPump 1 is primed with one litre of water.\n")
    assert not ingest([folder], "long-page", settings).failures
    doc = the_document(catalog, "long-page")
    long_text = catalog.read_pages(doc.document_id)[0]["text"] + "\n\n" + "x" * (MAX_PAGE_CHARS + 50_000)
    with catalog.connect() as conn, conn.cursor() as cur:  # a page as long as a 30 MB log's
        cur.execute(
            "UPDATE pages SET text = %s WHERE document_id = %s AND page_index = 0", (long_text, doc.document_id)
        )

    page = client.get(f"/v1/documents/{doc.document_id}/pages/0").json()
    assert page["truncated"] is True and page["textChars"] == len(long_text)
    assert page["text"] == long_text[:MAX_PAGE_CHARS]
    chunk_id = lake.read("chunks", doc.document_id)["chunk_id"][0]
    lineage = client.get(f"/v1/chunks/{chunk_id}/lineage").json()
    assert lineage["pages"][0]["truncated"] is True and len(lineage["pages"][0]["text"]) == MAX_PAGE_CHARS
    assert lineage["verification"]["contentFoundInPages"]  # verified against the whole text
