"""The scheduled incremental update: the same plan as the sensor, on a cron (KB_REFRESH_CRON)."""

from __future__ import annotations

import dagster as dg

from kb_assets.defs.jobs import ingest_documents
from kb_assets.defs.partitions import DOCUMENTS_PARTITIONS
from kb_assets.defs.sensors import document_run_request, plan_watched_folders
from kb_assets.settings import Settings
from kb_assets.stores import Stores


def build_incremental_update_schedule(settings: Settings) -> dg.ScheduleDefinition:
    """The schedule of the KB_WATCH folders (stopped by default: the sensor keeps them current)."""

    @dg.schedule(
        job=ingest_documents, cron_schedule=settings.refresh_cron, default_status=dg.DefaultScheduleStatus.STOPPED
    )
    def incremental_update_schedule(context: dg.ScheduleEvaluationContext, stores: dg.ResourceParam[Stores]):
        """Re-scans the KB_WATCH folders: new, changed and stale files are re-materialized from their first
        stale step, unchanged ones cost nothing (deleted files: the folder sensor's purge run)."""
        if not settings.watch:
            return dg.SkipReason("KB_WATCH is not set: no folder to refresh")
        plan = plan_watched_folders(settings, stores, context.instance)
        if plan.new_keys:  # schedules cannot return partition requests: add them before the runs start
            context.instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, plan.new_keys)
        requests = [document_run_request(run, job_name=None) for run in plan.runs]
        if plan.deleted:
            context.log.info(f"{len(plan.deleted)} deleted files: the watched_folders_sensor purges them")
        return requests or dg.SkipReason(f"nothing changed ({len(plan.deleted)} deleted files wait for the sensor)")

    return incremental_update_schedule
