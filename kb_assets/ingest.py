"""``kb-assets ingest``: register files as document partitions, materialize what changed, purge what is gone.

Everything goes through Dagster: documents are added as dynamic partitions of the instance at
``DAGSTER_HOME`` and materialized by in-process runs of the ``ingest_documents`` job, one run per
contiguous range of changed partitions (at most ``run_batch_size`` documents a run).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import dagster as dg

from kb_assets import steps
from kb_assets.defs.partitions import documents_partitions
from kb_assets.defs.resources import build_resources
from kb_assets.index.collections import published_collection
from kb_assets.settings import Settings

IGNORED_NAMES = {".DS_Store", "Thumbs.db"}
# step events still go to the instance (the UI shows them); the terminal shows progress lines
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


@dataclass
class SourceFile:
    path: Path
    source_path: str          # relative to the folder given to ingest
    document_id: str
    sha256: str
    size: int


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
    """The instance at DAGSTER_HOME (default $KB_HOME/dagster, SQLite), shared with ``dagster dev``."""
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(settings.dagster_home)))
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text("telemetry:\n  enabled: false\n")
    return dg.DagsterInstance.get()


def scan(paths: list[Path], knowledge_base_id: str) -> tuple[list[SourceFile], list[Path]]:
    """Files under the given paths (hidden files skipped) with their ids and hashes, and the roots."""
    files, roots = [], []
    for given in paths:
        given = given.expanduser().resolve()
        if not given.exists():
            raise FileNotFoundError(f"{given}: no such file or folder")
        root = given if given.is_dir() else given.parent
        roots.append(given)
        candidates = sorted(given.rglob("*")) if given.is_dir() else [given]
        for path in candidates:
            relative = path.relative_to(root)
            if not path.is_file() or path.name in IGNORED_NAMES or any(p.startswith(".") for p in relative.parts):
                continue
            data = path.read_bytes()
            source_path = relative.as_posix()
            files.append(SourceFile(path, source_path, steps.document_id_for(knowledge_base_id, source_path),
                                    hashlib.sha256(data).hexdigest(), len(data)))
    return files, roots


def contiguous_ranges(ordered_keys: list[str], selected: set[str], max_size: int) -> list[tuple[str, str, int]]:
    """Runs of selected keys that are adjacent in partition order, cut at max_size: (start, end, count)."""
    ranges, current = [], []
    for key in ordered_keys:
        if key in selected and len(current) < max_size:
            current.append(key)
            continue
        if current:
            ranges.append((current[0], current[-1], len(current)))
        current = [key] if key in selected else []
    if current:
        ranges.append((current[0], current[-1], len(current)))
    return ranges


@dataclass
class Changes:
    """What a scan found against the catalog; changed and new documents are registered pending."""

    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def to_run(self) -> list[str]:
        return [*self.new, *self.changed]


def register_changes(files: list[SourceFile], knowledge_base_id: str, catalog) -> Changes:
    """Compare scanned files with the catalog and register the new and changed ones (status pending)."""
    known = catalog.get_documents([f.document_id for f in files])
    changes = Changes()
    with catalog.connect() as conn:
        for source in files:
            previous = known.get(source.document_id)
            if previous is None or previous.status == "deleted":
                changes.new.append(source.document_id)
            elif previous.version == source.sha256 and previous.status == "published":
                changes.unchanged.append(source.document_id)
                continue
            else:
                changes.changed.append(source.document_id)
            catalog.register_document(conn, document_id=source.document_id, knowledge_base_id=knowledge_base_id,
                                      source_path=source.source_path, source_uri=str(source.path),
                                      version=source.sha256, size_bytes=source.size)
    return changes


def range_tags(start: str, end: str, knowledge_base_id: str) -> dict[str, str]:
    return {"dagster/asset_partition_range_start": start, "dagster/asset_partition_range_end": end,
            "kb/knowledge_base_id": knowledge_base_id}


def ingest(paths: list[Path], knowledge_base_id: str, settings: Settings | None = None,
           progress: Callable[[str], None] = lambda message: None) -> IngestReport:
    from kb_assets.definitions import make_definitions  # loads every asset: import on use

    settings = settings or Settings.from_env()
    resources = build_resources(settings)
    catalog = resources["catalog"].catalog()
    instance = dagster_instance(settings)

    files, roots = scan(paths, knowledge_base_id)
    changes = register_changes(files, knowledge_base_id, catalog)
    report = IngestReport(new=changes.new, changed=changes.changed, unchanged=changes.unchanged)
    to_run = changes.to_run

    existing_keys = set(instance.get_dynamic_partitions(documents_partitions.name))
    new_keys = [key for key in to_run if key not in existing_keys]
    if new_keys:
        instance.add_dynamic_partitions(documents_partitions.name, new_keys)

    report.deleted = purge_missing(knowledge_base_id, roots, {f.document_id for f in files}, settings, instance)

    progress(f"{len(files)} files: {len(report.new)} new, {len(report.changed)} changed, "
             f"{len(report.unchanged)} unchanged, {len(report.deleted)} deleted")
    if to_run:
        job = make_definitions(settings).resolve_job_def("ingest_documents")
        ordered = instance.get_dynamic_partitions(documents_partitions.name)
        done = 0
        for start, end, count in contiguous_ranges(ordered, set(to_run), settings.run_batch_size):
            result = job.execute_in_process(instance=instance, raise_on_error=False, run_config=QUIET_RUN_CONFIG,
                                            tags=range_tags(start, end, knowledge_base_id))
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
    client = resources["milvus"].client()
    report.published = {"alias": settings.alias, "collection": published_collection(client, settings.alias)}
    if to_run:  # the runs loaded the model: knowing its collection costs nothing now
        target = resources["embedding_model"].spec().collection_name()
        if report.published["collection"] != target:
            report.warnings.append(f"the configured embedding spec writes to {target}, but the alias "
                                   f"{settings.alias} publishes {report.published['collection']}: "
                                   "run kb-assets migrate to publish it")
    return report


def purge_missing(knowledge_base_id: str, roots: list[Path], present: set[str], settings: Settings,
                  instance: dg.DagsterInstance) -> list[str]:
    """Purge documents of the knowledge base whose source lay under the given roots and is gone."""
    resources = build_resources(settings)
    catalog = resources["catalog"].catalog()
    gone = []
    for doc in catalog.list_documents([knowledge_base_id]):
        if doc.status == "deleted" or doc.document_id in present:
            continue
        source = Path(doc.source_uri)
        if any(source == root or root in source.parents for root in roots):
            gone.append(doc)
    if not gone:
        return []
    client = resources["milvus"].client()
    collections = [c["name"] for c in catalog.collections() if client.has_collection(c["name"])]
    store, lake = resources["object_store"].store(), resources["lake"].lake()
    for doc in gone:
        steps.purge_document(doc, catalog, store, lake, client, collections)
        if instance.has_dynamic_partition(documents_partitions.name, doc.document_id):
            instance.delete_dynamic_partition(documents_partitions.name, doc.document_id)
    return [doc.document_id for doc in gone]
