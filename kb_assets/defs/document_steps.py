"""What every document asset does around its step: find the run's documents, run the step for each (a
failing document is marked failed and the others go on), settle the failures (the step fails only when
every document failed, so Dagster marks exactly those partitions), describe each partition for the UI
and report counts; and the collection a publishing run writes to."""

import time
from collections.abc import Callable

import dagster as dg
from pymilvus import MilvusClient

from kb_assets.embedding.model import EmbeddingModel
from kb_assets.pipeline import planning, steps
from kb_assets.stores import Stores
from kb_assets.stores.catalog import Catalog, Document
from kb_assets.stores.vectors import SCHEMA_VERSION, collection_spec, ensure_collection, published_collection


def step_version(context: dg.AssetExecutionContext, key: dg.AssetKey | None = None) -> str:
    """The pipeline version of this asset (``key``: of that asset of a multi-asset step): its code version
    (``versioned`` sets it from the settings)."""
    key = key or context.asset_key
    version = context.assets_def.code_versions_by_key.get(key)
    if version is None:
        raise dg.DagsterInvariantViolationError(
            f"{key.to_user_string()} has no code version: build the definitions with "
            "kb_assets.definitions.make_definitions"
        )
    return version


def failed_step(context: dg.AssetExecutionContext, key: dg.AssetKey | None = None) -> str:
    """What a document that fails here records: ``asset@version``."""
    key = key or context.asset_key
    return f"{key.to_user_string()}@{step_version(context, key)}"


def active_documents(context: dg.AssetExecutionContext, catalog: Catalog) -> list[Document]:
    """The run's documents that are still going (not deleted, not failed earlier in this run), in
    partition order (a hash-bucket partition names its changed documents: ``planning.run_documents``);
    a document that failed in an earlier run is retried."""
    run_id = context.run.run_id
    return [
        doc
        for doc in planning.run_documents(list(context.partition_keys), run_id, catalog)
        if doc.status != "deleted" and not (doc.status == "failed" and doc.last_run_id == run_id)
    ]


def for_each_document(
    context: dg.AssetExecutionContext, catalog: Catalog, docs: list[Document], step: Callable[[Document], dict]
) -> tuple[dict[str, dict], dict[str, str]]:
    """Run a step per document; a failing document is marked failed and the others go on. When every
    document failed, the step fails (with every reason), so the run fails and Dagster marks the
    partitions failed."""
    results, failures = {}, {}
    for doc in docs:
        try:
            with catalog.document_lock(doc.document_id):  # a concurrent writer of the document waits
                results[doc.document_id] = step(doc)
        except steps.DocumentFailed as error:
            failures[doc.document_id] = str(error)
        except Exception as error:  # an unexpected bug in one document must not stop the batch
            context.log.exception(f"{doc.source_uri}: unexpected error")
            failures[doc.document_id] = f"{doc.source_path}: unexpected {type(error).__name__}: {error}"
    for document_id, reason in failures.items():
        catalog.mark_failed(document_id, reason, context.run.run_id, failed_step(context))
    settle(context, catalog, results, failures)
    return results, failures


def settle(
    context: dg.AssetExecutionContext,
    catalog: Catalog,
    results: dict[str, dict],
    failures: dict[str, str],
    asset_keys: list[dg.AssetKey] | None = None,
) -> None:
    """After a step's documents: log each failure, describe every partition, and fail the step when every
    document failed (Dagster then marks exactly those partitions failed)."""
    for document_id, reason in failures.items():
        context.log.warning(f"document {document_id} failed: {reason}")
    describe_partitions(context, catalog, results, failures, asset_keys)
    if failures and not results:
        raise dg.Failure(
            description="; ".join(failures.values())[:2000], metadata={"failures": dg.MetadataValue.json(failures)}
        )


def describe_partitions(
    context: dg.AssetExecutionContext,
    catalog: Catalog,
    results: dict[str, dict],
    failures: dict[str, str],
    asset_keys: list[dg.AssetKey] | None = None,
) -> None:
    """Per-partition metadata for the UI: which file a partition is, and what happened to it here
    (``asset_keys``: of those assets of a multi-asset step)."""
    docs = catalog.documents_by_partition_keys(list(context.partition_keys))
    described: list[dg.AssetKey | None] = list(asset_keys) if asset_keys else [None]  # None: the step's asset
    for key in context.partition_keys:
        doc = docs.get(key)
        if doc is None:
            continue
        document_id = doc.document_id
        result = results.get(document_id, {})
        outcome = (
            f"failed: {failures[document_id]}"
            if document_id in failures
            else "current: skipped"
            if result.get("skipped")
            else "same output as before: nothing rewritten"
            if result.get("unchanged")
            else "written"
            if document_id in results
            else f"not run: {doc.status}" + (f" ({doc.error})" if doc.error else "")
        )
        metadata = {
            "source": doc.source_path,
            "knowledge_base": doc.knowledge_base_id,
            "source_uri": doc.source_uri,
            "document_id": document_id,
            "document_version": (doc.version or "")[:12],
            "outcome": outcome[:1000],
        }
        for asset_key in described:
            context.add_asset_metadata(metadata, asset_key=asset_key, partition_key=key)


def report(results: dict[str, dict], failures: dict[str, str], started: float, **extra) -> dict:
    skipped = sum(1 for r in results.values() if r.get("skipped"))
    return {
        "documents": len(results) + len(failures),
        "processed": len(results) - skipped,
        "skipped_unchanged": skipped,
        "failed": len(failures),
        "failures": dg.MetadataValue.json(failures) if failures else "none",
        "seconds": round(time.monotonic() - started, 3),
        **extra,
    }


def publication_target(stores: Stores) -> tuple[MilvusClient, str, tuple[str, EmbeddingModel] | None]:
    """The Milvus client and the configured spec's collection (created and recorded as building when new),
    and, while another spec's collection is published (a migration is due), that collection and its model:
    changed documents are written into both."""
    client, spec, cat = stores.milvus, stores.embedding_spec(), stores.catalog
    collection = ensure_collection(client, spec, stores.settings.milvus_dense_index)
    with cat.connect() as conn:
        cat.record_collection(
            conn,
            name=collection,
            alias=stores.alias,
            schema_version=SCHEMA_VERSION,
            model=spec.model,
            dimension=spec.dimension,
            languages=list(spec.languages),
            state="building",
        )
    serving = published_collection(client, stores.alias)
    also = (
        (serving, stores.model(collection_spec(client, serving)["model"]))
        if serving not in (None, collection)
        else None
    )
    return client, collection, also
