"""What every document asset does around its step: find the run's documents, run the step for each (a
failing document is marked failed and the others go on), settle the failures, record each partition for
the UI and report counts; and the collection a publishing run writes to.

Runs of ``ingest_documents`` carry Dagster's system run tag ``dagster/defer_asset_events``
(``DEFER_ASSET_EVENTS``): Dagster then writes no asset event of its own, and the steps write them per
document (``record_partitions``): a planned event for every partition at the start of a step, a
materialization with that document's own metadata for each document that went through, none for a
document that failed (an observation with its reason instead), and the run fails at its last step
when a document failed in it, so Dagster shows exactly those partitions failed. Without the tag,
Dagster materializes every partition of a step's range at its end, the failed documents' included: in
Dagster 1.13 no public API materializes only some partitions of a step (``MaterializeResult`` has no
partition; an unyielded output skips the steps after it). Runs without the tag (the implicit asset job:
``dagster asset materialize``, Materialize in the asset graph) get Dagster's events and per-partition
metadata."""

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import dagster as dg

from kb_assets.defs.dagster_internals import DEFER_ASSET_EVENTS_TAG, report_planned_materialization
from kb_assets.pipeline import planning, steps
from kb_assets.pipeline.step_results import Publication, Serving, StepResult, Target
from kb_assets.pipeline.versions import STEPS, after, from_step
from kb_assets.stores import Stores
from kb_assets.stores.catalog import Catalog, Document
from kb_assets.stores.vectors import SCHEMA_VERSION, collection_spec, ensure_collection, published_collection

DEFER_ASSET_EVENTS = {DEFER_ASSET_EVENTS_TAG: "true"}  # the steps write their asset events
RESULT_FIELDS = 12  # at most this many of a step's own figures per partition (pages, mode, chunks, ...)
R = TypeVar("R", bound=StepResult)
Results = Mapping[str, StepResult]  # by document id
Metadata = dict[str, Any]  # what Dagster shows of a partition: names to plain values or dg.MetadataValue


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


def events_deferred(context: dg.AssetExecutionContext) -> bool:
    """Whether the steps write this run's asset events (``DEFER_ASSET_EVENTS``)."""
    return context.run.tags.get(DEFER_ASSET_EVENTS_TAG) == "true"


def plan(context: dg.AssetExecutionContext, asset_keys: list[dg.AssetKey], partition_keys: list[str]) -> None:
    """Record that this run means to materialize these partitions of these assets, as Dagster does at the
    start of a run whose events it writes: one planned and not materialized by a failed run shows failed."""
    for asset_key in asset_keys:
        for key in partition_keys:
            report_planned_materialization(context, asset_key, key)


def active_documents(context: dg.AssetExecutionContext, catalog: Catalog) -> list[Document]:
    """The run's documents that are still going (not deleted, not failed earlier in this run), in
    partition order (a hash-bucket partition names its changed documents: ``planning.run_documents``);
    a document that failed in an earlier run is retried. When the steps write the run's asset events,
    this step's partitions are planned first."""
    run_id = context.run.run_id
    docs = planning.run_documents(list(context.partition_keys), run_id, catalog, claim_of(context))
    if events_deferred(context):
        plan(context, sorted(context.selected_asset_keys), worked_keys(context, docs))
    return [
        doc for doc in docs if doc.status != "deleted" and not (doc.status == "failed" and doc.last_run_id == run_id)
    ]


def worked_keys(context: dg.AssetExecutionContext, docs: list[Document]) -> list[str]:
    """The run's partitions it works on: every document partition, the hash buckets that hold its documents
    (a bucket run's range passes over buckets with nothing to do: ``ranges.spanning_ranges``)."""
    keys = list(context.partition_keys)
    counts = planning.bucket_counts(keys)
    held = {planning.partition_key(doc, f"buckets:{n}") for doc in docs for n in counts}
    return [key for key in keys if not planning.is_bucket(key) or key in held]


def for_each_document(
    context: dg.AssetExecutionContext, catalog: Catalog, docs: list[Document], step: Callable[[Document], R]
) -> tuple[dict[str, R], dict[str, str]]:
    """Run a step per document; a failing document is marked failed and the others go on. When every
    document failed, the step fails (with every reason), so the run fails and Dagster marks the
    partitions failed."""
    results: dict[str, R] = {}
    failures: dict[str, str] = {}
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
    results: Results,
    failures: dict[str, str],
    asset_keys: list[dg.AssetKey] | None = None,
) -> None:
    """After a step's documents: log each failure, record every partition (``record_partitions``), and
    fail the step when every document failed (Dagster then marks exactly those partitions failed)."""
    for document_id, reason in failures.items():
        context.log.warning(f"document {document_id} failed: {reason}")
    record_partitions(context, catalog, results, failures, asset_keys or [context.asset_key])
    if failures and not results:
        raise dg.Failure(
            description="; ".join(failures.values())[:2000], metadata={"failures": dg.MetadataValue.json(failures)}
        )


def claim_of(context: dg.AssetExecutionContext) -> str | None:
    """The run's claim on its bucket documents (``planning.claim_documents``)."""
    return context.run.tags.get(planning.CLAIM_TAG)


def documents_by_partition(
    keys: list[str], run_id: str, catalog: Catalog, claim: str | None = None
) -> dict[str, list[Document]]:
    """The run's documents (``planning.run_documents``, deleted ones left out) under each partition key."""
    wanted = set(keys)
    counts = planning.bucket_counts(keys)
    found: dict[str, list[Document]] = {key: [] for key in keys}
    for doc in planning.run_documents(keys, run_id, catalog, claim):
        held = [doc.partition_key, *(planning.partition_key(doc, f"buckets:{n}") for n in sorted(counts))]
        key = next((k for k in held if k in wanted), None)
        if key is not None and doc.status != "deleted":
            found[key].append(doc)
    return found


def record_partitions(
    context: dg.AssetExecutionContext,
    catalog: Catalog,
    results: Results,
    failures: dict[str, str],
    asset_keys: list[dg.AssetKey],
) -> None:
    """What each partition shows of this step. When the steps write the run's asset events: a
    materialization with the partition's own metadata when none of its documents failed in this run;
    else none, an observation with the reason when it failed here, and the assets after this step
    planned, so that they show failed too. Otherwise: per-partition metadata on Dagster's events."""
    run_id, deferred = context.run.run_id, events_deferred(context)
    later = later_assets(context, asset_keys) if deferred else []
    partitions = documents_by_partition(list(context.partition_keys), run_id, catalog, claim_of(context))
    parsed = all(STEPS.index(k.to_user_string()) > 1 for k in asset_keys if k.to_user_string() in STEPS)
    modes = catalog.page_modes([d.document_id for docs in partitions.values() for d in docs]) if parsed else {}
    for key, docs in partitions.items():
        if not docs:  # a document gone, or a bucket the run's range passes over
            continue
        failed_here = [d for d in docs if d.document_id in failures]
        failed = failed_here or [d for d in docs if d.status == "failed" and d.last_run_id == run_id]
        for asset_key in asset_keys:
            metadata = partition_metadata(context, asset_key, docs, results, failures, planning.is_bucket(key))
            if found := sorted({m for d in docs if (m := modes.get(d.document_id))}):
                metadata["parser_mode"] = "; ".join(found)  # the pages' parse, shown by every later step
            if not deferred:
                context.add_asset_metadata(metadata, asset_key=asset_key, partition_key=key)
            elif not failed:
                version = context.assets_def.code_versions_by_key.get(asset_key)
                tags = {"dagster/code_version": version} if version else None
                context.log_event(dg.AssetMaterialization(asset_key, partition=key, metadata=metadata, tags=tags))
            elif failed_here:
                context.log_event(dg.AssetObservation(asset_key, partition=key, metadata=metadata))
        if failed_here and later:
            plan(context, later, [key])


def later_assets(context: dg.AssetExecutionContext, asset_keys: list[dg.AssetKey]) -> list[dg.AssetKey]:
    """The assets of this run after this step's (``page_images`` after ``parsed_pages``)."""
    names = [k.to_user_string() for k in asset_keys]
    first = min((STEPS.index(n) for n in names if n in STEPS), default=None)
    if first is None:
        return []
    downstream = [s for s in after(STEPS[first]) if s not in names] + (["page_images"] if first <= 1 else [])
    selected = context.run.asset_selection
    return [dg.AssetKey(s) for s in downstream if selected is None or dg.AssetKey(s) in selected]


def partition_metadata(
    context: dg.AssetExecutionContext,
    asset_key: dg.AssetKey,
    docs: list[Document],
    results: Results,
    failures: dict[str, str],
    bucket: bool = False,
) -> Metadata:
    """A partition's metadata: which file it is and what this step did to it (its own figures, its own
    failure); a hash-bucket partition: its documents, their outcomes and every failure (document, reason)."""
    if bucket or len(docs) != 1:
        outcomes = {d.source_path: outcome(d, results, failures)[:200] for d in docs[:50]}
        failed = [
            {"document": d.source_uri, "reason": (failures.get(d.document_id) or d.error or "")[:500]}
            for d in docs
            if d.document_id in failures or d.status == "failed"
        ]
        return {
            "documents": len(docs),
            "failed": len(failed),
            "failures": dg.MetadataValue.json(failed[:200]),
            "outcomes": dg.MetadataValue.json(outcomes),
        }
    (doc,) = docs
    result = results.get(doc.document_id)
    described: Metadata = {
        "source": doc.source_path,
        "knowledge_base": doc.knowledge_base_id,
        "source_uri": doc.source_uri,
        "document_id": doc.document_id,
        "document_version": (doc.version or "")[:12],
        "pipeline_version": context.assets_def.code_versions_by_key.get(asset_key) or "none",
        "outcome": outcome(doc, results, failures)[:1000],
    }
    figures = {
        name: value
        for name, value in {
            "pages": doc.page_count,
            "chunks": doc.chunk_count,
            **(result.figures() if result is not None else {}),
        }.items()
        if isinstance(value, int | float | str) and name not in described
    }
    return {**described, **dict(list(figures.items())[:RESULT_FIELDS])}


def outcome(doc: Document, results: Results, failures: dict[str, str]) -> str:
    result = results.get(doc.document_id)
    if doc.document_id in failures:
        return f"failed: {failures[doc.document_id]}"
    if result is not None and result.skipped:
        return "current: skipped"
    if result is not None and result.unchanged:
        return "same output as before: nothing rewritten"
    if result is not None:
        return "written"
    return f"not run: {doc.status}" + (f" ({doc.error})" if doc.error else "")


def fail_run_if_documents_failed(context: dg.AssetExecutionContext, catalog: Catalog, results: Results) -> None:
    """The run's last step: when a document failed in this run, the run fails (after the others were
    published), so that Dagster shows the partitions that it planned and did not materialize failed. In a
    run whose events Dagster wrote, the failed documents' partitions are planned again first (after the
    materializations Dagster gave them), so that they show failed all the same. ``results``: the documents
    this last step took through (a failed document whose last good version a migration carried over is
    one: its failure is older than this run)."""
    run_id = context.run.run_id
    held = documents_by_partition(list(context.partition_keys), run_id, catalog, claim_of(context))
    if claim_of(context):  # what it claimed and found current (nothing rewritten) was run by it all the same
        catalog.settle_claim(claim_of(context) or "", run_id)
    docs = [doc for docs in held.values() for doc in docs]
    failed = [d for d in docs if d.status == "failed" and d.last_run_id == run_id and d.document_id not in results]
    if failed and not events_deferred(context):  # Dagster materialized them: planned again, they show failed
        selected = context.run.asset_selection
        for key, doc in ((key, d) for key, docs in held.items() for d in docs if d in failed):
            step = (doc.failed_step or "raw_files@").partition("@")[0]
            steps_from = [dg.AssetKey(s) for s in from_step(step if step in STEPS else "raw_files")]
            plan(context, [k for k in steps_from if selected is None or k in selected], [key])
    if failed:
        raise dg.Failure(
            description=f"{len(failed)} of {len(docs)} documents failed: "
            + "; ".join(f"{d.source_path} at {d.failed_step}: {d.error}" for d in failed)[:2000],
            metadata={"failed": dg.MetadataValue.json({d.source_path: d.error for d in failed})},
        )


def written(results: Results) -> list[str]:
    """The documents a step wrote (or rewrote the same): not the ones it skipped as current."""
    return [document_id for document_id, result in results.items() if not result.skipped]


def report(
    context: dg.AssetExecutionContext, results: Results, failures: dict[str, str], started: float, **extra: object
) -> None:
    """The step's totals over its documents, for the run's log (a partition's metadata is its own)."""
    skipped = sum(1 for r in results.values() if r.skipped)
    totals = {
        "documents": len(results) + len(failures),
        "processed": len(results) - skipped,
        "skipped_unchanged": skipped,
        "failed": len(failures),
        "seconds": round(time.monotonic() - started, 3),
        **extra,
    }
    context.log.info(", ".join(f"{name} {value}" for name, value in totals.items()))


def publication_target(stores: Stores) -> Publication:
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
    serving = published_collection(client, cat, stores.alias)
    if serving is None or serving == collection:
        return Publication(Target(client, collection))
    return Publication(
        Target(client, collection), Serving(serving, stores.model(collection_spec(client, serving)["model"]))
    )
