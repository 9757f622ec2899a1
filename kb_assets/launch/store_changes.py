"""Store changes that are runs of their own: purging documents whose files are gone (``purge_documents``),
``verify --repair`` (``repair_stores``) and the collection migration (backfill runs of the document job,
then one ``publish_collection`` run)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from kb_assets.defs.migration import migration_plans
from kb_assets.launch.runs import Progress, execute, run_in_order
from kb_assets.pipeline.planning import MIGRATION_TAG
from kb_assets.stores import Stores
from kb_assets.stores.catalog import Document


def purge(
    defs: dg.Definitions, instance: dg.DagsterInstance, gone: list[Document], log_file: Path | None = None
) -> list[dict]:
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
        log_file=log_file,
    )
    if not result.success:
        raise RuntimeError(f"the purge run {result.run_id} failed: see it in the Dagster UI")
    return result.output_for_node("purge")


def repair(defs: dg.Definitions, instance: dg.DagsterInstance, log_file: Path | None = None) -> dict:
    """``verify --repair`` as a ``repair_stores`` run; returns verify's report."""
    result = execute(defs.resolve_job_def("repair_stores"), instance, {}, log_file=log_file)
    if not result.success:
        raise RuntimeError(f"the repair run {result.run_id} failed: see it in the Dagster UI")
    return {**result.output_for_node("repair"), "runId": result.run_id}


def migrate(
    defs: dg.Definitions,
    stores: Stores,
    instance: dg.DagsterInstance,
    due: dict,
    progress: Progress = lambda message: None,
) -> dict:
    """Backfill the configured spec's collection from the lake, then validate and swap (``due``: what
    ``migration.migration_due`` found; ``defs``: the definitions of ``stores.settings``). Returns the
    report ``kb-assets migrate`` prints."""
    settings = stores.settings
    plans = migration_plans(settings, stores, instance)
    progress(
        f"migration to {settings.embedding_model}: {sum(len(p.documents) for p in plans)} documents to "
        f"backfill into the new collection ({due['reason']})"
    )
    log_file = settings.runs_log
    run_ids = run_in_order(defs, instance, stores.catalog, plans, progress, log_file)
    result = execute(
        defs.resolve_job_def("publish_collection"),
        instance,
        {MIGRATION_TAG: settings.embedding_model, "kb/store_change": "migration"},
        log_file=log_file,
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
