"""The backfill runs a collection migration still needs, over the instance's partitions: what the
migration sensor requests and ``kb-assets migrate`` (``launch/store_changes.py``) executes."""

from __future__ import annotations

import dagster as dg

from kb_assets.defs.partitions import DOCUMENTS_PARTITIONS, add_partitions
from kb_assets.pipeline.migration import migration_documents
from kb_assets.pipeline.planning import (
    RunPlan,
    bucket_count,
    partition_key,
    plan_document_runs,
    stale_under,
)
from kb_assets.pipeline.versions import step_versions
from kb_assets.settings import Settings
from kb_assets.stores import Stores


def migration_plans(settings: Settings, stores: Stores, instance: dg.DagsterInstance) -> list[RunPlan]:
    """The backfill runs a migration still needs: documents that serve a version and are not yet in the
    configured spec's collection."""
    catalog = stores.catalog
    docs = [d for d in catalog.list_documents() if d.status != "deleted"]
    picked = migration_documents(docs, stale_under(docs, settings, catalog), step_versions(settings))
    buckets = bucket_count(settings.partitioning) is not None
    # a document's bucket, or its own partition (which one published under hash buckets lacks: the mode was
    # switched, so it is added here)
    key_of = {
        d.document_id: partition_key(d, settings.partitioning) if buckets else d.partition_key
        for d in docs
        if d.document_id in picked
    }
    add_partitions(instance, [key for key in dict.fromkeys(key_of.values()) if key])
    ordered = instance.get_dynamic_partitions(DOCUMENTS_PARTITIONS)
    known = set(ordered)
    picked = {document_id: why for document_id, why in picked.items() if key_of[document_id] in known}
    return plan_document_runs(
        docs, picked, ordered, settings, catalog, retry_failed=False, migration=settings.embedding_model
    )
