"""``kb-assets ingest``: register files as document partitions, materialize what is new, changed or stale,
purge what is gone, and start a due collection migration.

Everything goes through Dagster: documents are added as dynamic partitions of the instance at
``DAGSTER_HOME`` (default ``$KB_HOME/dagster``) and materialized by in-process runs of the
``ingest_documents`` job, one run per contiguous range of partitions that start at the same first stale
step (at most ``run_batch_size`` documents a run; ``kb_assets.versions`` says what is stale); gone files
are purged by a ``purge_documents`` run; a changed embedding spec starts the migration
(``publish_collection``) unless ``KB_AUTO_MIGRATE=0``. Runs that a killed ``kb-assets`` left STARTED are
marked failed first, and scratch folders of killed processes removed. The plan is ``kb_assets.planning``;
launching, ``kb_assets.defs.launch``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kb_assets import planning
from kb_assets.defs import launch
from kb_assets.defs.launch import QUIET_RUN_CONFIG, dagster_instance  # noqa: F401  (used by tests and benchmarks)
from kb_assets.defs.partitions import documents_partitions
from kb_assets.migration import migration_due
from kb_assets.settings import Settings
from kb_assets.stores import Stores
from kb_assets.stores.scratch import clean_scratch
from kb_assets.stores.vectors import published_collection


@dataclass
class IngestReport:
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    stale: list[dict] = field(default_factory=list)        # unchanged files re-run for a newer pipeline version
    published: dict = field(default_factory=dict)
    migration: dict | None = None
    run_ids: list[str] = field(default_factory=list)
    abandoned_runs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        return {
            "documents": {"new": len(self.new), "changed": len(self.changed), "unchanged": len(self.unchanged),
                          "deleted": len(self.deleted), "failed": len(self.failures)},
            "failures": self.failures,
            "stale": self.stale,
            "published": self.published,
            "migration": self.migration,
            "runIds": self.run_ids,
            "abandonedRuns": self.abandoned_runs,
            "warnings": self.warnings,
        }


def ingest(paths: list[Path | str], knowledge_base_id: str, settings: Settings,
           progress: Callable[[str], None] = lambda message: None) -> IngestReport:
    """Ingest local folders or files and s3:// prefixes (read with the AWS_* settings) into a knowledge base.

    An entry that cannot be named, stat-ed or read is a failure in the report (``documentId`` null when
    its name is not UTF-8); the other entries go on, and documents whose sources are gone are purged."""
    from kb_assets.definitions import make_definitions  # loads every asset: import on use

    stores = Stores(settings)
    catalog = stores.catalog
    instance = dagster_instance(settings)
    report = IngestReport(abandoned_runs=launch.fail_abandoned_runs(instance))
    clean_scratch(settings.scratch_root)

    found = planning.scan(paths, knowledge_base_id, catalog, settings.storage_options())
    changes = planning.register_changes(found.files, knowledge_base_id, catalog)
    report.new, report.changed, report.unchanged = changes.new, changes.changed, changes.unchanged
    report.failures = [failure.as_json() for failure in found.failures]
    defs = make_definitions(settings)
    gone = planning.gone_documents(knowledge_base_id, found.roots, found.present, catalog)
    report.deleted = [purged["documentId"] for purged in launch.purge(defs, instance, gone)]

    docs = list(catalog.get_documents([f.document_id for f in found.files]).values())
    due = migration_due(stores.milvus, settings.alias, settings.embedding_model)
    stale = planning.stale_documents(docs, settings.step_versions(),
                                     {c["name"]: c["model"] for c in catalog.collections()}, migrating=due is not None)
    stale = {key: why for key, why in stale.items() if not why.migration}   # the migration's, below
    report.stale = [{"documentId": key, "step": why.step, "reason": why.reason} for key, why in stale.items()
                    if key in set(changes.unchanged)]
    existing = set(instance.get_dynamic_partitions(documents_partitions.name))
    new_keys = [key for key in stale if key not in existing]
    if new_keys:
        instance.add_dynamic_partitions(documents_partitions.name, new_keys)
    progress(f"{len(found.files)} files: {len(report.new)} new, {len(report.changed)} changed, "
             f"{len(report.unchanged)} unchanged ({len(report.stale)} of them stale), {len(report.deleted)} deleted"
             + (f", {len(found.failures)} unreadable" if found.failures else ""))
    plans = planning.plan_runs(docs, stale, instance.get_dynamic_partitions(documents_partitions.name),
                               settings.run_batch_size)
    report.run_ids = launch.run_plans(defs, instance, catalog, plans, progress)

    if due and settings.auto_migrate:
        report.migration = launch.migrate(settings, stores, instance, due, progress)
        report.run_ids += report.migration.pop("runIds")
    elif due:
        report.warnings.append(f"{due['reason']}: KB_AUTO_MIGRATE=0, so run kb-assets migrate to publish it "
                               "(changed documents are written into both collections meanwhile)")
    after = catalog.get_documents(list(stale))
    for document_id in stale:
        doc = after[document_id]
        if doc.status != "published":
            report.failures.append({"documentId": document_id, "sourceUri": doc.source_uri,
                                    "reason": doc.error or f"not published (status {doc.status})",
                                    "servesLastGoodVersion": doc.serves_last_good_version})
    report.published = {"alias": settings.alias, "collection": published_collection(stores.milvus, settings.alias)}
    return report
