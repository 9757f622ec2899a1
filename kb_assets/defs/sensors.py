"""Keep watched folders and S3 prefixes current: new and changed files become runs, deleted files are purged.

``KB_WATCH="kbA=/path/a;kbB=s3://bucket/prefix"`` names them (S3 through the AWS_* settings); an entry
that cannot be read is logged as a warning and the others go on. Per-file state lives in Postgres (the
``documents`` table), not in the cursor; at most ``MAX_NEW_KEYS_PER_TICK`` new partitions are added a
tick (FIELD-NOTES: larger first ticks grow quadratically in the daemon).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import dagster as dg

from kb_assets import planning, steps
from kb_assets.defs.jobs import ingest_documents
from kb_assets.defs.partitions import documents_partitions
from kb_assets.settings import Settings
from kb_assets.stores import Stores

MAX_NEW_KEYS_PER_TICK = 1000


@dataclass
class WatchPlan:
    run_requests: list[dg.RunRequest] = field(default_factory=list)
    new_keys: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped_new: int = 0
    failures: list[planning.ScanFailure] = field(default_factory=list)   # entries that could not be read


def plan_watched_folders(instance: dg.DagsterInstance, settings: Settings) -> WatchPlan:
    """Register changes of every watched folder, purge what is gone, and plan one run per contiguous
    range of changed documents."""
    stores = Stores(settings)
    existing = instance.get_dynamic_partitions(documents_partitions.name)
    known = set(existing)
    plan = WatchPlan()
    for knowledge_base_id, source in settings.watched_folders():
        found = planning.scan([source], knowledge_base_id, stores.catalog, settings.storage_options())
        plan.failures += found.failures
        with stores.catalog.registration_lock():   # one registration at a time (ingests, ticks)
            changed = planning.register_changes(found.files, knowledge_base_id, stores.catalog).to_run
            gone = planning.gone_documents(knowledge_base_id, found.roots, found.present, stores.catalog)
            for document_id in steps.purge_documents(gone, stores):
                if instance.has_dynamic_partition(documents_partitions.name, document_id):
                    instance.delete_dynamic_partition(documents_partitions.name, document_id)
                plan.deleted.append(document_id)
        to_run = planning.partition_keys(changed, settings.partitioning)
        fresh = [key for key in to_run if key not in known]
        room = MAX_NEW_KEYS_PER_TICK - len(plan.new_keys)
        plan.skipped_new += max(0, len(fresh) - room)
        admitted = fresh[:max(0, room)]
        plan.new_keys += admitted
        known.update(admitted)
        selected = {key for key in to_run if key in known}
        admitted_docs = [d for d in changed if planning.partition_key(d, settings.partitioning) in selected]
        versions = {d.document_id: d.version for d in stores.catalog.get_documents(admitted_docs).values()}
        for start, end, _ in planning.contiguous_ranges([*existing, *plan.new_keys], selected,
                                                        settings.run_batch_size):
            # the same documents at the same versions never launch twice
            key_material = f"{start}..{end}:" + ",".join(f"{k}@{v}" for k, v in sorted(versions.items()))
            plan.run_requests.append(dg.RunRequest(
                run_key=hashlib.sha256(key_material.encode()).hexdigest()[:32],
                tags=planning.range_tags(start, end, knowledge_base_id)))
    return plan


def build_watched_folders_sensor(settings: Settings) -> dg.SensorDefinition:
    """The sensor of the KB_WATCH folders (running by default when KB_WATCH is set)."""

    @dg.sensor(job=ingest_documents, minimum_interval_seconds=settings.watch_interval_seconds,
               default_status=dg.DefaultSensorStatus.RUNNING if settings.watch else dg.DefaultSensorStatus.STOPPED)
    def watched_folders_sensor(context: dg.SensorEvaluationContext):
        """Materializes new and changed files of the KB_WATCH folders and purges deleted ones."""
        if not settings.watch:
            return dg.SkipReason("KB_WATCH is not set: no folder to watch")
        plan = plan_watched_folders(context.instance, settings)
        if plan.deleted:
            context.log.info(f"purged {len(plan.deleted)} deleted documents")
        for failure in plan.failures:
            context.log.warning(f"{failure.source_uri}: {failure.reason}")
        if plan.skipped_new:
            context.log.info(f"{plan.skipped_new} new documents wait for the next tick")
        if not plan.run_requests:
            return dg.SkipReason(f"nothing changed ({len(plan.deleted)} purged)")
        return dg.SensorResult(run_requests=plan.run_requests,
                               dynamic_partitions_requests=[documents_partitions.build_add_request(plan.new_keys)])

    return watched_folders_sensor
