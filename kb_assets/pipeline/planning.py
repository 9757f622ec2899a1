"""What ``kb-assets ingest``, the watched-folder sensor and the schedule share: scan sources (local folders
and s3:// prefixes), register new and changed files as pending documents, find from which step each
document is stale (``kb_assets.pipeline.versions``), cut the stale partitions into runs that start at that step
(their ranges: ``kb_assets.pipeline.ranges``), and find the documents whose files are gone.

Scanning is ``kb_assets.pipeline.scanning`` (its names are importable from here too).

Plain Python over the stores; nothing here knows the Dagster definitions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from kb_assets.pipeline.identity import readable_key
from kb_assets.pipeline.ranges import contiguous_ranges, spanning_ranges
from kb_assets.pipeline.scanning import (  # noqa: F401  (planning's names since before the split)
    Scan,
    ScanFailure,
    Scope,
    SourceFile,
    scan,
    sha256_bytes,
    sha256_stream,
)
from kb_assets.pipeline.versions import STEPS, Staleness, staleness, step_versions
from kb_assets.settings import Settings
from kb_assets.stores.catalog import Catalog, Document


# registering, gone documents ---------------------------------------------------------
@dataclass
class Changes:
    """What a scan found against the catalog; changed and new documents are registered pending."""

    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failing: list[str] = field(default_factory=list)  # failed before at this very version: not retried unasked

    @property
    def to_run(self) -> list[str]:
        return [*self.new, *self.changed]


def register_changes(files: list[SourceFile], knowledge_base_id: str, catalog: Catalog) -> Changes:
    """Compare scanned files with the catalog and register the new and changed ones (status pending); a
    document registered for the first time gets its readable partition key. Call it under the
    registration lock (keys are unique)."""
    known = catalog.get_documents([f.document_id for f in files])
    keys = new_partition_keys(
        [(knowledge_base_id, f.source_root, f.source_path, f.document_id) for f in files if f.document_id not in known],
        catalog,
    )
    changes = Changes()
    with catalog.connect() as conn:
        for source in files:
            previous = known.get(source.document_id)
            if previous is not None and previous.status == "published" and previous.version == source.sha256:
                changes.unchanged.append(source.document_id)
            elif previous is not None and previous.status == "failed" and previous.version == source.sha256:
                changes.failing.append(source.document_id)
            else:
                new = (
                    previous is None
                    or previous.status == "deleted"
                    or (  # or registered by an ingest still running
                        previous.status == "pending"
                        and previous.version == source.sha256
                        and not previous.published_version
                    )
                )
                (changes.new if new else changes.changed).append(source.document_id)
                catalog.register_document(
                    conn,
                    document_id=source.document_id,
                    knowledge_base_id=knowledge_base_id,
                    source_root=source.source_root,
                    source_path=source.source_path,
                    source_uri=source.uri,
                    version=source.sha256,
                    size_bytes=source.size,
                    partition_key=keys.get(source.document_id),
                )
            if source.etag:
                catalog.record_source_etag(conn, source.document_id, source.etag, source.sha256)
    return changes


def new_partition_keys(documents: list[tuple[str, str, str, str]], catalog: Catalog) -> dict[str, str]:
    """Readable partition keys for documents that have none: (kb, root, path, document id) -> by id, none
    of them a key another document holds."""
    plain = {doc[3]: readable_key(*doc) for doc in documents}
    taken = catalog.taken_partition_keys(list(plain.values()))
    keys: dict[str, str] = {}
    for kb, root, path, document_id in documents:
        key = plain[document_id]
        if key in taken:
            key = readable_key(kb, root, path, document_id, taken)
        taken.add(key)
        keys[document_id] = key
    return keys


# partitions: one per document, or hash buckets of document ids (KB_PARTITIONING) ------------------
BUCKET_PREFIX = "bucket-"


def bucket_count(partitioning: str) -> int | None:
    """N of ``buckets:N``; None for ``documents``."""
    kind, _, count = partitioning.partition(":")
    return int(count) if kind == "buckets" else None


def partition_key(doc: Document, partitioning: str) -> str:
    """The partition that holds a document: its own readable key (``kb_assets.pipeline.identity``), or its hash
    bucket (``bucket-017-of-256``; the key says how many buckets, so a run knows its documents without
    settings)."""
    count = bucket_count(partitioning)
    if count is None:
        return own_key(doc)
    bucket = int.from_bytes(hashlib.sha256(doc.document_id.encode()).digest()[:8], "big") % count
    return f"{BUCKET_PREFIX}{bucket:0{len(str(count - 1))}d}-of-{count}"


def own_key(doc: Document) -> str:
    """The document's own readable partition key (given when a scan registered it)."""
    if not doc.partition_key:
        raise ValueError(f"{doc.source_uri}: document {doc.document_id} has no partition key yet")
    return doc.partition_key


def partition_keys(docs: list[Document], partitioning: str) -> list[str]:
    """The partitions of these documents, each once, in the documents' order."""
    return list(dict.fromkeys(partition_key(d, partitioning) for d in docs))


def is_bucket(key: str) -> bool:
    return key.startswith(BUCKET_PREFIX) and "-of-" in key


def bucket_counts(keys: list[str]) -> set[int]:
    """The N of every ``bucket-...-of-N`` among these partition keys."""
    return {int(key.rsplit("-of-", 1)[1]) for key in keys if is_bucket(key)}


def run_documents(keys: list[str], run_id: str, catalog: Catalog, claim: str | None = None) -> list[Document]:
    """The documents a run over these partitions works on, in partition order: a document key names
    its document; a bucket key names the bucket's documents that are pending, that the planner claimed
    for the run (``claim``: its ``kb/claim`` tag, ``claim_documents``) or that this run has touched
    already (a bucket's run processes only its stale documents)."""
    documents = [key for key in keys if not is_bucket(key)]
    found = catalog.documents_by_partition_keys(documents)
    docs = [found[key] for key in documents if key in found]
    buckets = [key for key in keys if is_bucket(key)]
    if buckets:
        wanted, counts = set(buckets), bucket_counts(buckets)
        docs += [
            doc
            for doc in catalog.documents_of_run(run_id, claim)
            if any(partition_key(doc, f"buckets:{n}") in wanted for n in counts)
        ]
    return docs


FROM_STEP_TAG = "kb/from_step"  # the step a run starts at (its asset selection: versions.selection)
MIGRATION_TAG = "kb/migration"  # a migration's backfill and publish runs: the model they migrate to
CLAIM_TAG = "kb/claim"  # a bucket run's token: its documents carry it as last_run_id until it writes them


def plan_bucket_runs(
    docs: list[Document],
    stale: dict[str, Staleness],
    partitioning: str,
    ordered_keys: Sequence[str],
    batch_size: int,
    retry_failed: bool = True,
    migration: str | None = None,
    max_documents: int | None = None,
) -> list[RunPlan]:
    """Runs over the hash buckets of the stale documents (``KB_PARTITIONING=buckets:N``), as ``plan_runs``
    does per document: a bucket runs from the earliest stale step of its documents (a migration's
    backfill from ``embeddings``), adjacent buckets that start at the same step share a run, up to
    ``batch_size`` buckets and ``max_documents`` documents (whole buckets: at least one), so that the
    first documents of a large batch serve after minutes, not after every step of them all. Failed
    documents are retried with their bucket (``retry_failed``); a run works on the documents it claims
    (``claim_documents``), so the bucket's current documents are not touched. A run's range passes over
    buckets with nothing to do (``spanning_ranges``: ten edits scattered over the buckets are one run, not
    ten); those are neither planned nor recorded by it (``document_steps``)."""
    by_bucket: dict[str, list[Document]] = {}
    first: dict[str, int] = {}
    for doc in docs:
        why = stale.get(doc.document_id)
        if why is None or (why.failed and not retry_failed) or (why.migration and not migration):
            continue
        key = partition_key(doc, partitioning)
        by_bucket.setdefault(key, []).append(doc)
        at = STEPS.index("embeddings" if why.migration else why.step)
        first[key] = min(at, first.get(key, at))
    plans = []
    for index in sorted(set(first.values())):
        step = STEPS[index]
        selected = {key for key, at in first.items() if at == index}
        sizes = {key: len(by_bucket[key]) for key in selected}
        for start, end, _ in spanning_ranges(ordered_keys, selected, batch_size, sizes, max_documents):
            keys = ordered_keys[ordered_keys.index(start) : ordered_keys.index(end) + 1]
            members = [doc for key in keys if key in selected for doc in by_bucket[key]]
            backfill = step == "embeddings" and any(stale[d.document_id].migration for d in members)
            plans.append(RunPlan(start, end, members, step, migration=migration if backfill else None))
    order = {key: i for i, key in enumerate(ordered_keys)}
    plans.sort(key=lambda plan: order.get(plan.start, 0))
    return plans


def claim_documents(plans: list[RunPlan], catalog: Catalog) -> None:
    """Give each bucket run's documents its claim (their ``last_run_id``, until the run writes them), so
    the run finds documents that are not pending: stale by a pipeline version, failed, or backfilled."""
    for plan in plans:
        if is_bucket(plan.start):
            catalog.claim_documents([d.document_id for d in plan.documents], plan.claim())


def range_tags(start: str, end: str, knowledge_base_id: str) -> dict[str, str]:
    """The tags of a run over a range of document partitions."""
    return {
        "dagster/asset_partition_range_start": start,
        "dagster/asset_partition_range_end": end,
        "kb/knowledge_base_id": knowledge_base_id,
    }


@dataclass
class RunPlan:
    """One run: a range of adjacent document partitions, materialized from ``step`` onward."""

    start: str
    end: str
    documents: list[Document]
    step: str
    alone: bool = False  # one document retried alone: if it fails again, so does the run
    migration: str | None = None  # the collection a migration backfill fills

    def tags(self) -> dict[str, str]:
        """Run tags that make the run readable in the UI: knowledge base(s), source paths, first step."""
        first, last = self.documents[0], self.documents[-1]
        kbs = sorted({d.knowledge_base_id for d in self.documents})
        tags = {
            "kb/knowledge_base_id": ",".join(kbs)[:200],
            FROM_STEP_TAG: self.step,
            "kb/documents": str(len(self.documents)),
            "kb/source": first.source_path[:200]
            if first is last
            else f"{first.source_path[:95]} .. {last.source_path[:95]}",
        }
        if self.alone:
            tags["dagster/partition"] = self.start
            tags["kb/retry_alone"] = "true"
        else:
            tags.update(
                {"dagster/asset_partition_range_start": self.start, "dagster/asset_partition_range_end": self.end}
            )
        if self.migration:
            tags[MIGRATION_TAG] = self.migration
        if is_bucket(self.start):
            tags[CLAIM_TAG] = self.claim()
        return tags

    def claim(self) -> str:
        """What a bucket run's documents carry as ``last_run_id`` until it writes them (``claim_documents``)."""
        return f"planned:{self.key()}"

    def key(self) -> str:
        """The same documents at the same versions from the same step give the same key (sensor run keys)."""
        material = f"{self.step}|{self.migration}|" + ",".join(
            f"{d.document_id}@{d.version}@{d.failed_step}" for d in self.documents
        )
        return hashlib.sha256(material.encode()).hexdigest()[:32]


def stale_documents(
    docs: list[Document], current: dict[str, str], legacy_models: dict[str, str] | None = None, migrating: bool = True
) -> dict[str, Staleness]:
    """Why each of ``docs`` must run again, by document id (current documents left out).
    ``legacy_models``: collection name -> embedding model, for documents published before versions were
    recorded. ``migrating``: whether a collection migration is due; when it is not (the published
    collection has the configured spec, e.g. after a rollback), vectors of another model are simply stale."""
    out = {}
    for doc in docs:
        why = staleness(doc, current, (legacy_models or {}).get(doc.collection_name or ""))
        if why is not None:
            out[doc.document_id] = why if migrating or not why.migration else replace(why, migration=False)
    return out


def stale_under(docs: list[Document], settings: Settings, catalog: Catalog, migrating: bool = True):
    """``stale_documents`` under the settings' step versions, with the catalog's collections' models for
    documents published before versions were recorded."""
    legacy = {c.name: c.model for c in catalog.collections()}
    return stale_documents(docs, step_versions(settings), legacy, migrating)


def plan_document_runs(
    docs: list[Document],
    stale: dict[str, Staleness],
    ordered_keys: Sequence[str],
    settings: Settings,
    catalog: Catalog,
    retry_failed: bool = True,
    migration: str | None = None,
    runs_at_once: int = 1,
) -> list[RunPlan]:
    """The runs of the stale documents under the settings' partitioning: ranges of document partitions
    (``plan_runs``) or of hash buckets (``plan_bucket_runs``, their documents claimed), at most
    ``KB_RUN_BATCH_SIZE`` partitions a run and at least one range for each of ``runs_at_once`` runs."""
    if bucket_count(settings.partitioning) is None:
        batch = max(1, min(settings.run_batch_size, -(-len(stale) // runs_at_once)))
        return plan_runs(docs, stale, ordered_keys, batch, retry_failed, migration)
    keys = partition_keys([d for d in docs if d.document_id in stale], settings.partitioning)
    batch = max(1, min(settings.run_batch_size, -(-len(keys) // runs_at_once)))
    plans = plan_bucket_runs(
        docs, stale, settings.partitioning, ordered_keys, batch, retry_failed, migration, settings.bucket_run_documents
    )
    claim_documents(plans, catalog)
    return plans


def plan_runs(
    docs: list[Document],
    stale: dict[str, Staleness],
    ordered_keys: Sequence[str],
    batch_size: int,
    retry_failed: bool = True,
    migration: str | None = None,
) -> list[RunPlan]:
    """Runs for the stale documents: one per contiguous range of partitions that start at the same step
    (at most ``batch_size`` documents); failed documents are retried alone (``retry_failed``; else a
    failure stands until its step's version changes). Stale only by a new embedding spec: a migration's
    backfill, planned only when ``migration`` names the collection it fills."""
    by_id = {d.document_id: d for d in docs}
    by_key = {d.partition_key: d for d in docs}
    groups: dict[str, set[str]] = {}
    plans = []
    for document_id, why in stale.items():
        doc = by_id[document_id]
        if why.failed:
            if retry_failed:
                plans.append(RunPlan(own_key(doc), own_key(doc), [doc], why.step, alone=True))
        elif why.migration:
            if migration:
                groups.setdefault("embeddings", set()).add(own_key(doc))
        else:
            groups.setdefault(why.step, set()).add(own_key(doc))
    ranged = []
    for step, selected in groups.items():
        for start, end, _ in contiguous_ranges(ordered_keys, selected, batch_size):
            keys = ordered_keys[ordered_keys.index(start) : ordered_keys.index(end) + 1]
            ranged.append(
                RunPlan(
                    start,
                    end,
                    [by_key[k] for k in keys],
                    step,
                    migration=migration
                    if step == "embeddings" and any(stale[by_key[k].document_id].migration for k in keys)
                    else None,
                )
            )
    order = {key: i for i, key in enumerate(ordered_keys)}
    ranged.sort(key=lambda plan: order.get(plan.start, 0))
    return ranged + plans


def gone_documents(knowledge_base_id: str, scopes: list[Scope], present: set[str], catalog: Catalog) -> list[Document]:
    """Documents of the knowledge base inside the scanned scopes (their root, under the given path) whose
    source is gone: documents of other roots are never touched."""
    return [
        doc
        for doc in catalog.list_documents([knowledge_base_id])
        if doc.status != "deleted" and doc.document_id not in present and any(scope.holds(doc) for scope in scopes)
    ]
