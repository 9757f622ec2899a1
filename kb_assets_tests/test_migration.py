"""Changing the embedding spec starts the migration by itself: the migration sensor (evaluated against the
instance) requests the backfill runs, and the next ``ingest`` (no daemon) finishes it with the
``publish_collection`` run (blocking validation, then the alias swap); searches never fail meanwhile, a
document edited during the migration is found with its new text after the swap, and rollback re-publishes
the previous collection. The second spec is the real MiniLM model truncated to 256-d."""

from __future__ import annotations

import threading
from dataclasses import replace

import dagster as dg
import pytest

from kb_assets.retrieval.search import SearchRequest
from kb_assets.stores.entities import count_entities
from kb_assets.stores.vectors import published_collection
from kb_assets_tests.converge import converge

pytestmark = pytest.mark.slow


def test_spec_change_migrates_by_itself_without_a_failed_search_and_rolls_back(
    handbook, settings, catalog, milvus_client, tmp_path, corpus_dir
):
    from kb_assets.definitions import make_definitions
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.launch.runs import QUIET_RUN_CONFIG
    from kb_assets.pipeline.migration import rollback
    from kb_assets.service.api import make_searcher

    folder = tmp_path / "edits"
    folder.mkdir()
    note = folder / "parking.md"
    note.write_text("# Parking\n\nVisitors park on level two of the east garage and sign in at the desk.\n")
    assert not ingest([folder], "edits", settings).failures
    before = published_collection(milvus_client, catalog, settings.alias)
    before_count = count_entities(milvus_client, before)
    new = replace(settings, embedding_model="all-MiniLM-L6-v2@256")
    instance = dagster_instance(settings)

    defs = make_definitions(new)  # the sensor sees the spec differ and requests the backfill
    requests = defs.get_sensor_def("collection_migration_sensor")(
        dg.build_sensor_context(instance=instance, resources=defs.resources)
    )
    assert requests and {r.job_name for r in requests} == {"ingest_documents"}
    assert all(
        {k.to_user_string() for k in r.asset_selection} == {"embeddings", "milvus_collection"} for r in requests
    )  # from the lake: no parse
    job = defs.resolve_job_def("ingest_documents")
    for request in requests:
        assert job.execute_in_process(
            instance=instance, tags=request.tags, asset_selection=request.asset_selection, run_config=QUIET_RUN_CONFIG
        ).success
    assert published_collection(milvus_client, catalog, settings.alias) == before  # validated and swapped later

    note.write_text("# Parking\n\nVisitors park on level five of the west garage and sign in at the desk.\n")
    edited = ingest([folder], "edits", replace(new, auto_migrate=False))  # written into both collections
    assert not edited.failures and edited.migration is None
    assert any("KB_AUTO_MIGRATE=0" in w for w in edited.warnings)

    errors, empty, done, stop = [], [], [], threading.Event()
    searcher = make_searcher(settings)

    def search_meanwhile():
        while not stop.is_set():
            try:
                answer = searcher.search(SearchRequest("How long are backups kept?", ["handbook"], limit=3))
                (done if answer.results else empty).append(answer.warnings)
            except Exception as error:  # noqa: BLE001 - any failure is what the test counts
                errors.append(repr(error))

    thread = threading.Thread(target=search_meanwhile)
    thread.start()
    try:
        report = ingest([folder], "edits", new)  # the next ingest launches the rest of the migration
    finally:
        stop.set()
        thread.join()

    assert not errors and not empty and done, (errors, empty)
    migration = report.migration
    assert migration is not None and migration.status == "published", migration
    assert (
        migration.published
        == "kb_chunks__minilm_l6__d256__v1"
        == published_collection(milvus_client, catalog, "kb_chunks")
    )
    validation = migration.validation
    assert validation is not None and validation.entities == validation.chunk_rows >= before_count
    assert validation.quality_published >= 0.8  # chunk search, not the page fallback, was measured
    assert validation.quality_new >= validation.quality_published - 0.05
    (publish,) = instance.get_runs(filters=dg.RunsFilter(job_name="publish_collection"), limit=1)
    assert publish.status == dg.DagsterRunStatus.SUCCESS and publish.tags["kb/store_change"] == "migration"
    alias_event = instance.get_latest_materialization_event(dg.AssetKey("collection_alias"))
    assert alias_event.asset_materialization.metadata["swap"].value == f"{before} -> {migration.published}"
    searcher = make_searcher(new)
    answer = searcher.search(SearchRequest("How long are backups kept?", ["handbook"], limit=3))
    assert answer.results[0]["sourceUri"].endswith("platform-handbook.pdf")
    parking = searcher.search(SearchRequest("Where do visitors park?", ["edits"], limit=1))
    assert "level five" in parking.results[0]["content"]
    assert milvus_client.has_collection(before)  # kept for rollback
    states = {c.name: c.state for c in catalog.collections()}
    assert states[before] == "retired" and states[migration.published] == "published"
    assert ingest([folder], "edits", new).migration is None  # nothing left to migrate

    rolled = rollback(catalog, milvus_client, settings.alias)

    assert (rolled.published, rolled.previous) == (before, migration.published)
    assert published_collection(milvus_client, catalog, "kb_chunks") == before
    states = {c.name: c.state for c in catalog.collections()}
    assert states[before] == "published" and states[migration.published] == "retired"

    # after the rollback the documents' lake vectors are of the 256-d spec: they re-encode from the lake
    # (no parse) and the stores converge on the published spec again
    converge(settings)
    for source, kb in ((corpus_dir, "handbook"), (folder, "edits")):
        assert ingest([source], kb, settings).run_ids == []
