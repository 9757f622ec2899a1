"""``kb-assets ingest``: register files as document partitions, materialize what changed, purge what is gone.

Everything goes through Dagster: documents are added as dynamic partitions of the instance at
``DAGSTER_HOME`` (default ``$KB_HOME/dagster``) and materialized by in-process runs of the
``ingest_documents`` job, one run per contiguous range of changed partitions (at most
``run_batch_size`` documents a run). The plan (scan, register, ranges, purge) is ``kb_assets.planning``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import dagster as dg

from kb_assets import planning, steps
from kb_assets.defs.partitions import documents_partitions
from kb_assets.settings import Settings
from kb_assets.stores import Stores
from kb_assets.stores.vectors import published_collection

# step events still go to the instance (the UI shows them); the terminal shows progress lines
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


@dataclass
class IngestReport:
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    published: dict = field(default_factory=dict)
    run_ids: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        return {
            "documents": {"new": len(self.new), "changed": len(self.changed), "unchanged": len(self.unchanged),
                          "deleted": len(self.deleted), "failed": len(self.failures)},
            "failures": self.failures,
            "published": self.published,
            "runIds": self.run_ids,
            "warnings": self.warnings,
        }


def dagster_instance(settings: Settings) -> dg.DagsterInstance:
    """The instance at ``settings.dagster_home``, shared with ``dagster dev`` (SQLite unless its
    dagster.yaml says otherwise)."""
    home = settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text("telemetry:\n  enabled: false\n")
    return dg.DagsterInstance.from_config(str(home))


def purge(gone: list, stores: Stores, instance: dg.DagsterInstance) -> list[str]:
    """Remove documents whose files are gone from every store and their partitions from the instance."""
    for document_id in steps.purge_documents(gone, stores):
        if instance.has_dynamic_partition(documents_partitions.name, document_id):
            instance.delete_dynamic_partition(documents_partitions.name, document_id)
    return [doc.document_id for doc in gone]


def ingest(paths: list[Path | str], knowledge_base_id: str, settings: Settings,
           progress: Callable[[str], None] = lambda message: None) -> IngestReport:
    """Ingest local folders or files and s3:// prefixes (read with the AWS_* settings) into a knowledge base.

    An entry that cannot be named, stat-ed or read is a failure in the report (``documentId`` null when
    its name is not UTF-8); the other entries go on, and documents whose sources are gone are purged."""
    from kb_assets.definitions import (
        make_definitions,  # loads every asset: import on use
    )

    stores = Stores(settings)
    catalog = stores.catalog
    instance = dagster_instance(settings)

    found = planning.scan(paths, knowledge_base_id, catalog, settings.storage_options())
    changes = planning.register_changes(found.files, knowledge_base_id, catalog)
    report = IngestReport(new=changes.new, changed=changes.changed, unchanged=changes.unchanged,
                          failures=[failure.as_json() for failure in found.failures])
    to_run = changes.to_run

    existing_keys = set(instance.get_dynamic_partitions(documents_partitions.name))
    new_keys = [key for key in to_run if key not in existing_keys]
    if new_keys:
        instance.add_dynamic_partitions(documents_partitions.name, new_keys)

    gone = planning.gone_documents(knowledge_base_id, found.roots, found.present, catalog)
    report.deleted = purge(gone, stores, instance)

    progress(f"{len(found.files)} files: {len(report.new)} new, {len(report.changed)} changed, "
             f"{len(report.unchanged)} unchanged, {len(report.deleted)} deleted"
             + (f", {len(found.failures)} unreadable" if found.failures else ""))
    if to_run:
        job = make_definitions(settings).resolve_job_def("ingest_documents")
        ordered = instance.get_dynamic_partitions(documents_partitions.name)
        done = 0
        for start, end, count in planning.contiguous_ranges(ordered, set(to_run), settings.run_batch_size):
            result = job.execute_in_process(instance=instance, raise_on_error=False, run_config=QUIET_RUN_CONFIG,
                                            tags=planning.range_tags(start, end, knowledge_base_id))
            report.run_ids.append(result.run_id)
            done += count
            docs = catalog.get_documents(to_run)
            progress(f"documents {done}/{len(to_run)}: pages {sum(d.page_count or 0 for d in docs.values())}, "
                     f"chunks {sum(d.chunk_count or 0 for d in docs.values() if d.status == 'published')}")

    docs = catalog.get_documents(to_run)
    for document_id in to_run:
        doc = docs[document_id]
        if doc.status != "published":
            report.failures.append({"documentId": document_id, "sourceUri": doc.source_uri,
                                    "reason": doc.error or f"not published (status {doc.status})"})
    report.published = {"alias": settings.alias, "collection": published_collection(stores.milvus, settings.alias)}
    if to_run:  # the runs loaded the model: knowing its collection costs nothing now
        from kb_assets.stores.models import embedding_spec

        target = embedding_spec(stores.model()).collection_name()
        if report.published["collection"] != target:
            report.warnings.append(f"the configured embedding spec writes to {target}, but the alias "
                                   f"{settings.alias} publishes {report.published['collection']}: "
                                   "run kb-assets migrate to publish it")
    return report
