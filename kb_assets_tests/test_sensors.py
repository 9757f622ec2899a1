"""The watched-folder sensor and the scheduled update keep a knowledge base current through Dagster."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import dagster as dg
import pytest

from kb_assets.defs.partitions import documents_partitions

pytestmark = pytest.mark.slow


@pytest.fixture
def watched(tmp_path, settings, request):
    """A folder watched as its own knowledge base (named after the test), and the definitions of a code
    location started with that KB_WATCH."""
    from kb_assets.definitions import make_definitions

    folder = tmp_path / "watched"
    folder.mkdir()
    kb = request.node.name[5:40]
    defs = make_definitions(replace(settings, watch=f"{kb}={folder}"))
    return SimpleNamespace(
        folder=folder,
        kb=kb,
        sensor=defs.get_sensor_def("watched_folders_sensor"),
        resources=defs.resources,
        schedule=defs.get_schedule_def("incremental_update_schedule"),
        job=defs.resolve_job_def("ingest_documents"),
        purge=defs.resolve_job_def("purge_documents"),
    )


def _run(watched, instance, run_request):
    from kb_assets.launch.runs import QUIET_RUN_CONFIG

    return watched.job.execute_in_process(
        instance=instance,
        tags=run_request.tags,
        run_config=QUIET_RUN_CONFIG,
        asset_selection=run_request.asset_selection,
    )


def test_sensor_launches_new_files_skips_unchanged_and_purges_deleted(watched, settings, catalog, handbook):
    from kb_assets.launch.instance import dagster_instance

    instance = dagster_instance(settings)
    (watched.folder / "faq.md").write_text("# FAQ\n\nThe staging database is refreshed every Sunday night.\n")

    result = watched.sensor(dg.build_sensor_context(instance=instance, resources=watched.resources))

    (request,) = result.run_requests
    (add,) = result.dynamic_partitions_requests
    (doc,) = catalog.list_documents([watched.kb])
    assert add.partition_keys == [doc.partition_key] and doc.status == "pending"
    assert request.tags["dagster/asset_partition_range_start"] == doc.partition_key
    instance.add_dynamic_partitions(documents_partitions.name, add.partition_keys)
    assert _run(watched, instance, request).success
    assert catalog.get_document(doc.document_id).status == "published"

    again = watched.sensor(dg.build_sensor_context(instance=instance, resources=watched.resources))
    assert isinstance(again, dg.SkipReason) and "nothing changed" in again.skip_message

    (watched.folder / "faq.md").unlink()
    (purge,) = watched.sensor(dg.build_sensor_context(instance=instance, resources=watched.resources)).run_requests
    assert purge.job_name == "purge_documents" and catalog.get_document(doc.document_id).status == "published"
    result = watched.purge.execute_in_process(instance=instance, run_config=purge.run_config, tags=purge.tags)
    assert result.success  # the purge is a run: what it removed is its output metadata
    (removed,) = result.output_for_node("purge")
    assert removed.source_path == "faq.md" and sum(removed.entities_removed.values()) >= 1
    assert catalog.get_document(doc.document_id).status == "deleted"
    assert not instance.has_dynamic_partition(documents_partitions.name, doc.document_id)
    again = watched.sensor(dg.build_sensor_context(instance=instance, resources=watched.resources))
    assert isinstance(again, dg.SkipReason)


def test_sensor_run_key_repeats_while_the_same_versions_are_pending(watched, settings):
    from kb_assets.launch.instance import dagster_instance

    instance = dagster_instance(settings)
    (watched.folder / "a.md").write_text("# A\n\nFirst version.\n")
    first = watched.sensor(dg.build_sensor_context(instance=instance, resources=watched.resources)).run_requests[0]
    instance.add_dynamic_partitions(documents_partitions.name, [first.tags["dagster/asset_partition_range_start"]])
    second = watched.sensor(dg.build_sensor_context(instance=instance, resources=watched.resources)).run_requests[0]
    assert second.run_key == first.run_key
    (watched.folder / "a.md").write_text("# A\n\nSecond version.\n")
    third = watched.sensor(dg.build_sensor_context(instance=instance, resources=watched.resources)).run_requests[0]
    assert third.run_key != first.run_key


def test_schedule_adds_partitions_and_requests_runs_for_changed_files(watched, settings, catalog, handbook):
    from kb_assets.launch.instance import dagster_instance

    instance = dagster_instance(settings)
    (watched.folder / "guide.md").write_text("# Guide\n\nDeploys happen on weekdays only.\n")

    requests = watched.schedule(dg.build_schedule_context(instance=instance, resources=watched.resources))

    (doc,) = catalog.list_documents([watched.kb])
    assert instance.has_dynamic_partition(documents_partitions.name, doc.partition_key)
    assert [r.tags["dagster/asset_partition_range_start"] for r in requests] == [doc.partition_key]
    assert _run(watched, instance, requests[0]).success
    assert catalog.get_document(doc.document_id).status == "published"
