"""``embeddings`` and ``milvus_collection``: one step, so that a document is published as soon as its
vectors are (``kb_assets.pipeline.steps.embed_and_publish``), with a blocking check on each."""

import time

import dagster as dg

from kb_assets.defs import checks
from kb_assets.defs.document_assets import COMMON, document_spec
from kb_assets.defs.document_steps import (
    active_documents,
    failed_step,
    publication_target,
    record_partitions,
    report,
    settle,
    settle_run,
    step_version,
    written,
)
from kb_assets.defs.partitions import documents_partitions
from kb_assets.pipeline import steps
from kb_assets.stores import Stores
from kb_assets.stores.catalog import Document
from kb_assets.stores.vectors import flush

EMBEDDINGS = document_spec(
    "embeddings",
    after="chunks",
    kinds={"python", "parquet"},
    description="Dense vectors per chunk in the lake; only chunks whose embedding_input changed are re-encoded.",
)
MILVUS_COLLECTION = document_spec(
    "milvus_collection",
    after=EMBEDDINGS,
    kinds={"python", "milvus"},
    description="Each document's chunks as Milvus entities (dense + BM25) of the collection of the embedding spec.",
)


@dg.multi_asset(
    specs=[EMBEDDINGS, MILVUS_COLLECTION],
    can_subset=True,
    backfill_policy=COMMON["backfill_policy"],
    partitions_def=documents_partitions,
    check_specs=[
        dg.AssetCheckSpec(
            "vectors_valid",
            asset="embeddings",
            blocking=True,
            description="Per chunk one unit-norm vector of the model's dimension, checked before publishing.",
        ),
        dg.AssetCheckSpec(
            "entities_match_chunks",
            asset="milvus_collection",
            blocking=True,
            description="The collection holds exactly the document's chunk rows as entities, of its current version.",
        ),
    ],
)
def embed_and_publish(context: dg.AssetExecutionContext, stores: dg.ResourceParam[Stores]):
    """``embeddings`` and ``milvus_collection`` in one step, so that a document is published as soon as
    its vectors are: chunks are encoded in bounded slices (KB_EMBEDDING_SLICE), smallest documents
    first, and each document's vectors are stored, checked (``vectors_valid``, before publishing) and
    upserted into Milvus when its last slice is done; a large document delays the others of its run by
    one slice at most.

    Each document records both steps' versions; vectors are reused only of the same model, dimension and
    encoding version, and vectors that come out the same are not rewritten (nor re-published when the
    collection is current). While another spec's collection is published (a migration is due), changed
    documents are written there too. A run may select ``milvus_collection`` alone (stale from there)."""
    started, cat, lk, model = time.monotonic(), stores.catalog, stores.lake, stores.model()
    run_id = context.run.run_id
    selected = context.selected_asset_keys
    publishing = MILVUS_COLLECTION.key in selected
    versions = (step_version(context, EMBEDDINGS.key), step_version(context, MILVUS_COLLECTION.key))
    publication = publication_target(stores) if publishing else None
    target = publication.target if publication is not None else None
    also = publication.also if publication is not None else None
    docs = active_documents(context, cat)
    violations: list = []
    current = {d.document_id for d in docs if (d.step_versions or {}).get("embeddings") == versions[0]}

    def check(document_ids: list[str]) -> dict[str, str]:  # current vectors were checked when written
        fresh = [d for d in document_ids if d not in current]
        found = checks.embedding_violations(lk, fresh, model.dimension) if fresh else []
        violations.extend(found)
        return checks.failed_documents(found)

    alias_set: list[str | None] = []

    def published(doc: Document) -> None:
        if target is not None and not alias_set:  # the first build: the alias serves the first published document
            alias_set.append(steps.publish_if_unpublished(target.client, cat, stores.alias, target.collection))

    try:
        results, failures = steps.embed_and_publish(
            docs,
            cat,
            lk,
            model,
            stores.settings.embedding_model,
            run_id,
            stores.settings.embedding_slice,
            check,
            target,
            published,
            versions,
            also,
        )
    except Exception as error:  # encoding: a failure here is the model's, not a document's
        raise dg.Failure(f"embedding {len(docs)} documents failed: {error}") from error
    # steps.embed_and_publish marked them failed; milvus_collection's partitions are recorded after the
    # embeddings' are stored (their provenance reads them): after the embeddings' result below
    settle(context, cat, results, failures, [EMBEDDINGS.key] if EMBEDDINGS.key in selected else sorted(selected))
    checked = sorted({*written(results), *(v for violation in violations for v in violation.document_ids)})
    if EMBEDDINGS.key in selected:
        report(
            context,
            results,
            failures,
            started,
            model=stores.settings.embedding_model,
            encoder=model.backend,
            dimension=model.dimension,
            slice_size=stores.settings.embedding_slice,
            embedded=sum(r.embedded for r in results.values()),
            reused=sum(r.reused for r in results.values()),
        )
        yield dg.MaterializeResult(
            asset_key=EMBEDDINGS.key,
            check_results=[
                checks.check_embeddings(cat, checked, violations, run_id, failed_step(context, EMBEDDINGS.key))
            ],
        )
    if target is not None:  # publishing
        if EMBEDDINGS.key in selected:
            record_partitions(context, cat, results, failures, [MILVUS_COLLECTION.key])
        client, collection = target
        published_now = [r.published for r in results.values() if r.published is not None]
        changed = any(p.written or p.deleted for p in published_now)
        for name in [collection, *([also.collection] if also else [])] if changed else []:
            flush(client, name)  # seals the write-ahead log into indexed segments: ~10x faster searches
        alias = steps.publish_if_unpublished(client, cat, stores.alias, collection)
        republished = [d for d, r in results.items() if r.republished]
        milvus_check = checks.check_milvus(
            cat, lk, client, collection, republished, run_id, failed_step(context, MILVUS_COLLECTION.key)
        )
        report(
            context,
            results,
            failures,
            started,
            collection=collection,
            alias=stores.alias,
            alias_target=alias or f"{also.collection if also else None} (the migration publishes {collection})",
            also_written_to=also.collection if also else "none",
            entities_written=sum(p.written for p in published_now),
            entities_deleted=sum(p.deleted for p in published_now),
            chunks_with_bm25_statistics_kept=sum(p.terms_kept for p in published_now),
        )
        yield dg.MaterializeResult(asset_key=MILVUS_COLLECTION.key, check_results=[milvus_check])
    settle_run(context, cat, results)  # the run's last document step
