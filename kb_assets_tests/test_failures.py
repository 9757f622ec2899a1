"""What the stores and the Dagster instance say when things go wrong: a failed document's partition shows
failed and its last good version keeps serving (and says so); a half-written new version never reaches a
search, verify counts it as strays and ``--repair`` (a run) removes them; a killed ``kb-assets ingest``
leaves a run that the next ingest marks failed and a scratch folder that it removes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from kb_assets.lib.processes import orphaned_followers
from kb_assets.pipeline.versions import step_versions
from kb_assets.retrieval.search import SearchRequest

pytestmark = pytest.mark.slow

GOOD = "# Boilers\n\nThe boiler room key hangs in the janitor's office behind the blue cabinet.\n"


def partition_status(instance, step: str, key: str):
    return instance.get_status_by_partition(
        dg.AssetKey(step), [key], dg.DynamicPartitionsDefinition(name="documents")
    ).get(key)


def test_failed_document_shows_failed_and_its_last_good_version_serves(
    tmp_path, settings, catalog, lake, milvus_client
):
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.pipeline.verify import verify
    from kb_assets.service.api import make_searcher

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "boilers.md").write_text(GOOD)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    report = ingest([folder], "failures", settings)
    docs = {d.source_path: d for d in catalog.list_documents(["failures"])}
    broken, good = docs["broken.pdf"], docs["boilers.md"]
    assert [f.document_id for f in report.failures] == [broken.document_id] and broken.status == "failed"
    instance = dagster_instance(settings)
    step = broken.failed_step.partition("@")[0]
    assert partition_status(instance, step, broken.partition_key) == dg.AssetPartitionStatus.FAILED
    assert partition_status(instance, "milvus_collection", broken.partition_key) != dg.AssetPartitionStatus.MATERIALIZED
    assert partition_status(instance, "milvus_collection", good.partition_key) == dg.AssetPartitionStatus.MATERIALIZED

    (folder / "boilers.md").write_text("")  # the new file fails; the last good version keeps serving
    assert ingest([folder], "failures", settings).failures
    good = catalog.get_document(good.document_id)
    assert good.status == "failed" and good.published_version != good.version
    answer = make_searcher(settings).search(SearchRequest("Where is the boiler room key?", ["failures"], limit=1))
    assert "blue cabinet" in answer.results[0]["content"] and "last good version" in answer.results[0]["versionNotice"]
    assert any("last good version" in w for w in answer.warnings)
    from kb_assets.service.schemas import SearchAnswer  # what the API answers keeps the notice

    api = SearchAnswer.model_validate({"results": answer.results, "warnings": answer.warnings})
    assert "last good version" in api.results[0].versionNotice
    notices = verify(catalog, lake, milvus_client, settings.alias).notices
    assert any(n.document_id == good.document_id and "last good version" in n.notice for n in notices)


def materializations(instance, step: str, key: str) -> list:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(step), asset_partitions=[key]), limit=10
    ).records
    return [r.asset_materialization for r in records]


def test_a_document_refused_in_a_batch_is_never_materialized_and_shows_failed_where_it_was_refused(
    tmp_path, settings, catalog
):
    """Three good files and one bad in one batch run: the run succeeds (the bad file was refused as bad
    input, not an error); the bad one's partition has no materialization of the asset that refused it or of
    any after it, shows failed at that asset alone (a failed run of its own records the refusal, with the
    reason and no stack trace), and says why; each good one is materialized with metadata of its own."""
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance

    folder = tmp_path / "docs"
    folder.mkdir()
    good_files = {f"note-{n}.md": "# Note\n\n" + "The boiler room key is kept safe. " * (5 * n) for n in (1, 2, 3)}
    for name, text in good_files.items():
        (folder / name).write_text(text)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")

    report = ingest([folder], "batch-failure", settings)

    docs = {d.source_path: d for d in catalog.list_documents(["batch-failure"])}
    broken = docs["broken.pdf"]
    assert [f.document_id for f in report.failures] == [broken.document_id]
    (run_id,) = report.run_ids  # one batch run, no retry of its own
    instance = dagster_instance(settings)
    run = instance.get_run_by_id(run_id)
    assert run.status == dg.DagsterRunStatus.SUCCESS  # it did its work: the bad input was refused
    step = broken.failed_step.partition("@")[0]
    assert step == "parsed_pages"
    key = broken.partition_key
    assert [m.metadata["outcome"].value for m in materializations(instance, "raw_files", key)] == ["written"]
    for later in ("parsed_pages", "pageindex_trees", "chunks", "embeddings", "milvus_collection", "page_images"):
        assert materializations(instance, later, key) == [], later
    assert partition_status(instance, "parsed_pages", key) == dg.AssetPartitionStatus.FAILED
    for later in ("pageindex_trees", "chunks", "embeddings", "milvus_collection", "page_images"):
        assert partition_status(instance, later, key) is None, later  # never reached: missing, not failed
    (refusal,) = instance.get_runs(dg.RunsFilter(tags={"kb/refused_in": run_id}))
    assert refusal.status == dg.DagsterRunStatus.FAILURE and refusal.tags["dagster/partition"] == key
    assert refusal.asset_selection == {dg.AssetKey("parsed_pages")}
    assert refusal.tags["kb/refused_at"] == broken.failed_step
    (failure,) = [
        r.event_log_entry.dagster_event
        for r in instance.get_records_for_run(refusal.run_id).records
        if r.event_log_entry.dagster_event and r.event_log_entry.dagster_event.event_type_value == "PIPELINE_FAILURE"
    ]
    assert failure.message.startswith("parsed_pages refused broken.pdf") and broken.error in failure.message
    assert failure.event_specific_data is None  # no error, so no stack trace in the UI
    (observed,) = instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(step), asset_partitions=[key]), limit=10
    ).records
    assert observed.asset_observation.metadata["outcome"].value == f"failed: {broken.error}"
    assert "broken.pdf" in broken.error

    for name in good_files:
        doc = docs[name]
        assert doc.status == "published"
        for asset in ("raw_files", "parsed_pages", "chunks", "milvus_collection", "page_images"):
            assert partition_status(instance, asset, doc.partition_key) == dg.AssetPartitionStatus.MATERIALIZED
            (mat,) = materializations(instance, asset, doc.partition_key)
            assert mat.metadata["source"].value == name and mat.metadata["document_id"].value == doc.document_id
            if asset != "page_images":  # off the pipeline: no version
                assert mat.tags["dagster/code_version"] == step_versions(settings)[asset]
            assert "documents" not in mat.metadata  # no batch totals
        (pages,) = materializations(instance, "parsed_pages", doc.partition_key)
        assert pages.metadata["pages"].value == doc.page_count and pages.metadata["mode"].value
        (published,) = materializations(instance, "milvus_collection", doc.partition_key)
        assert published.metadata["chunks"].value == doc.chunk_count
    evaluations = [
        e
        for e in instance.get_records_for_run(run_id).records
        if e.event_log_entry.dagster_event
        and e.event_log_entry.dagster_event.event_type_value == "ASSET_CHECK_EVALUATION"
    ]
    assert len(evaluations) == 6  # every check ran and shows

    # the same range as a run of the implicit asset job (the UI's Materialize): Dagster writes its events
    from kb_assets.definitions import make_definitions
    from kb_assets.pipeline.versions import STEPS

    ordered = instance.get_dynamic_partitions("documents")
    keys = sorted((d.partition_key for d in docs.values()), key=ordered.index)  # added together: one range
    ui_run = (
        make_definitions(settings)
        .resolve_implicit_global_asset_job_def()
        .execute_in_process(
            instance=instance,
            raise_on_error=False,
            asset_selection=[dg.AssetKey(k) for k in (*STEPS, "page_images")],
            tags={"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]},
        )
    )
    assert ui_run.success  # the refusal is a run of its own, from the asset that refused it on
    (ui_refusal,) = instance.get_runs(dg.RunsFilter(tags={"kb/refused_in": ui_run.run_id}))
    assert dg.AssetKey("milvus_collection") in ui_refusal.asset_selection
    for later in ("parsed_pages", "milvus_collection"):
        assert partition_status(instance, later, key) == dg.AssetPartitionStatus.FAILED, later
        assert (
            partition_status(instance, later, docs["note-1.md"].partition_key) == dg.AssetPartitionStatus.MATERIALIZED
        )


def test_half_written_version_never_serves_and_repair_run_removes_it(tmp_path, settings, catalog, lake, milvus_client):
    from kb_assets.definitions import make_definitions
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.launch.store_changes import repair
    from kb_assets.pipeline.verify import verify
    from kb_assets.service.api import make_searcher
    from kb_assets.stores.entities import chunk_entities
    from kb_assets.stores.vectors import published_collection

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "boilers.md").write_text(GOOD)
    assert not ingest([folder], "strays", settings).failures
    (doc,) = catalog.list_documents(["strays"])
    collection = published_collection(milvus_client, catalog, settings.alias)
    # what a run killed during its Milvus upsert leaves: part of the new version's entities
    (entity,) = chunk_entities(lake.read("chunks", doc.document_id), lake.read("embeddings", doc.document_id))[:1]
    milvus_client.upsert(
        collection,
        [
            {
                **entity,
                "chunk_id": entity["chunk_id"] + "-next",
                "document_version": "next",
                "content": "The boiler room key now hangs in the red cabinet.",
            }
        ],
    )
    milvus_client.flush(collection)

    answer = make_searcher(settings).search(SearchRequest("boiler room key cabinet", ["strays"], limit=5))
    assert answer.results and all("red cabinet" not in r["content"] for r in answer.results)
    found = verify(catalog, lake, milvus_client, settings.alias)
    (stray,) = [p for p in found.problems if p.document_id == doc.document_id]
    assert "1 stray entities" in stray.problem

    instance = dagster_instance(settings)
    repaired = repair(make_definitions(settings), instance)  # verify --repair is a run

    assert any(p.document_id == doc.document_id and p.repaired for p in repaired.problems)
    run = instance.get_run_by_id(repaired.run_id or "")
    assert run.job_name == "repair_stores" and run.status == dg.DagsterRunStatus.SUCCESS
    assert run.tags["kb/store_change"] == "repair"
    assert not [
        p for p in verify(catalog, lake, milvus_client, settings.alias).problems if p.document_id == doc.document_id
    ]


def test_killed_ingest_leaves_a_run_the_next_ingest_fails_and_scratch_it_removes(tmp_path, settings, corpus_dir):
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance

    folder = tmp_path / "docs"
    folder.mkdir()
    shutil.copy(corpus_dir / "platform-handbook.pdf", folder / "handbook-copy.pdf")
    instance = dagster_instance(settings)
    before = {r.run_id for r in instance.get_runs()}
    process = subprocess.Popen(
        [sys.executable, "-m", "kb_assets.cli", "ingest", str(folder), "--kb", "killed"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=os.environ.copy(),
    )
    scratch = settings.scratch_root
    deadline, mine = time.monotonic() + 240, []
    try:
        while time.monotonic() < deadline and process.poll() is None:
            started = [
                r
                for r in instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
                if r.run_id not in before
            ]
            mine = [p for p in scratch.glob(f"{process.pid}.*")] if scratch.is_dir() else []
            if started and mine:
                break
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert started and mine, "the ingest finished before it could be killed mid-run"
    (run,) = started
    time.sleep(1.0)  # what the killed process started and left has been re-parented by now
    assert orphaned_followers(settings.home) == []  # no compute-log `tail -F` left following the runs

    ingest([folder], "killed", settings)

    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE
    assert not any(p.exists() for p in mine)


def test_the_next_ingest_kills_log_followers_that_a_killed_run_left(tmp_path, settings):
    """An instance that captures compute logs leaves ``tail -F`` processes when its run is killed (they
    ignore SIGTERM): the next ingest kills those following the instance's files."""
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance

    followed = Path(dagster_instance(settings).root_directory) / "storage" / "left-behind.out"
    followed.parent.mkdir(parents=True, exist_ok=True)
    followed.touch()
    subprocess.run(["sh", "-c", f"tail -F -c +0 '{followed}' >/dev/null 2>&1 &"], check=True)  # orphaned at once
    deadline = time.monotonic() + 10
    while not orphaned_followers(settings.home) and time.monotonic() < deadline:
        time.sleep(0.1)
    (left,) = orphaned_followers(settings.home)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "note.md").write_text("# Reaped\n\nNothing else to say.\n")

    ingest([folder], "reaped", settings)

    deadline = time.monotonic() + 10  # killed (a zombie until init reaps it: no command line then)
    while left in orphaned_followers(settings.home) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert orphaned_followers(settings.home) == []


def test_an_unchanged_failed_file_launches_no_run_and_retry_failed_runs_it(tmp_path, settings, catalog):
    from kb_assets.launch.ingest import ingest

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "boilers.md").write_text(GOOD)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    first = ingest([folder], "still-failing", settings)
    assert [f.source_uri.rsplit("/", 1)[1] for f in first.failures] == ["broken.pdf"]
    # the summary counts the broken file as failed, not among the new ones
    assert first.as_json()["documents"] == {"new": 1, "changed": 0, "unchanged": 0, "deleted": 0, "failed": 1}

    again = ingest([folder], "still-failing", settings)

    assert again.run_ids == []  # nothing ran for a file that failed and has not changed
    (failure,) = again.failures
    assert failure.still_failing and failure.reason == first.failures[0].reason
    assert again.as_json()["documents"] == {"new": 0, "changed": 0, "unchanged": 1, "deleted": 0, "failed": 1}
    retried = ingest([folder], "still-failing", settings, retry_failed=True)
    assert len(retried.run_ids) == 1 and not retried.failures[0].still_failing
    broken = next(d for d in catalog.list_documents(["still-failing"]) if d.source_path == "broken.pdf")
    assert broken.status == "failed" and broken.last_run_id == retried.run_ids[0]
