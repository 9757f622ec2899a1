"""The partitions of the document assets: one dynamic partition per source document, keyed by its readable
partition key (``kb/root-name/path``, ``kb_assets.pipeline.identity``), or hash buckets of documents
(``KB_PARTITIONING=buckets:N``)."""

from typing import TypedDict

import dagster as dg

from kb_assets.pipeline import planning
from kb_assets.pipeline.versions import STEPS
from kb_assets.stores.catalog import Catalog

DOCUMENTS_PARTITIONS = "documents"  # the name of the dynamic partitions (typed str; the definition's is optional)
documents_partitions = dg.DynamicPartitionsDefinition(name=DOCUMENTS_PARTITIONS)


class PartitionedAsset(TypedDict):
    """What every document asset is declared with (``defs/assets.py``'s ``COMMON``, typed for ``**COMMON``)."""

    partitions_def: dg.DynamicPartitionsDefinition
    backfill_policy: dg.BackfillPolicy
    group_name: str


def add_partitions(instance: dg.DagsterInstance, keys: list[str]) -> None:
    existing = set(instance.get_dynamic_partitions(DOCUMENTS_PARTITIONS))
    new_keys = [key for key in keys if key not in existing]
    if new_keys:
        instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, new_keys)


def readable_partition_keys(catalog: Catalog, instance: dg.DagsterInstance) -> int:
    """Once, for documents registered before partition keys were readable (their partition was their id):
    give each its readable key, carry its partitions' materializations over to the new key (a runless
    materialization that names the old key) and delete the old partition. Nothing is re-processed.
    Returns how many documents moved. Call it under the registration lock."""
    docs = catalog.documents_without_partition_key()  # every ingest and tick asks: an index answers
    if not docs:
        return 0
    keys = planning.new_partition_keys(
        [(d.knowledge_base_id, d.source_root, d.source_path, d.document_id) for d in docs], catalog
    )
    with catalog.connect() as conn:
        catalog.set_partition_keys(conn, keys)
    existing = set(instance.get_dynamic_partitions(DOCUMENTS_PARTITIONS))
    moved = [doc for doc in docs if doc.document_id in existing]
    add_partitions(instance, [keys[doc.document_id] for doc in moved if doc.status != "deleted"])
    for asset in (*STEPS, "page_images"):
        done = instance.get_materialized_partitions(dg.AssetKey(asset))
        for doc in moved:
            if doc.document_id in done and doc.status != "deleted":
                instance.report_runless_asset_event(
                    dg.AssetMaterialization(
                        asset,
                        partition=keys[doc.document_id],
                        description="carried over from the document's earlier partition key",
                        metadata={
                            "earlier_partition_key": doc.document_id,
                            "source": doc.source_path,
                            "knowledge_base": doc.knowledge_base_id,
                        },
                    )
                )
    for doc in moved:
        instance.delete_dynamic_partition(DOCUMENTS_PARTITIONS, doc.document_id)
    return len(docs)


def shown_failed(instance: dg.DagsterInstance, step: str, key: str | None) -> bool:
    """Whether the UI shows the document's partition ``key`` of ``step`` failed."""
    if not key:
        return False
    status = instance.get_status_by_partition(dg.AssetKey(step), [key], documents_partitions) or {}
    return status.get(key) == dg.AssetPartitionStatus.FAILED
