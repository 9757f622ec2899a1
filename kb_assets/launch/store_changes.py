"""Store changes that are runs of their own: purging documents whose files are gone (``purge_documents``),
``verify --repair`` (``repair_stores``) and the collection migration (backfill runs of the document job,
then one ``publish_collection`` run)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import dagster as dg

from kb_assets.defs.migration import migration_plans
from kb_assets.launch.runs import Progress, execute, run_in_order
from kb_assets.lib.json_types import JsonObject
from kb_assets.pipeline.migration import MigrationDue, Validation
from kb_assets.pipeline.planning import MIGRATION_TAG
from kb_assets.pipeline.steps import PurgedDocument
from kb_assets.pipeline.verify import VerifyReport
from kb_assets.stores import Stores
from kb_assets.stores.catalog import Document


@dataclass(frozen=True)
class MigrationReport:
    """What a migration did: ``published`` (swapped), ``failed`` or ``unchanged`` (nothing was due)."""

    status: str
    published: str | None  # the collection the alias serves after it
    validation: Validation | None = None  # None: it failed before validating, or nothing was due
    problems: tuple[str, ...] = ()
    run_ids: list[str] = field(default_factory=list)

    def as_json(self, with_runs: bool = True) -> JsonObject:
        data: JsonObject = self.validation.as_json() if self.validation else {}
        if self.validation is None and self.status != "unchanged":
            data["problems"] = list(self.problems)
        data.update(status=self.status, published=self.published)
        if with_runs and self.status != "unchanged":
            data["runIds"] = self.run_ids
        return data


def purge(
    defs: dg.Definitions, instance: dg.DagsterInstance, gone: list[Document], log_file: Path | None = None
) -> list[PurgedDocument]:
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
    purged: list[PurgedDocument] = result.output_for_node("purge")
    return purged


def repair(defs: dg.Definitions, instance: dg.DagsterInstance, log_file: Path | None = None) -> VerifyReport:
    """``verify --repair`` as a ``repair_stores`` run; returns verify's report, with the run's id."""
    result = execute(defs.resolve_job_def("repair_stores"), instance, {}, log_file=log_file)
    if not result.success:
        raise RuntimeError(f"the repair run {result.run_id} failed: see it in the Dagster UI")
    report: VerifyReport = result.output_for_node("repair")
    return replace(report, run_id=result.run_id)


def migrate(
    defs: dg.Definitions,
    stores: Stores,
    instance: dg.DagsterInstance,
    due: MigrationDue,
    progress: Progress = lambda message: None,
) -> MigrationReport:
    """Backfill the configured spec's collection from the lake, then validate and swap (``due``: what
    ``migration.migration_due`` found; ``defs``: the definitions of ``stores.settings``). Returns the
    report ``kb-assets migrate`` prints."""
    settings = stores.settings
    plans = migration_plans(settings, stores, instance)
    progress(
        f"migration to {settings.embedding_model}: {sum(len(p.documents) for p in plans)} documents to "
        f"backfill into the new collection ({due.reason})"
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
    validation = None
    for event in result.asset_materializations_for_node("collection_candidate"):
        validation = Validation.from_json(event.metadata["report"].value)  # its JSON
    if validation is None:
        return MigrationReport(
            "failed",
            due.published,
            problems=(f"the publish run {result.run_id} failed before validating",),
            run_ids=run_ids,
        )
    status = "published" if result.success and not validation.problems else "failed"
    published = validation.collection if status == "published" else due.published
    return MigrationReport(status, published, validation, validation.problems, run_ids)
