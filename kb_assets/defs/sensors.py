"""Sensors: keep watched folders and S3 prefixes current, and start a collection migration when the
embedding spec changes.

``watched_folders_sensor``: ``KB_WATCH="kbA=/path/a;kbB=s3://bucket/prefix"`` names them (S3 through the
AWS_* settings); an entry that cannot be read is logged as a warning and the others go on. New, changed
and stale documents (``kb_assets.pipeline.versions``) become runs of ``ingest_documents`` that start at their
first stale step; deleted files become a ``purge_documents`` run; a document whose failure the UI does
not show yet is retried alone (its run fails again, and the partition shows failed). Per-file state
lives in Postgres (the ``documents`` table), not in the cursor; at most ``MAX_NEW_KEYS_PER_TICK`` new
partitions are added a tick (FIELD-NOTES: larger first ticks grow quadratically in the daemon).
Registration holds the registration lock (one ingest or tick at a time). With ``KB_PARTITIONING=buckets:N``
the runs are over the buckets of stale documents, each from its earliest stale step (``planning.plan_bucket_runs``;
a failure stands until its file or its step's version changes).

``collection_migration_sensor`` (on unless ``KB_AUTO_MIGRATE=0``): when the published collection's spec
is not the configured one, requests the backfill runs, then (when none is left and none is running) the
``publish_collection`` run.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import dagster as dg

from kb_assets.defs.jobs import ingest_documents, publish_collection, purge_documents
from kb_assets.defs.migration import migration_plans
from kb_assets.defs.partitions import (
    DOCUMENTS_PARTITIONS,
    documents_partitions,
    readable_partition_keys,
    shown_failed,
)
from kb_assets.defs.provenance import observe_sources
from kb_assets.pipeline import planning
from kb_assets.pipeline.migration import migration_due
from kb_assets.pipeline.planning import MIGRATION_TAG
from kb_assets.pipeline.versions import selection
from kb_assets.settings import Settings
from kb_assets.stores import Stores

MAX_NEW_KEYS_PER_TICK = 1000
UNFINISHED = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


@dataclass
class WatchPlan:
    runs: list[planning.RunPlan] = field(default_factory=list)
    new_keys: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped_new: int = 0
    failures: list[planning.ScanFailure] = field(default_factory=list)  # entries that could not be read

    def purge_request(self) -> dg.RunRequest:
        return dg.RunRequest(
            run_key="purge:" + hashlib.sha256(",".join(sorted(self.deleted)).encode()).hexdigest()[:32],
            job_name=purge_documents.name,
            tags={"kb/documents": str(len(self.deleted))},
            run_config={"ops": {"purge": {"config": {"document_ids": sorted(self.deleted)}}}},
        )


def document_run_request(plan: planning.RunPlan, job_name: str | None = ingest_documents.name) -> dg.RunRequest:
    """A run of ``ingest_documents`` for a planned range, from its first stale step; the same documents
    at the same versions never launch twice (the run key)."""
    keys = selection(plan.step)
    return dg.RunRequest(
        run_key=plan.key(),
        job_name=job_name,
        tags=plan.tags(),
        asset_selection=[dg.AssetKey(key) for key in keys] if keys else None,
    )


def plan_watched_folders(settings: Settings, stores: Stores, instance: dg.DagsterInstance) -> WatchPlan:
    """Register changes of every watched folder of ``settings`` and plan the runs: stale ranges from their
    first stale step, failures the UI does not show yet retried alone, and the purge of deleted files."""
    catalog = stores.catalog
    with catalog.registration_lock():
        readable_partition_keys(catalog, instance)
    existing = instance.get_dynamic_partitions(DOCUMENTS_PARTITIONS)
    known = set(existing)
    migrating = migration_due(stores.milvus, stores.catalog, settings.alias, settings.embedding_model) is not None
    buckets = planning.bucket_count(settings.partitioning) is not None  # runs of changed documents only
    plan = WatchPlan()
    for knowledge_base_id, source in settings.watched_folders():
        with catalog.registration_lock():  # one registration at a time (ingests, ticks)
            found = planning.scan([source], knowledge_base_id, catalog, settings.storage_options())
            changes = planning.register_changes(found.files, knowledge_base_id, catalog)
            observe_sources(instance, catalog.get_documents(changes.to_run).values(), settings.partitioning)
            gone = planning.gone_documents(knowledge_base_id, found.scopes, found.present, catalog)
        plan.failures += found.failures
        plan.deleted += [doc.document_id for doc in gone]
        docs = list(catalog.get_documents([f.document_id for f in found.files]).values())
        by_id = {d.document_id: d for d in docs}
        stale = planning.stale_under(docs, settings, catalog, migrating)
        if buckets:  # failures stand until their file or step version changes (ingest --retry-failed)
            stale = {d: why for d, why in stale.items() if not why.failed}
        fresh = [
            key for key in planning.partition_keys([by_id[d] for d in stale], settings.partitioning) if key not in known
        ]
        room = MAX_NEW_KEYS_PER_TICK - len(plan.new_keys)
        plan.skipped_new += max(0, len(fresh) - room)
        admitted = fresh[: max(0, room)]
        plan.new_keys += admitted
        known.update(admitted)
        ordered = [*existing, *plan.new_keys]
        if buckets:
            stale = {
                d: why for d, why in stale.items() if planning.partition_key(by_id[d], settings.partitioning) in known
            }
        else:
            stale = {
                d: why
                for d, why in stale.items()
                if by_id[d].partition_key in known
                and not (why.failed and shown_failed(instance, why.step, by_id[d].partition_key))
            }
        plan.runs += planning.plan_document_runs(docs, stale, ordered, settings, catalog)
    return plan


def build_watched_folders_sensor(settings: Settings) -> dg.SensorDefinition:
    """The sensor of the KB_WATCH folders (running by default when KB_WATCH is set)."""

    @dg.sensor(
        jobs=[ingest_documents, purge_documents],
        minimum_interval_seconds=settings.watch_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING if settings.watch else dg.DefaultSensorStatus.STOPPED,
    )
    def watched_folders_sensor(context: dg.SensorEvaluationContext, stores: dg.ResourceParam[Stores]):
        """Materializes new, changed and stale files of the KB_WATCH folders from their first stale step and
        purges deleted ones (a purge_documents run)."""
        if not settings.watch:
            return dg.SkipReason("KB_WATCH is not set: no folder to watch")
        plan = plan_watched_folders(settings, stores, context.instance)
        for failure in plan.failures:
            context.log.warning(f"{failure.source_uri}: {failure.reason}")
        if plan.skipped_new:
            context.log.info(f"{plan.skipped_new} new documents wait for the next tick")
        requests = [document_run_request(run) for run in plan.runs] + ([plan.purge_request()] if plan.deleted else [])
        if not requests:
            return dg.SkipReason("nothing changed")
        return dg.SensorResult(
            run_requests=requests, dynamic_partitions_requests=[documents_partitions.build_add_request(plan.new_keys)]
        )

    return watched_folders_sensor


def build_collection_migration_sensor(settings: Settings) -> dg.SensorDefinition:
    """The sensor that starts a collection migration by itself (running unless KB_AUTO_MIGRATE=0)."""

    @dg.sensor(
        jobs=[ingest_documents, publish_collection],
        minimum_interval_seconds=settings.watch_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING if settings.auto_migrate else dg.DefaultSensorStatus.STOPPED,
    )
    def collection_migration_sensor(context: dg.SensorEvaluationContext, stores: dg.ResourceParam[Stores]):
        """When the published collection's embedding spec is not the configured one: backfills the new
        collection from the lake, then validates it and swaps the alias (publish_collection)."""
        if not settings.auto_migrate:
            return dg.SkipReason("KB_AUTO_MIGRATE=0: run kb-assets migrate to migrate")
        due = migration_due(stores.milvus, stores.catalog, settings.alias, settings.embedding_model)
        if due is None:
            return dg.SkipReason("the published collection has the configured embedding spec")
        running = context.instance.get_runs(
            filters=dg.RunsFilter(tags={MIGRATION_TAG: settings.embedding_model}, statuses=UNFINISHED), limit=1
        )
        if running:
            return dg.SkipReason(f"migration to {settings.embedding_model} running ({running[0].run_id})")
        plans = migration_plans(settings, stores, context.instance)
        if plans:
            context.log.info(f"{due.reason}: backfilling {sum(len(p.documents) for p in plans)} documents")
            return [document_run_request(plan) for plan in plans]
        serving = sorted(
            f"{d.document_id}@{d.published_version}"
            for d in stores.catalog.list_documents()
            if d.published_version and d.status != "deleted"
        )
        return dg.RunRequest(
            run_key="publish:"
            + hashlib.sha256(f"{settings.embedding_model}|{','.join(serving)}".encode()).hexdigest()[:32],
            job_name=publish_collection.name,
            tags={MIGRATION_TAG: settings.embedding_model, "kb/store_change": "migration"},
        )

    return collection_migration_sensor
