"""Hash-bucket partitions (``KB_PARTITIONING=buckets:N``) work as per-document partitions do: a pipeline
version bump re-runs the stale documents' buckets from that step, a failed document is listed in its
bucket (which never shows materialized for it) and retried when asked, a deleted file disappears from
every store, and an embedding-model migration backfills, validates and swaps under buckets."""

from __future__ import annotations

from dataclasses import replace

import dagster as dg
import pytest

from kb_assets.pipeline.versions import step_versions
from kb_assets.retrieval.search import SearchRequest
from kb_assets.stores.entities import count_entities

pytestmark = pytest.mark.slow

TOPICS = ["boiler room", "loading dock", "server room", "roof access", "bike storage", "mail room"]


def write_notes(folder, count: int = 6) -> None:
    """Notes whose bytes are the folder's own (an original shared with another test's would stay stored)."""
    folder.mkdir(exist_ok=True)
    for i, topic in enumerate(TOPICS[:count]):
        (folder / f"note-{i}.md").write_text(
            f"# The {topic}\n\nThe key of the {topic} hangs on hook {i + 7} in the {folder.name} lodge; "
            f"sign the {topic} ledger when you take it.\n"
        )


def docs_of(catalog, kb: str) -> dict:
    return {d.source_path: d for d in catalog.list_documents([kb])}


def partition_events(instance, run_ids: list[str], key: str) -> list[tuple[str, str, dict]]:
    """(event type, asset, metadata) of the runs' asset events on one partition."""
    found = []
    for run_id in run_ids:
        for record in instance.get_records_for_run(run_id, limit=100000).records:
            event = record.event_log_entry.dagster_event
            if event is None:
                continue
            data = event.event_specific_data
            payload = getattr(data, "materialization", None) or getattr(data, "asset_observation", None)
            if payload is not None and payload.partition == key:
                found.append((event.event_type_value, payload.asset_key.to_user_string(), dict(payload.metadata)))
    return found


def status(instance, asset: str, key: str):
    return instance.get_status_by_partition(
        dg.AssetKey(asset), [key], dg.DynamicPartitionsDefinition(name="documents")
    ).get(key)


def test_version_bump_reruns_the_stale_documents_buckets_from_that_step(settings, tmp_path, catalog):
    from kb_assets.launch.ingest import ingest

    buckets = replace(settings, partitioning="buckets:3")
    folder = tmp_path / "bump"
    write_notes(folder)
    assert not ingest([folder], "buckets-bump", buckets).failures
    before = docs_of(catalog, "buckets-bump")
    pages_run = {path: catalog.read_pages(d.document_id)[0]["run_id"] for path, d in before.items()}

    bumped = replace(buckets, versions=replace(buckets.versions, chunks="buckets-2"))
    try:
        bumped_and_current(bumped, folder, before, pages_run, catalog, settings)
    finally:  # the session's stores back to the current versions (a later migration test validates every document)
        assert not ingest([folder], "buckets-bump", buckets).failures


def bumped_and_current(bumped, folder, before, pages_run, catalog, settings) -> None:
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.pipeline.planning import is_bucket

    report = ingest([folder], "buckets-bump", bumped)
    assert not report.failures and report.run_ids
    assert sorted((s.step, s.document_id) for s in report.stale) == sorted(
        ("chunks", d.document_id) for d in before.values()
    )
    instance = dagster_instance(settings)
    for run_id in report.run_ids:
        run = instance.get_run_by_id(run_id)
        assert is_bucket(run.tags["dagster/asset_partition_range_start"])
        assert {k.to_user_string() for k in run.asset_selection} == {"chunks", "embeddings", "milvus_collection"}
    after = docs_of(catalog, "buckets-bump")
    assert {d.status for d in after.values()} == {"published"}
    assert {d.step_versions["chunks"] for d in after.values()} == {step_versions(bumped)["chunks"]}
    assert {d.last_run_id for d in after.values()} <= set(report.run_ids)
    assert {path: catalog.read_pages(d.document_id)[0]["run_id"] for path, d in after.items()} == pages_run  # no parse
    assert ingest([folder], "buckets-bump", bumped).run_ids == []  # current now


def test_a_bucket_lists_its_failed_document_and_its_good_documents_are_searchable(
    settings, tmp_path, catalog, lake, milvus_client, stores
):
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.pipeline.planning import partition_key
    from kb_assets.service.api import make_searcher

    buckets = replace(settings, partitioning="buckets:2")
    folder = tmp_path / "bad"
    write_notes(folder)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    report = ingest([folder], "buckets-bad", buckets)

    docs = docs_of(catalog, "buckets-bad")
    broken = docs.pop("broken.pdf")
    assert [f.document_id for f in report.failures] == [broken.document_id] and broken.status == "failed"
    assert {d.status for d in docs.values()} == {"published"}
    answer = make_searcher(buckets).search(
        SearchRequest("Where is the key of the loading dock?", ["buckets-bad"], limit=1)
    )
    assert "loading dock" in answer.results[0]["content"]

    instance = dagster_instance(settings)
    bucket = partition_key(broken, buckets.partitioning)
    assert status(instance, "milvus_collection", bucket) == dg.AssetPartitionStatus.FAILED
    events = partition_events(instance, report.run_ids, bucket)
    listed = [m["failures"].value for _, _, m in events if "failures" in m and m["failures"].value]
    assert listed and all(f["document"] == broken.source_uri and f["reason"] for f in listed[0])
    assert not any(
        t == "ASSET_MATERIALIZATION" and a == "milvus_collection" and not m["failures"].value for t, a, m in events
    )  # never materialized as if nothing had failed

    again = ingest([folder], "buckets-bad", buckets)  # not retried unasked
    assert again.run_ids == [] and [f.document_id for f in again.failures] == [broken.document_id]
    retried = ingest([folder], "buckets-bad", buckets, retry_failed=True)
    assert retried.run_ids and catalog.get_document(broken.document_id).last_run_id in retried.run_ids
    assert {d.status for d in docs_of(catalog, "buckets-bad").values() if d.document_id != broken.document_id} == {
        "published"
    }

    gone = docs["note-1.md"]
    (folder / "note-1.md").unlink()
    (folder / "broken.pdf").unlink()
    purged = ingest([folder], "buckets-bad", buckets)
    assert sorted(purged.deleted) == sorted([gone.document_id, broken.document_id])
    assert catalog.get_document(gone.document_id).status == "deleted"
    assert count_entities(milvus_client, purged.published.collection, f'document_id == "{gone.document_id}"') == 0
    assert not lake.exists("chunks", gone.document_id) and not lake.exists("embeddings", gone.document_id)
    assert catalog.read_pages(gone.document_id) == [] and not stores.objects.exists(gone.object_key)
    gone_bucket = partition_key(gone, buckets.partitioning)
    (purge_run,) = instance.get_runs(filters=dg.RunsFilter(job_name="purge_documents"), limit=1)
    assert any(
        a == "milvus_collection" and gone.source_uri in m["purged"].value
        for _, a, m in partition_events(instance, [purge_run.run_id], gone_bucket)
    )  # the bucket says what it lost
    answer = make_searcher(buckets).search(
        SearchRequest("Where is the key of the loading dock?", ["buckets-bad"], limit=3)
    )
    assert all(r["documentId"] != gone.document_id for r in answer.results)


def test_embedding_model_migration_backfills_validates_and_swaps_under_buckets(
    handbook, settings, tmp_path, catalog, milvus_client
):  # the handbook: validation measures its questions on the candidate
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.pipeline.migration import rollback
    from kb_assets.service.api import make_searcher
    from kb_assets.stores.vectors import published_collection
    from kb_assets_tests.converge import converge

    buckets = replace(settings, partitioning="buckets:3")
    folder = tmp_path / "migrate"
    write_notes(folder, 4)
    assert not ingest([folder], "buckets-migrate", buckets).failures
    before = published_collection(milvus_client, catalog, settings.alias)
    new = replace(buckets, embedding_model="all-MiniLM-L6-v2@256")

    report = ingest([folder], "buckets-migrate", new)  # the spec changed: backfill, validate, swap
    try:
        migration = report.migration
        assert migration is not None and migration.status == "published", migration
        assert published_collection(milvus_client, catalog, settings.alias) == migration.published != before
        assert migration.validation is not None and migration.validation.entities == migration.validation.chunk_rows
        instance = dagster_instance(settings)
        backfills = [instance.get_run_by_id(r) for r in report.run_ids]
        backfills = [r for r in backfills if r.job_name == "ingest_documents"]
        assert backfills and all(r.tags["dagster/asset_partition_range_start"].startswith("bucket-") for r in backfills)
        assert all(
            {k.to_user_string() for k in r.asset_selection} == {"embeddings", "milvus_collection"} for r in backfills
        )
        docs = docs_of(catalog, "buckets-migrate")
        assert {d.step_versions["embeddings"] for d in docs.values()} == {step_versions(new)["embeddings"]}
        answer = make_searcher(new).search(
            SearchRequest("Where is the key of the server room?", ["buckets-migrate"], limit=1)
        )
        assert "server room" in answer.results[0]["content"]
        assert ingest([folder], "buckets-migrate", new).migration is None  # nothing left to migrate
    finally:
        rollback(catalog, milvus_client, settings.alias)
        converge(settings)  # the session's per-document stores back to the published spec
        assert ingest([folder], "buckets-migrate", buckets).failures == []


def test_scattered_edits_are_one_run_that_leaves_the_buckets_between_them_alone(settings, tmp_path, catalog):
    """Edits in the first and last bucket and a bad new file: one run over the range between them; the
    buckets it passes over get no event from it and never show failed although the run failed."""
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.pipeline.planning import partition_key

    buckets = replace(settings, partitioning="buckets:7")
    folder = tmp_path / "scattered"
    folder.mkdir()
    for i in range(10):
        (folder / f"note-{i}.md").write_text(f"# Pump {i}\n\nPump {i} in the scattered hall is oiled on day {i + 1}.\n")
    assert not ingest([folder], "buckets-scattered", buckets).failures
    instance = dagster_instance(settings)
    ordered = [k for k in instance.get_dynamic_partitions("documents") if k.endswith("-of-7")]
    docs = docs_of(catalog, "buckets-scattered")
    by_bucket = {partition_key(d, buckets.partitioning): d for d in docs.values()}
    first, last = by_bucket[ordered[0]], by_bucket[ordered[-1]]
    for doc in (first, last):
        (folder / doc.source_path).write_text(f"# Pump\n\n{doc.source_path} is now oiled every week.\n")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")

    report = ingest([folder], "buckets-scattered", buckets)

    (run_id,) = report.run_ids
    run = instance.get_run_by_id(run_id)
    assert run.status == dg.DagsterRunStatus.SUCCESS  # broken.pdf was refused in it: a failed run of its own
    start, end = (run.tags[f"dagster/asset_partition_range_{t}"] for t in ("start", "end"))
    broken = docs_of(catalog, "buckets-scattered")["broken.pdf"]
    worked = {partition_key(d, buckets.partitioning) for d in (first, last, broken)}
    ordered = [k for k in instance.get_dynamic_partitions("documents") if k.endswith("-of-7")]  # broken's added
    in_order = [k for k in ordered if k in worked]
    assert (start, end) == (in_order[0], in_order[-1])
    passed_over = [k for k in ordered[ordered.index(start) : ordered.index(end) + 1] if k not in worked]
    assert passed_over
    for key in passed_over:
        assert partition_events(instance, [run_id], key) == []
        assert status(instance, "milvus_collection", key) == dg.AssetPartitionStatus.MATERIALIZED
    for doc in (first, last):
        assert catalog.get_document(doc.document_id).last_run_id == run_id
        assert status(instance, "milvus_collection", partition_key(doc, buckets.partitioning)) in (
            dg.AssetPartitionStatus.MATERIALIZED,
            dg.AssetPartitionStatus.FAILED,  # the bucket it shares with broken.pdf
        )
    assert status(instance, "parsed_pages", partition_key(broken, buckets.partitioning)) == (
        dg.AssetPartitionStatus.FAILED
    )


def test_a_large_batch_is_cut_into_runs_of_whole_buckets_up_to_so_many_documents(settings, tmp_path, catalog):
    """``KB_BUCKET_RUN_DOCUMENTS``: each run takes whole buckets up to so many documents and publishes them,
    so a large batch's first documents serve before its last run starts."""
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.pipeline.planning import partition_key

    buckets = replace(settings, partitioning="buckets:5", bucket_run_documents=4)
    folder = tmp_path / "cut"
    folder.mkdir()
    for i in range(12):
        (folder / f"note-{i}.md").write_text(f"# Valve {i}\n\nValve {i} of the cut hall is checked on day {i + 1}.\n")

    report = ingest([folder], "buckets-cut", buckets)

    assert not report.failures and len(report.run_ids) > 1
    instance = dagster_instance(settings)
    docs = docs_of(catalog, "buckets-cut")
    held = {
        key: sum(partition_key(d, buckets.partitioning) == key for d in docs.values())
        for key in {partition_key(d, buckets.partitioning) for d in docs.values()}
    }
    ordered = [k for k in instance.get_dynamic_partitions("documents") if k in held]
    published: list[str] = []
    for run_id in report.run_ids:  # in order: each run whole buckets, at most 4 documents unless one bucket holds more
        run = instance.get_run_by_id(run_id)
        start, end = (run.tags[f"dagster/asset_partition_range_{t}"] for t in ("start", "end"))
        keys = ordered[ordered.index(start) : ordered.index(end) + 1]
        mine = [d for d in docs.values() if d.last_run_id == run_id]
        assert len(mine) == sum(held[k] for k in keys)
        assert len(mine) <= 4 or len(keys) == 1
        assert all(d.status == "published" for d in mine)
        published += [d.document_id for d in mine]
    assert sorted(published) == sorted(d.document_id for d in docs.values())
