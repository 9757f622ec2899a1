"""``kb-assets ingest``: register files as document partitions, materialize what changed, purge what is gone.

Everything goes through Dagster: documents are added as dynamic partitions of the instance at
``DAGSTER_HOME`` (default ``$KB_HOME/dagster``; with ``KB_PARTITIONING=buckets:N`` their hash
buckets) and materialized by runs of the ``ingest_documents`` job, one run per contiguous range of
changed partitions (at most ``run_batch_size`` partitions a run, and at least one range for each of
``KB_CONCURRENT_RUNS`` runs at once: runs.py). The plan (scan, register, ranges, purge) is
``kb_assets.planning``; registration is serialized across concurrent ingests and sensor ticks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import dagster as dg

from kb_assets import planning, steps
from kb_assets.defs.partitions import documents_partitions
from kb_assets.runs import dagster_instance, execute_runs
from kb_assets.settings import Settings
from kb_assets.stores import Stores
from kb_assets.stores.vectors import published_collection


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


def purge(gone: list, stores: Stores, instance: dg.DagsterInstance) -> list[str]:
    """Remove documents whose files are gone from every store and their partitions from the instance
    (a document's own partition; a hash bucket stays)."""
    for document_id in steps.purge_documents(gone, stores):
        if instance.has_dynamic_partition(documents_partitions.name, document_id):
            instance.delete_dynamic_partition(documents_partitions.name, document_id)
    return [doc.document_id for doc in gone]


def register(paths: list[Path | str], knowledge_base_id: str, stores: Stores, instance: dg.DagsterInstance,
             settings: Settings) -> tuple[IngestReport, list[str], list[str], int]:
    """Scan, register the changes, add their partitions and purge what is gone, one ingest or sensor
    tick at a time (the registration lock): the report so far, the documents to run, their partitions
    and how many files were found. An entry that cannot be named, stat-ed or read is a failure in the
    report (``documentId`` null when its name is not UTF-8); the other entries go on."""
    catalog = stores.catalog
    found = planning.scan(paths, knowledge_base_id, catalog, settings.storage_options())
    with catalog.registration_lock():
        changes = planning.register_changes(found.files, knowledge_base_id, catalog)
        report = IngestReport(new=changes.new, changed=changes.changed, unchanged=changes.unchanged,
                              failures=[failure.as_json() for failure in found.failures])
        keys = planning.partition_keys(changes.to_run, settings.partitioning)
        existing_keys = set(instance.get_dynamic_partitions(documents_partitions.name))
        new_keys = [key for key in keys if key not in existing_keys]
        if new_keys:
            instance.add_dynamic_partitions(documents_partitions.name, new_keys)
        gone = planning.gone_documents(knowledge_base_id, found.roots, found.present, catalog)
        report.deleted = purge(gone, stores, instance)
    return report, changes.to_run, keys, len(found.files)


def ingest(paths: list[Path | str], knowledge_base_id: str, settings: Settings,
           progress: Callable[[str], None] = lambda message: None) -> IngestReport:
    """Ingest local folders or files and s3:// prefixes (read with the AWS_* settings) into a knowledge base;
    documents whose sources are gone are purged."""
    stores = Stores(settings)
    catalog = stores.catalog
    instance = dagster_instance(settings)
    report, to_run, keys, files = register(paths, knowledge_base_id, stores, instance, settings)
    unreadable = len(report.failures)
    progress(f"{files} files: {len(report.new)} new, {len(report.changed)} changed, "
             f"{len(report.unchanged)} unchanged, {len(report.deleted)} deleted"
             + (f", {unreadable} unreadable" if unreadable else ""))
    if keys:
        ordered = instance.get_dynamic_partitions(documents_partitions.name)
        runs = max(1, settings.concurrent_runs)
        batch = max(1, min(settings.run_batch_size, -(-len(keys) // runs)))   # at least one range a run
        ranges = [planning.range_tags(start, end, knowledge_base_id)
                  for start, end, _ in planning.contiguous_ranges(ordered, set(keys), batch)]

        def done(run_id: str) -> None:
            docs = catalog.get_documents(to_run)
            finished = sum(1 for d in docs.values() if d.status in ("published", "failed"))
            progress(f"documents {finished}/{len(to_run)}: pages {sum(d.page_count or 0 for d in docs.values())}, "
                     f"chunks {sum(d.chunk_count or 0 for d in docs.values() if d.status == 'published')}")

        report.run_ids = execute_runs(ranges, settings, done)

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
