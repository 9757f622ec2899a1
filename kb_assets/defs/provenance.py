"""Where Dagster's data versions come from, so that the UI's "Unsynced" says what is stale: the files
themselves (``source_files``, observed when a scan registers them) and each step's materializations.

Dagster computes a partition's staleness from its latest materialization's provenance: the code version
that made it and, for each input asset, the data version it read and the event it read it from. A changed
input or a newer code version makes it stale ("Unsynced"), an unchanged one does not. The steps of
``ingest_documents`` write their materializations themselves (``document_steps.record_partitions``: a
failed document must not be materialized), so they write that provenance too, computed as Dagster
computes it for the materializations it records (``dagster_internals.provenance_tags``): a step's data
version is a hash of its code version and its inputs' data versions.

``source_files`` is an external asset, one partition per document (or hash bucket) like the others, whose
data version is the file's sha256 (a bucket's: a hash chained over its documents' versions as they
change). A scan that registers a new or changed file (``kb-assets ingest``, the folder sensor, the
schedule) observes it, so Dagster shows the file's ``raw_files`` partition Unsynced until a run takes
the new version, and only that partition.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import dagster as dg

from kb_assets.defs.dagster_internals import latest_data_versions, observed_version_tags, provenance_tags
from kb_assets.defs.partitions import documents_partitions
from kb_assets.pipeline import planning
from kb_assets.stores.catalog import Document

SOURCE_FILES = dg.AssetSpec(
    "source_files",
    partitions_def=documents_partitions,
    group_name="knowledge_base",
    kinds={"file"},
    description="The source files (a folder or an s3:// prefix), one partition per document: observed when a "
    "scan registers a new or changed file, its sha256 as the data version. Not materialized by kb-assets.",
)


def source_versions(docs: Iterable[Document], partitioning: str, instance: dg.DagsterInstance) -> dict[str, str]:
    """The data version of each partition of ``source_files`` that holds these documents: a document's
    sha256; a hash bucket's, its latest observed version chained with the documents' new versions."""
    by_key: dict[str, list[Document]] = {}
    for doc in docs:
        if doc.version:
            by_key.setdefault(planning.partition_key(doc, partitioning), []).append(doc)
    buckets = [key for key in by_key if planning.is_bucket(key)]
    before = latest_data_versions(instance, SOURCE_FILES.key, buckets, observed=True)
    versions = {}
    for key, held in by_key.items():
        if not planning.is_bucket(key):
            versions[key] = held[0].version or ""
            continue
        chained = [before.get(key, (None, None))[1] or "", *sorted(f"{d.document_id}@{d.version}" for d in held)]
        versions[key] = hashlib.sha256("\n".join(chained).encode()).hexdigest()
    return versions


def observe_sources(instance: dg.DagsterInstance, docs: Iterable[Document], partitioning: str) -> None:
    """Record the registered versions of these (new or changed) files on ``source_files``."""
    for key, version in source_versions(docs, partitioning, instance).items():
        instance.report_runless_asset_event(
            dg.AssetObservation(SOURCE_FILES.key, partition=key, tags=observed_version_tags(version))
        )


def observe_unobserved(instance: dg.DagsterInstance, docs: list[Document], partitioning: str) -> None:
    """Observe the files of these documents whose partition has no observation of their current version
    (documents registered before ``source_files`` existed; a bucket: none at all), so that ``raw_files``
    reads one."""
    keys = planning.partition_keys(docs, partitioning)
    seen = latest_data_versions(instance, SOURCE_FILES.key, keys, observed=True)
    missing = []
    for doc in docs:
        key = planning.partition_key(doc, partitioning)
        found = seen.get(key)
        if found is None or (not planning.is_bucket(key) and found[1] != doc.version):
            missing.append(doc)
    if missing:
        observe_sources(instance, missing, partitioning)


def materialization_tags(
    context: dg.AssetExecutionContext, asset_key: dg.AssetKey, partitions: list[str]
) -> dict[str, dict[str, str]]:
    """Per partition, the provenance tags of this step's materialization of ``asset_key``: its code version
    (none: the run id, as Dagster uses) and the latest data version of each input's same partition. Call it
    after the inputs' events of this run are stored (``embed_and_publish`` records ``milvus_collection``
    after its ``embeddings``)."""
    code_version = context.assets_def.code_versions_by_key.get(asset_key) or context.run.run_id
    deps = sorted(context.assets_def.asset_deps.get(asset_key, set()), key=lambda k: k.to_user_string())
    latest = {
        dep: latest_data_versions(context.instance, dep, partitions, observed=dep == SOURCE_FILES.key) for dep in deps
    }
    return {
        key: provenance_tags(code_version, {dep: latest[dep].get(key, (None, None)) for dep in deps})
        for key in partitions
    }
