"""``kb-assets ingest``: register files as document partitions, materialize what is new, changed or stale,
purge what is gone, and start a due collection migration.

Everything goes through Dagster: documents are added as dynamic partitions of the instance at
``DAGSTER_HOME`` (default ``$KB_HOME/dagster``; with ``KB_PARTITIONING=buckets:N`` their hash buckets)
and materialized by runs of the ``ingest_documents`` job, one run per contiguous range of partitions that
start at the same first stale step (at most ``run_batch_size`` documents a run, and at least one range for
each of ``KB_CONCURRENT_RUNS`` runs at once: ``launch/runs.py``; ``kb_assets.pipeline.versions`` says what is
stale); a document that fails in a batch shows failed, the others go on; gone files are purged by a ``purge_documents``
run; a changed embedding spec starts the migration (``publish_collection``) unless ``KB_AUTO_MIGRATE=0``.
Runs that a killed ``kb-assets`` left STARTED are marked failed first, and scratch folders of killed
processes removed. Registration (scan, register, partitions, purge) is serialized across concurrent
ingests and sensor ticks (``Catalog.registration_lock``). The plan is ``kb_assets.pipeline.planning``; the runs
are this layer's (``runs.py``, ``store_changes.py``).

Under hash buckets, a bucket runs from the earliest stale step of its documents and works on those
documents only (``planning.plan_bucket_runs``): new, changed, stale by a pipeline version, retried.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from kb_assets.defs.partitions import DOCUMENTS_PARTITIONS, add_partitions, readable_partition_keys
from kb_assets.defs.provenance import observe_sources
from kb_assets.launch.instance import (
    dagster_instance,
    definitions,
    fail_abandoned_runs,
    reap_log_followers,
)
from kb_assets.launch.runs import run_plans
from kb_assets.launch.store_changes import MigrationReport, migrate, purge
from kb_assets.lib.json_types import JsonObject
from kb_assets.lib.scratch import clean_scratch
from kb_assets.pipeline import planning
from kb_assets.pipeline.migration import migration_due
from kb_assets.pipeline.progress import Watcher, watching
from kb_assets.pipeline.scanning import ScanFailure
from kb_assets.settings import Settings
from kb_assets.stores import Stores
from kb_assets.stores.catalog.connection import connect_retries
from kb_assets.stores.vectors import published_collection


@dataclass(frozen=True)
class IngestFailure:
    """A file that did not publish: unreadable by the scan, failed in a run, or still failing unchanged."""

    source_uri: str
    reason: str
    document_id: str | None = None  # None: its name cannot be read (not UTF-8)
    still_failing: bool = False  # failed before at this version of the file: not run again
    serves_last_good_version: bool | None = None  # None: not known (a scan failure)

    @classmethod
    def of_scan(cls, failure: ScanFailure) -> IngestFailure:
        return cls(failure.source_uri, failure.reason, failure.document_id)

    def as_json(self) -> JsonObject:
        data: JsonObject = {"documentId": self.document_id, "sourceUri": self.source_uri, "reason": self.reason}
        if self.still_failing:
            data["stillFailing"] = True
        if self.serves_last_good_version is not None:
            data["servesLastGoodVersion"] = self.serves_last_good_version
        return data


@dataclass(frozen=True)
class StaleDocument:
    """An unchanged file run again from ``step`` (a newer pipeline version)."""

    document_id: str
    step: str
    reason: str

    def as_json(self) -> JsonObject:
        return {"documentId": self.document_id, "step": self.step, "reason": self.reason}


@dataclass(frozen=True)
class PublishedAlias:
    alias: str
    collection: str | None  # what the alias serves after the ingest (None: nothing yet)


@dataclass
class IngestReport:
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failing: list[str] = field(default_factory=list)  # failed before at the same version of the file
    deleted: list[str] = field(default_factory=list)
    failures: list[IngestFailure] = field(default_factory=list)
    stale: list[StaleDocument] = field(default_factory=list)  # unchanged files re-run for a newer pipeline version
    published: PublishedAlias | None = None
    migration: MigrationReport | None = None
    run_ids: list[str] = field(default_factory=list)
    abandoned_runs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_json(self) -> JsonObject:
        """What ``ingest --json`` prints (and the warm runner answers)."""
        failed = {failure.document_id for failure in self.failures}  # counted as failed, not as new or changed
        return {
            "documents": {
                "new": sum(1 for d in self.new if d not in failed),
                "changed": sum(1 for d in self.changed if d not in failed),
                "unchanged": len(self.unchanged),
                "deleted": len(self.deleted),
                "failed": len(self.failures),
            },
            "failures": [f.as_json() for f in self.failures],
            "stale": [s.as_json() for s in self.stale],
            "published": {"alias": self.published.alias, "collection": self.published.collection}
            if self.published
            else {},
            "migration": self.migration.as_json(with_runs=False) if self.migration else None,
            "runIds": self.run_ids,
            "abandonedRuns": self.abandoned_runs,
            "warnings": self.warnings,
        }


def register(
    paths: list[Path | str],
    knowledge_base_id: str,
    stores: Stores,
    instance: dg.DagsterInstance,
    settings: Settings,
    defs: dg.Definitions | None = None,
) -> tuple[IngestReport, list[str], list[str], int]:
    """Scan, register the changes, add their partitions and purge what is gone (a ``purge_documents``
    run of ``defs``), one ingest or sensor tick at a time (the registration lock): the report so far,
    the new and changed documents, their partitions and how many files were found. An entry that cannot
    be named, stat-ed or read is a failure in the report (``documentId`` null when its name is not
    UTF-8); the other entries go on."""
    catalog = stores.catalog
    with catalog.registration_lock():
        readable_partition_keys(catalog, instance)
        found = planning.scan(paths, knowledge_base_id, catalog, settings.storage_options())
        changes = planning.register_changes(found.files, knowledge_base_id, catalog)
        report = IngestReport(
            new=changes.new,
            changed=changes.changed,
            unchanged=changes.unchanged,
            failing=changes.failing,
            failures=[IngestFailure.of_scan(failure) for failure in found.failures],
        )
        registered = catalog.get_documents(changes.to_run)
        keys = planning.partition_keys([registered[d] for d in changes.to_run], settings.partitioning)
        add_partitions(instance, keys)
        observe_sources(instance, [registered[d] for d in changes.to_run], settings.partitioning)
        gone = planning.gone_documents(knowledge_base_id, found.scopes, found.present, catalog)
        if gone:
            purged = purge(defs or definitions(settings), instance, gone, settings.runs_log)
            report.deleted = [row.document_id for row in purged]
    return report, changes.to_run, keys, len(found.files)


def ingest(
    paths: list[Path | str],
    knowledge_base_id: str,
    settings: Settings,
    progress: Callable[[str], None] = lambda message: None,
    retry_failed: bool = False,
    documents: Watcher | None = None,
) -> IngestReport:
    """Ingest local folders or files and s3:// prefixes (read with the AWS_* settings) into a knowledge base;
    documents whose sources are gone are purged. One ingest of a knowledge base at a time: a second one
    waits for the first, then finds what it finished current. A file that failed before and has not
    changed is not run again: it is reported as still failing (``retry_failed`` runs it again).
    ``documents`` hears how many planned documents are done while the runs run (``progress.watching``)."""
    stores = Stores.shared(settings)  # the runs it executes here get these (the resource `stores`)

    def waiting() -> None:
        progress(f"another ingest of {knowledge_base_id} is running: waiting for it to finish")

    with connect_retries():  # a Postgres restart is waited out (bounded), not fatal
        with stores.catalog.ingest_lock(knowledge_base_id, waiting):
            return _ingest(paths, knowledge_base_id, settings, stores, progress, retry_failed, documents)


def _ingest(
    paths: list[Path | str],
    knowledge_base_id: str,
    settings: Settings,
    stores: Stores,
    progress: Callable[[str], None],
    retry_failed: bool = False,
    documents: Watcher | None = None,
) -> IngestReport:
    """``ingest`` while holding the knowledge base's ingest lock."""
    catalog = stores.catalog
    instance = dagster_instance(settings)
    abandoned = fail_abandoned_runs(instance)
    reap_log_followers(instance)  # what killed runs left behind, as clean_scratch kills their parse workers
    clean_scratch(settings.scratch_root)
    defs = definitions(settings)
    report, to_run, _, files = register(paths, knowledge_base_id, stores, instance, settings, defs)
    report.abandoned_runs = abandoned

    retried = report.failing if retry_failed else []
    docs = list(catalog.get_documents([*to_run, *report.unchanged, *retried]).values())
    due = migration_due(stores.milvus, stores.catalog, settings.alias, settings.embedding_model)
    stale = planning.stale_under(docs, settings, catalog, migrating=due is not None)
    stale = {key: why for key, why in stale.items() if not why.migration}  # the migration's, below
    unchanged = set(report.unchanged)
    report.stale = [StaleDocument(key, why.step, why.reason) for key, why in stale.items() if key in unchanged]
    keys = planning.partition_keys([doc for doc in docs if doc.document_id in stale], settings.partitioning)
    with catalog.registration_lock():
        add_partitions(instance, keys)
    ordered = instance.get_dynamic_partitions(DOCUMENTS_PARTITIONS)
    plans = planning.plan_document_runs(
        docs, stale, ordered, settings, catalog, retry_failed, runs_at_once=max(1, settings.concurrent_runs)
    )
    running = len({doc.document_id for plan in plans for doc in plan.documents})
    current = len(report.unchanged) - len(report.stale)
    progress(  # the plan, before the runs: what fails in them is counted as failed in the report, not as new
        f"{files} files: {running} to run ({len(report.new)} new, {len(report.changed)} changed, "
        f"{len(report.stale)} stale), {current} current, {len(report.deleted)} deleted"
        + (f", {len(report.failures)} unreadable" if report.failures else "")
        + (
            f", {len(report.failing)} still failing" + ("" if retry_failed else " (--retry-failed retries them)")
            if report.failing
            else ""
        )
    )
    with watching(catalog, [doc.document_id for plan in plans for doc in plan.documents], documents):
        report.run_ids = run_plans(settings, defs, instance, catalog, plans, progress)

    if due and settings.auto_migrate:
        report.migration = migrate(defs, stores, instance, due, progress)
        report.run_ids += report.migration.run_ids
    elif due:
        report.warnings.append(
            f"{due.reason}: KB_AUTO_MIGRATE=0, so run kb-assets migrate to publish it "
            "(changed documents are written into both collections meanwhile)"
        )
    still = catalog.get_documents([d for d in report.failing if d not in retried])
    for doc in still.values():  # the same file failed before: reported, not run again (--retry-failed runs it)
        report.failures.append(
            IngestFailure(
                doc.source_uri,
                doc.error or "failed",
                doc.document_id,
                still_failing=True,
                serves_last_good_version=doc.serves_last_good_version,
            )
        )
    ran = list(dict.fromkeys(doc.document_id for plan in plans for doc in plan.documents))
    after = catalog.get_documents(ran)
    for document_id in ran:
        doc = after[document_id]
        if doc.status != "published":
            report.failures.append(
                IngestFailure(
                    doc.source_uri,
                    doc.error or f"not published (status {doc.status})",
                    document_id,
                    serves_last_good_version=doc.serves_last_good_version,
                )
            )
    report.published = PublishedAlias(
        settings.alias, published_collection(stores.milvus, stores.catalog, settings.alias)
    )
    return report
