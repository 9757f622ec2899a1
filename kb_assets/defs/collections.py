"""The collection assets of a migration: ``collection_candidate`` (the configured spec's collection,
complete, validated by a blocking check) and ``collection_alias`` (the alias swap). They run in the
``publish_collection`` job after the backfill runs (``launch/store_changes.py``, the migration sensor); the logic
is ``kb_assets.pipeline.migration``.
"""

from typing import TypedDict

import dagster as dg

from kb_assets.defs.document_steps import Metadata
from kb_assets.defs.publish_assets import MILVUS_COLLECTION
from kb_assets.pipeline import migration
from kb_assets.stores import Stores
from kb_assets.stores.vectors import SCHEMA_VERSION, ensure_collection, flush, published_collection


class Collections(TypedDict):
    """What both collection assets are declared with (typed, so that ``**COLLECTIONS`` is checked)."""

    group_name: str
    kinds: set[str]
    code_version: str


COLLECTIONS = Collections(group_name="collections", kinds={"milvus"}, code_version=str(SCHEMA_VERSION))


@dg.asset(
    **COLLECTIONS,
    deps=[MILVUS_COLLECTION],
    check_specs=[
        dg.AssetCheckSpec(
            "candidate_valid",
            asset="collection_candidate",
            blocking=True,
            description="entity counts, dimension and golden queries against the published collection",
        )
    ],
)
def collection_candidate(context: dg.AssetExecutionContext, stores: dg.ResourceParam[Stores]):
    """The collection of the configured embedding spec, filled from the lake for every document that serves a
    version; validated before the alias may point at it (blocking check ``candidate_valid``)."""
    cat, client, model = stores.catalog, stores.milvus, stores.model()
    collection = ensure_collection(client, stores.embedding_spec(), stores.settings.milvus_dense_index)
    flush(client, collection)
    report = migration.validate(cat, stores.lake, client, collection, stores.alias, model.dimension, stores.model)
    metadata: Metadata = {
        "collection": collection,
        "published": report.previous or "none",
        "entities": report.entities,
        "chunk_rows": report.chunk_rows,
        "documents": report.documents,
        "not_carried_over": dg.MetadataValue.json(list(report.not_carried)),
        "golden_queries": report.golden_queries,
        "hit_at_5_new": report.quality_new,
        "hit_at_5_published": report.quality_published,
        "dimension": report.dimension,
        "problems": dg.MetadataValue.json(list(report.problems)),
        "report": dg.MetadataValue.json(report.as_json()),  # launch/store_changes.py reads it back
    }
    if report.problems:
        with cat.connect() as conn:
            cat.set_collection_state(conn, collection, "failed", entity_count=report.entities)
    return dg.MaterializeResult(
        metadata=metadata,
        check_results=[
            dg.AssetCheckResult(
                check_name="candidate_valid",
                passed=not report.problems,
                severity=dg.AssetCheckSeverity.ERROR,
                metadata={
                    "problems": dg.MetadataValue.json(list(report.problems)),
                    "entities": report.entities,
                    "chunk_rows": report.chunk_rows,
                    "hit_at_5_new": report.quality_new,
                    "hit_at_5_published": report.quality_published,
                },
            )
        ],
    )


@dg.asset(**COLLECTIONS, deps=[collection_candidate])
def collection_alias(context: dg.AssetExecutionContext, stores: dg.ResourceParam[Stores]):
    """The collection the alias publishes (what search reads): swapped atomically to the validated candidate;
    the previous collection is retired and kept for rollback (``kb-assets collections rollback``)."""
    cat, client = stores.catalog, stores.milvus
    collection = stores.embedding_spec().collection_name()
    before = published_collection(client, cat, stores.alias)
    if before == collection:
        return dg.MaterializeResult(metadata={"alias": stores.alias, "published": collection, "swap": "none needed"})
    record = context.instance.get_latest_materialization_event(dg.AssetKey("collection_candidate"))
    validated = record.asset_materialization.metadata if record and record.asset_materialization else {}
    swapped = migration.swap(cat, client, stores.alias, collection)
    return dg.MaterializeResult(
        metadata={
            "alias": stores.alias,
            "previous": swapped.previous or "none",
            "published": collection,
            "swap": f"{swapped.previous} -> {collection}",
            "entities": swapped.entities,
            "hit_at_5_new": validated["hit_at_5_new"].value if "hit_at_5_new" in validated else "unknown",
            "hit_at_5_published": validated["hit_at_5_published"].value
            if "hit_at_5_published" in validated
            else "unknown",
            "stopped_serving": dg.MetadataValue.json(list(swapped.stopped_serving)),
            "rollback": "kb-assets collections rollback re-publishes the previous collection",
        }
    )


COLLECTION_ASSETS = [collection_candidate, collection_alias]
