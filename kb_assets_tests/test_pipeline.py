"""The walking skeleton end to end: the sample corpus through all six assets into Milvus, on real
Postgres, Milvus Lite and the real model."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from kb_assets.pipeline.versions import step_versions
from kb_assets.retrieval.search import SearchRequest
from kb_assets.stores.entities import count_entities
from kb_assets.stores.vectors import published_collection
from kb_assets_tests.corpora import EXAMPLE_CORPUS as CORPUS

pytestmark = pytest.mark.slow

EXPECTED_KINDS = {
    "platform-handbook.pdf": "pdf",
    "onboarding-guide.docx": "docx",
    "quarterly-review.pptx": "pptx",
    "cost-report.xlsx": "xlsx",
    "service-catalog.csv": "csv",
    "runbook.html": "html",
    "architecture.md": "markdown",
    "数据平台简介.md": "markdown",
}


def _docs(catalog, kb="handbook"):
    return {d.source_path: d for d in catalog.list_documents([kb])}


def test_every_format_of_the_corpus_is_published_with_pages(handbook, catalog):
    assert handbook.as_json()["documents"]["failed"] == 0
    docs = _docs(catalog)
    assert set(docs) == set(EXPECTED_KINDS)
    for path, doc in docs.items():
        assert doc.status == "published", (path, doc.error)
        assert doc.source_kind == EXPECTED_KINDS[path]
        pages = catalog.read_pages(doc.document_id)
        assert len(pages) == doc.page_count >= 1
        assert [p["page_index"] for p in pages] == list(range(len(pages)))
        assert all(p["parser"] and p["mode"] for p in pages)


def test_pdf_keeps_physical_pages_and_records_the_offline_parser_mode(handbook, catalog, stores):
    doc = _docs(catalog)["platform-handbook.pdf"]
    pages = catalog.read_pages(doc.document_id)
    assert len(pages) == 6
    assert {p["mode"] for p in pages} == {"docling-native-pdf"}
    assert "Backups are kept for 35 days." in pages[3]["text"]
    store = stores.objects
    assert all(p["image_key"] and store.exists(p["image_key"]) for p in pages)  # page renders stored


def test_milvus_holds_exactly_one_entity_per_chunk_row(handbook, catalog, lake, milvus_client, settings):
    collection = published_collection(milvus_client, catalog, settings.alias)
    assert collection == handbook.published.collection
    chunk_rows = sum(lake.read("chunks", d.document_id).height for d in _docs(catalog).values())
    assert chunk_rows > 0
    assert count_entities(milvus_client, collection, 'knowledge_base_id == "handbook"') == chunk_rows
    for doc in _docs(catalog).values():
        ids = set(lake.read("chunks", doc.document_id)["chunk_id"].to_list())
        rows = milvus_client.query(collection, filter=f'document_id == "{doc.document_id}"', output_fields=["chunk_id"])
        assert {r["chunk_id"] for r in rows} == ids


@pytest.mark.parametrize(
    "query, source_path, page_index",
    [
        ("How long are backups kept?", "platform-handbook.pdf", 3),
        ("When does the on-call rotation change?", "platform-handbook.pdf", 2),
        ("After how many days do cold storage objects move to the archive tier?", "platform-handbook.pdf", 1),
        ("When do new engineers get production read access?", "onboarding-guide.docx", None),
        ("query latency p95 in Q3", "quarterly-review.pptx", 1),
        ("How long does a replica restore take?", "runbook.html", None),
        ("数据备份保留多少天", "数据平台简介.md", None),
    ],
)
def test_known_questions_find_the_expected_document_and_page(searcher, catalog, query, source_path, page_index):
    response = searcher.search(SearchRequest(query, ["handbook"], limit=3))
    assert response.results, response.warnings
    top = response.results[0]
    doc = _docs(catalog)[source_path]
    assert top["documentId"] == doc.document_id, [r["documentTitle"] for r in response.results]
    assert top["retrievalSource"] == "hybrid"
    if page_index is not None:
        assert top["pageIndex"] <= page_index <= top["pageEnd"]
    # the hybrid parts, and the pageindex second stage's parts (rerank.py, page coverage) beside them
    assert (
        {"dense", "lexical", "exactBoost"}
        <= set(top["scores"])
        <= {"dense", "lexical", "exactBoost", "coverage", "proximity", "rerank", "pageCoverage"}
    )


def test_second_ingest_of_unchanged_files_launches_no_run_and_keeps_ids(
    handbook, settings, corpus_dir, catalog, lake, milvus_client
):
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance

    instance = dagster_instance(settings)
    runs_before = len(instance.get_run_records())
    ids_before = {
        d.document_id: lake.read("chunks", d.document_id)["chunk_id"].to_list() for d in _docs(catalog).values()
    }
    count_before = count_entities(milvus_client, handbook.published.collection)

    report = ingest([corpus_dir], "handbook", settings)

    assert report.as_json()["documents"] == {
        "new": 0,
        "changed": 0,
        "unchanged": len(EXPECTED_KINDS),
        "deleted": 0,
        "failed": 0,
    }
    assert report.run_ids == []
    assert len(instance.get_run_records()) == runs_before
    assert {
        d.document_id: lake.read("chunks", d.document_id)["chunk_id"].to_list() for d in _docs(catalog).values()
    } == ids_before
    assert count_entities(milvus_client, handbook.published.collection) == count_before


def test_every_step_after_parsing_shows_the_parser_mode_of_the_partition(handbook, settings, catalog):
    """A degraded parse stays visible downstream: the materialization of each later step of a document
    says how its pages were parsed."""
    import dagster as dg

    from kb_assets.launch.instance import dagster_instance

    instance = dagster_instance(settings)
    pdf = next(d for d in catalog.get_documents(handbook.new).values() if d.source_path.endswith(".pdf"))
    for step in ("pageindex_trees", "chunks", "embeddings", "milvus_collection", "page_images"):
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(step), asset_partitions=[pdf.partition_key]), limit=1
        ).records
        assert records, step
        mode = records[0].event_log_entry.asset_materialization.metadata["parser_mode"].value
        assert mode == "docling-native-pdf", (step, mode)


def test_ingest_runs_are_batched_dagster_runs_over_document_partitions(handbook, settings, catalog):
    from kb_assets.launch.instance import dagster_instance

    instance = dagster_instance(settings)
    assert len(handbook.run_ids) == 1  # all 8 new documents in one contiguous range, one run
    run = instance.get_run_by_id(handbook.run_ids[0])
    assert run.job_name == "ingest_documents"
    assert run.tags["dagster/asset_partition_range_start"] != run.tags["dagster/asset_partition_range_end"]
    keys = set(instance.get_dynamic_partitions("documents"))
    assert {d.partition_key for d in catalog.get_documents(handbook.new).values()} <= keys
    checks = [
        e
        for e in instance.get_records_for_run(handbook.run_ids[0]).records
        if e.event_log_entry.dagster_event
        and e.event_log_entry.dagster_event.event_type_value == "ASSET_CHECK_EVALUATION"
    ]
    assert len(checks) == 6


def test_a_corrupt_file_fails_with_a_clear_reason_and_the_others_publish(settings, tmp_path, catalog, handbook):
    from kb_assets.launch.ingest import ingest

    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(CORPUS / "architecture.md", folder / "architecture.md")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\nthis is not a pdf\n")

    report = ingest([folder], "mixed", settings)

    assert report.as_json()["documents"]["failed"] == 1
    (failure,) = report.failures
    assert failure.source_uri.endswith("broken.pdf")
    assert "broken.pdf" in failure.reason
    docs = _docs(catalog, "mixed")
    assert docs["broken.pdf"].status == "failed" and docs["broken.pdf"].error == failure.reason
    assert docs["architecture.md"].status == "published"
    assert catalog.read_pages(docs["broken.pdf"].document_id) == []


def test_changed_file_gets_a_new_version_and_deleted_file_disappears_everywhere(
    settings, tmp_path, catalog, lake, milvus_client, stores, handbook
):
    from kb_assets.launch.ingest import ingest

    folder = tmp_path / "changing"
    folder.mkdir()
    (folder / "notes.md").write_text("# Notes\n\nThe canary release runs for 48 hours before full rollout.\n")
    (folder / "gone.md").write_text("# Gone\n\nThis page about the legacy ftp bridge will be deleted.\n")
    first = ingest([folder], "changing", settings)
    docs = _docs(catalog, "changing")
    assert first.as_json()["documents"]["new"] == 2 and not first.failures
    old_version = docs["notes.md"].version
    gone = docs["gone.md"]
    collection = first.published.collection

    (folder / "notes.md").write_text("# Notes\n\nThe canary release runs for 72 hours before full rollout.\n")
    (folder / "gone.md").unlink()
    second = ingest([folder], "changing", settings)

    assert second.as_json()["documents"] == {"new": 0, "changed": 1, "unchanged": 0, "deleted": 1, "failed": 0}
    docs = _docs(catalog, "changing")
    assert docs["notes.md"].version != old_version and docs["notes.md"].status == "published"
    contents = lake.read("chunks", docs["notes.md"].document_id)["content"].to_list()
    assert any("72 hours" in c for c in contents) and not any("48 hours" in c for c in contents)
    assert docs["gone.md"].status == "deleted"  # tombstone kept for lineage
    assert count_entities(milvus_client, collection, f'document_id == "{gone.document_id}"') == 0
    assert not lake.exists("chunks", gone.document_id) and not lake.exists("embeddings", gone.document_id)
    assert catalog.read_pages(gone.document_id) == []
    assert not stores.objects.exists(gone.object_key)


def test_lineage_traces_a_chunk_to_its_page_version_and_runs(handbook, catalog, lake, milvus_client, settings):
    from kb_assets.pipeline.lineage import chunk_lineage

    doc = _docs(catalog)["platform-handbook.pdf"]
    chunk = (
        lake.read("chunks", doc.document_id)
        .filter(pl.col("content").str.contains("Backups are kept"))
        .row(0, named=True)
    )
    record = chunk_lineage(chunk["chunk_id"], catalog, lake, milvus_client, settings.alias)
    assert record["verified"] is True
    assert record["pageIndex"] == 3
    assert record["document"]["version"] == doc.version
    assert record["runIds"]["chunks"] in handbook.run_ids


def test_definitions_load_with_seven_partitioned_versioned_assets_and_the_collection_assets(settings):
    from kb_assets.definitions import make_definitions
    from kb_assets.pipeline.versions import STEPS

    defs = make_definitions(settings)
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys == {"source_files", *STEPS, "page_images", "collection_candidate", "collection_alias"}
    assert graph.get(dg.AssetKey("source_files")).is_external  # the files: observed by the scans, not materialized
    versions = step_versions(settings)
    for step in [*STEPS, "page_images"]:
        assert graph.get(dg.AssetKey(step)).partitions_def.name == "documents"
    for step in STEPS:
        assert graph.get(dg.AssetKey(step)).code_version == versions[step]
    assert versions["embeddings"].endswith(":" + settings.embedding_model)
    assert graph.get(dg.AssetKey("collection_alias")).partitions_def is None
    assert {j.name for j in defs.jobs} == {"ingest_documents", "publish_collection", "purge_documents", "repair_stores"}


def test_cli_ingest_json_prints_only_json_and_docs_lists_documents(handbook, corpus_dir, kb_home):
    import json

    cli = [sys.executable, "-m", "kb_assets.cli"]
    out = subprocess.run(
        [*cli, "ingest", str(corpus_dir), "--kb", "handbook", "--json"], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout)["documents"]["unchanged"] == len(EXPECTED_KINDS)
    out = subprocess.run([*cli, "docs", "--kb", "handbook", "--json"], capture_output=True, text=True, check=True)
    documents = json.loads(out.stdout)["documents"]
    assert {d["status"] for d in documents} == {"published"}
    assert {"documentId", "knowledgeBaseId", "sourceUri", "version", "status", "error", "pages", "chunks"} <= set(
        documents[0]
    )


def test_dagster_definitions_validate_for_the_workspace(kb_home):
    dagster = Path(sys.executable).parent / "dagster"
    result = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=CORPUS.parents[1],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "All code locations passed validation" in result.stderr + result.stdout
