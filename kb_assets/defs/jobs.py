"""Jobs: every change of the stores is a run.

- ``ingest_documents``: the document assets for a range of partitions (or one, retried alone), from the
  first stale step onward (the run's asset selection); a migration's backfill is this job too. Its steps
  write the asset events per document (``document_steps``: a failed document is never materialized).
- ``publish_collection``: the migration's validation (blocking check) and alias swap.
- ``purge_documents``: documents whose files are gone leave Milvus, the lake and the object store, and
  their partitions the instance.
- ``repair_stores``: ``verify --repair``.

All run in-process: ``kb-assets`` launches them without a daemon; the sensors request them.
"""

import dagster as dg

from kb_assets.defs.assets import ASSETS
from kb_assets.defs.collections import COLLECTION_ASSETS
from kb_assets.defs.document_steps import DEFER_ASSET_EVENTS, Metadata
from kb_assets.defs.partitions import DOCUMENTS_PARTITIONS
from kb_assets.pipeline import planning, steps
from kb_assets.pipeline.verify import VerifyReport, verify
from kb_assets.stores import Stores

ingest_documents = dg.define_asset_job(
    "ingest_documents",
    selection=dg.AssetSelection.assets(*ASSETS),
    description="Materialize the document assets for a range of document partitions in one run, from the "
    "first stale step onward.",
    executor_def=dg.in_process_executor,
    tags=DEFER_ASSET_EVENTS,  # its steps write the asset events per document (defs/document_steps.py)
)

publish_collection = dg.define_asset_job(
    "publish_collection",
    selection=dg.AssetSelection.assets(*COLLECTION_ASSETS),
    description="Validate the configured spec's collection (blocking check) and swap the alias to it.",
    executor_def=dg.in_process_executor,
)


class PurgeConfig(dg.Config):
    document_ids: list[str]


@dg.op(description="Remove documents whose files are gone from every store; keep their tombstone rows.")
def purge(
    context: dg.OpExecutionContext, config: PurgeConfig, stores: dg.ResourceParam[Stores]
) -> list[steps.PurgedDocument]:
    cat = stores.catalog
    gone = [d for d in cat.get_documents(config.document_ids).values() if d.status != "deleted"]
    purged = steps.purge_documents(gone, cat, stores.objects, stores.lake, stores.milvus)
    keys = {d.document_id: d.partition_key for d in gone}
    for report in purged:
        key = keys.get(report.document_id)
        if key and context.instance.has_dynamic_partition(DOCUMENTS_PARTITIONS, key):
            context.instance.delete_dynamic_partition(DOCUMENTS_PARTITIONS, key)
    by_id = {d.document_id: d for d in gone}
    buckets: dict[str, list[str]] = {}  # under hash buckets: what each bucket lost, on the bucket itself
    if planning.bucket_count(stores.settings.partitioning) is not None:
        for report in purged:
            doc = by_id[report.document_id]
            buckets.setdefault(planning.partition_key(doc, stores.settings.partitioning), []).append(doc.source_uri)
    for bucket, sources in buckets.items():
        if context.instance.has_dynamic_partition(DOCUMENTS_PARTITIONS, bucket):
            for asset in ("chunks", "embeddings", "milvus_collection"):
                context.log_event(
                    dg.AssetObservation(asset, partition=bucket, metadata={"purged": dg.MetadataValue.json(sources)})
                )
    removed = sum(n for r in purged for n in r.entities_removed.values())
    summary: Metadata = {
        "documents_purged": len(purged),
        "entities_removed": removed,
        "chunk_rows_removed": sum(r.chunk_rows_removed for r in purged),
        "purged": dg.MetadataValue.md(purge_table(purged)),
    }
    context.add_output_metadata(summary)
    if purged:  # the index's history in the UI: the collection lost these documents here
        context.log_event(dg.AssetObservation(asset_key="milvus_collection", metadata=summary))
    return purged


def purge_table(purged: list[steps.PurgedDocument]) -> str:
    rows = [
        "| knowledge base | source | document | entities removed | chunk rows | original |",
        "|---|---|---|---|---|---|",
    ]
    rows += [
        f"| {r.knowledge_base_id} | {r.source_path} | {r.document_id} | "
        f"{sum(r.entities_removed.values())} | {r.chunk_rows_removed} | {r.original} |"
        for r in purged
    ]
    return "\n".join(rows)


@dg.job(
    executor_def=dg.in_process_executor,
    tags={"kb/store_change": "purge"},
    description="Purge documents whose files are gone (launched by kb-assets ingest and the folder sensor).",
)
def purge_documents() -> None:
    purge()


@dg.op(description="verify --repair: re-sync what Postgres and the lake say from them, remove strays and orphans.")
def repair(context: dg.OpExecutionContext, stores: dg.ResourceParam[Stores]) -> VerifyReport:
    report = verify(stores.catalog, stores.lake, stores.milvus, stores.alias, repair=True, load_model=stores.model)
    repaired = [p.as_json() for p in report.problems if p.repaired]
    left = [p.as_json() for p in report.problems if not p.repaired]
    summary: Metadata = {
        "problems_found": len(report.problems),
        "repaired": len(repaired),
        "left": len(left),
        "collection": report.collection or "none",
        "repairs": dg.MetadataValue.json(repaired),
        "not_repaired": dg.MetadataValue.json(left),
    }
    context.add_output_metadata(summary)
    if repaired:
        context.log_event(dg.AssetObservation(asset_key="milvus_collection", metadata=summary))
    return report


@dg.job(
    executor_def=dg.in_process_executor,
    tags={"kb/store_change": "repair"},
    description="kb-assets verify --repair as a run: what was found and what was repaired.",
)
def repair_stores() -> None:
    repair()


JOBS = (ingest_documents, publish_collection, purge_documents, repair_stores)  # a tuple keeps each job's type
