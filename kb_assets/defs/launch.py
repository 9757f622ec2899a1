"""Launching runs in-process, as ``kb-assets ingest``, ``migrate`` and ``verify --repair`` do (no daemon
needed; ``dagster dev`` shows every run, since they share the instance at ``DAGSTER_HOME``).

- Every run carries the launching process's token (``kb/process``): the next command marks runs that a
  killed process left ``STARTED`` as failed (``fail_abandoned_runs``; runs the daemon launched are its run
  monitoring's).
- A document that fails in a batch run is not materialized from the step it failed at, and the run
  fails at its end, so Dagster marks exactly that document's partitions failed (``document_steps``):
  no run of its own is needed.
- A migration is backfill runs of the document job, then one ``publish_collection`` run (``migrate``).
"""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg

from kb_assets.defs.partitions import DOCUMENTS_PARTITIONS, add_partitions, documents_partitions
from kb_assets.lib.processes import process_alive, process_token
from kb_assets.pipeline import planning
from kb_assets.pipeline.planning import RunPlan, migration_documents, plan_runs, stale_documents
from kb_assets.pipeline.versions import from_step
from kb_assets.settings import Settings
from kb_assets.stores import Stores
from kb_assets.stores.catalog import Catalog, Document

# step events still go to the instance (the UI shows them); the terminal shows progress lines
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
PROCESS_TAG = "kb/process"
MIGRATION_TAG = "kb/migration"
Progress = Callable[[str], None]


def dagster_instance(settings: Settings) -> dg.DagsterInstance:
    """The instance at ``settings.dagster_home``, shared with ``dagster dev`` (SQLite unless its
    dagster.yaml says otherwise)."""
    home = settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text("telemetry:\n  enabled: false\n")
    return dg.DagsterInstance.from_config(str(home))


def fail_abandoned_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark failed the runs that a process of this host started and that are still STARTED (or STARTING)
    although that process is gone (killed: no handler ran); returns their run ids."""
    failed = []
    for run in instance.get_runs(
        filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING])
    ):
        token = run.tags.get(PROCESS_TAG)
        if token and process_alive(token) is False:
            instance.report_run_failed(
                run,
                message=f"the process that ran this run ({token}) is gone (killed?); "
                "marked failed by the next kb-assets command",
            )
            failed.append(run.run_id)
    return failed


def selection(step: str) -> tuple[str, ...] | None:
    """The asset selection of a run that starts at ``step``: every asset from raw_files (None, so
    ``page_images`` too), else the step and those after it (a page still without a render after a
    re-parse is rendered on its first request)."""
    return None if step == "raw_files" else from_step(step)


def execute(
    job: dg.JobDefinition,
    instance: dg.DagsterInstance,
    tags: dict[str, str],
    asset_selection: tuple[str, ...] | None = None,
    run_config: dict | None = None,
):
    """One in-process run, tagged with this process; errors are the run's (never raised here)."""
    return job.execute_in_process(
        instance=instance,
        raise_on_error=False,
        run_config={**QUIET_RUN_CONFIG, **(run_config or {})},
        tags={**tags, PROCESS_TAG: process_token()},
        asset_selection=[dg.AssetKey(key) for key in asset_selection] if asset_selection else None,
    )


def run_plans(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    catalog: Catalog,
    plans: list[RunPlan],
    progress: Progress = lambda message: None,
) -> list[str]:
    """Execute the planned runs of the document job, one after the other."""
    job = defs.resolve_job_def("ingest_documents")
    run_ids, done, total = [], 0, sum(len(p.documents) for p in plans)
    for plan in plans:
        run_ids.append(execute(job, instance, plan.tags(), selection(plan.step)).run_id)
        done += len(plan.documents)
        docs = catalog.get_documents([d.document_id for d in plan.documents]).values()
        progress(
            f"documents {done}/{total} (from {plan.step}): "
            f"{sum(d.status == 'published' for d in docs)} published, {sum(d.status == 'failed' for d in docs)} failed"
        )
    return run_ids


def shown_failed(instance: dg.DagsterInstance, step: str, key: str | None) -> bool:
    """Whether the UI shows the document's partition ``key`` of ``step`` failed."""
    if not key:
        return False
    status = instance.get_status_by_partition(dg.AssetKey(step), [key], documents_partitions) or {}
    return status.get(key) == dg.AssetPartitionStatus.FAILED


def purge(defs: dg.Definitions, instance: dg.DagsterInstance, gone: list[Document]) -> list[dict]:
    """Purge documents whose files are gone, as a ``purge_documents`` run; returns what was removed."""
    if not gone:
        return []
    tags = {
        "kb/knowledge_base_id": ",".join(sorted({d.knowledge_base_id for d in gone}))[:200],
        "kb/documents": str(len(gone)),
    }
    result = execute(
        defs.resolve_job_def("purge_documents"),
        instance,
        tags,
        run_config={"ops": {"purge": {"config": {"document_ids": [d.document_id for d in gone]}}}},
    )
    if not result.success:
        raise RuntimeError(f"the purge run {result.run_id} failed: see it in the Dagster UI")
    return result.output_for_node("purge")


def repair(defs: dg.Definitions, instance: dg.DagsterInstance) -> dict:
    """``verify --repair`` as a ``repair_stores`` run; returns verify's report."""
    result = execute(defs.resolve_job_def("repair_stores"), instance, {})
    if not result.success:
        raise RuntimeError(f"the repair run {result.run_id} failed: see it in the Dagster UI")
    return {**result.output_for_node("repair"), "runId": result.run_id}


def migration_plans(settings: Settings, stores: Stores, instance: dg.DagsterInstance) -> list[RunPlan]:
    """The backfill runs a migration still needs: documents that serve a version and are not yet in the
    configured spec's collection."""
    catalog = stores.catalog
    docs = [d for d in catalog.list_documents() if d.status != "deleted"]
    current = settings.step_versions()
    stale = stale_documents(docs, current, {c["name"]: c["model"] for c in catalog.collections()})
    picked = migration_documents(docs, stale, current)
    if planning.bucket_count(settings.partitioning) is not None:  # the buckets of the picked documents
        backfilled = [d for d in docs if d.document_id in picked]
        add_partitions(instance, planning.partition_keys(backfilled, settings.partitioning))
        plans = planning.plan_bucket_runs(
            backfilled,
            picked,
            settings.partitioning,
            instance.get_dynamic_partitions(DOCUMENTS_PARTITIONS),
            settings.run_batch_size,
            retry_failed=False,
            migration=settings.embedding_model,
            max_documents=settings.bucket_run_documents,
        )
        planning.claim_documents(plans, catalog)
        return plans
    # a document published under hash buckets has no partition of its own yet (the mode was switched)
    add_partitions(instance, [d.partition_key for d in docs if d.document_id in picked and d.partition_key])
    ordered = instance.get_dynamic_partitions(DOCUMENTS_PARTITIONS)
    known = set(ordered)
    keys = {d.document_id: d.partition_key for d in docs}
    picked = {document_id: why for document_id, why in picked.items() if keys.get(document_id) in known}
    return plan_runs(
        [d for d in docs if d.document_id in picked],
        picked,
        ordered,
        settings.run_batch_size,
        retry_failed=False,
        migration=settings.embedding_model,
    )


def migrate(
    defs: dg.Definitions,
    settings: Settings,
    stores: Stores,
    instance: dg.DagsterInstance,
    due: dict,
    progress: Progress = lambda message: None,
) -> dict:
    """Backfill the configured spec's collection from the lake, then validate and swap (``due``: what
    ``migration.migration_due`` found; ``defs``: ``make_definitions(settings)``). Returns the report
    ``kb-assets migrate`` prints."""
    plans = migration_plans(settings, stores, instance)
    progress(
        f"migration to {settings.embedding_model}: {sum(len(p.documents) for p in plans)} documents to "
        f"backfill into the new collection ({due['reason']})"
    )
    run_ids = run_plans(defs, instance, stores.catalog, plans, progress)
    result = execute(
        defs.resolve_job_def("publish_collection"),
        instance,
        {MIGRATION_TAG: settings.embedding_model, "kb/store_change": "migration"},
    )
    run_ids.append(result.run_id)
    report = {}
    for event in result.asset_materializations_for_node("collection_candidate"):
        report = event.metadata["report"].value
    if not report:
        return {
            "status": "failed",
            "problems": [f"the publish run {result.run_id} failed before validating"],
            "published": due["published"],
            "runIds": run_ids,
        }
    status = "published" if result.success and not report["problems"] else "failed"
    return {
        **report,
        "status": status,
        "published": report["collection"] if status == "published" else due["published"],
        "runIds": run_ids,
    }
