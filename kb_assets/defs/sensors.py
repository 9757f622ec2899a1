"""Keep watched folders current: new and changed files become runs, deleted files are purged.

``KB_WATCH="kbA=/path/a;kbB=/path/b"`` names the folders. Per-file state lives in Postgres (the
``documents`` table), not in the cursor; at most ``MAX_NEW_KEYS_PER_TICK`` new partitions are added a
tick (FIELD-NOTES: larger first ticks grow quadratically in the daemon).
"""

import hashlib
from dataclasses import dataclass, field

import dagster as dg

from kb_assets.defs.jobs import ingest_documents
from kb_assets.defs.partitions import documents_partitions
from kb_assets.defs.resources import build_resources
from kb_assets.ingest import contiguous_ranges, purge_missing, range_tags, register_changes, scan
from kb_assets.settings import Settings

MAX_NEW_KEYS_PER_TICK = 1000


@dataclass
class WatchPlan:
    run_requests: list[dg.RunRequest] = field(default_factory=list)
    new_keys: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped_new: int = 0


def plan_watched_folders(instance: dg.DagsterInstance, settings: Settings) -> WatchPlan:
    """Register changes of every watched folder and plan one run per contiguous range of them."""
    catalog = build_resources(settings)["catalog"].catalog()
    existing = instance.get_dynamic_partitions(documents_partitions.name)
    known = set(existing)
    plan = WatchPlan()
    for knowledge_base_id, folder in settings.watched_folders():
        files, roots = scan([folder], knowledge_base_id)
        to_run = register_changes(files, knowledge_base_id, catalog).to_run
        plan.deleted += purge_missing(knowledge_base_id, roots, {f.document_id for f in files}, settings, instance)
        fresh = [key for key in to_run if key not in known]
        room = MAX_NEW_KEYS_PER_TICK - len(plan.new_keys)
        plan.skipped_new += max(0, len(fresh) - room)
        admitted = fresh[:max(0, room)]
        plan.new_keys += admitted
        known.update(admitted)
        selected = {key for key in to_run if key in known}
        versions = {d.document_id: d.version for d in catalog.get_documents(sorted(selected)).values()}
        for start, end, _ in contiguous_ranges([*existing, *plan.new_keys], selected, settings.run_batch_size):
            # the same documents at the same versions never launch twice
            key_material = f"{start}..{end}:" + ",".join(f"{k}@{versions.get(k)}" for k in sorted(selected))
            plan.run_requests.append(dg.RunRequest(
                run_key=hashlib.sha256(key_material.encode()).hexdigest()[:32],
                tags=range_tags(start, end, knowledge_base_id)))
    return plan


@dg.sensor(job=ingest_documents, minimum_interval_seconds=Settings.from_env().watch_interval_seconds,
           default_status=dg.DefaultSensorStatus.RUNNING if Settings.from_env().watch
           else dg.DefaultSensorStatus.STOPPED)
def watched_folders_sensor(context: dg.SensorEvaluationContext):
    """Materializes new and changed files of the KB_WATCH folders and purges deleted ones."""
    settings = Settings.from_env()
    if not settings.watch:
        return dg.SkipReason("KB_WATCH is not set: no folder to watch")
    plan = plan_watched_folders(context.instance, settings)
    if plan.deleted:
        context.log.info(f"purged {len(plan.deleted)} deleted documents")
    if plan.skipped_new:
        context.log.info(f"{plan.skipped_new} new documents wait for the next tick")
    if not plan.run_requests:
        return dg.SkipReason(f"nothing changed ({len(plan.deleted)} purged)")
    return dg.SensorResult(run_requests=plan.run_requests,
                           dynamic_partitions_requests=[documents_partitions.build_add_request(plan.new_keys)])
