"""What every document asset does around its step: find the run's documents, run the step for each (a
failing document is marked failed and the others go on), record each partition for the UI and report
counts; at the run's end, record the documents it refused; and the collection a publishing run writes to.

Runs of ``ingest_documents`` carry Dagster's system run tag ``dagster/defer_asset_events``
(``DEFER_ASSET_EVENTS``): Dagster then writes no asset event of its own, and the steps write them per
document (``record_partitions``): a planned event for every partition at the start of a step, a
materialization with that document's own metadata and Dagster's data-version provenance for each
document that went through, none for a document that failed (an observation with its reason instead).
Without the tag, Dagster materializes every partition of a step's range at its end, the failed
documents' included: in Dagster 1.13 no public API materializes only some partitions of a step
(``MaterializeResult`` has no partition; an unyielded output skips the steps after it). Runs without the
tag (the implicit asset job: ``dagster asset materialize``, Materialize in the asset graph) get Dagster's
events and per-partition metadata.

A document refused as bad input (``DocumentFailed``: corrupt, empty, encrypted, oversized, or quarantined
by a check) does not fail the run: the run goes on and succeeds with the others, and the refusal is a run
of its own (``record_refusals``), created failed at the asset that refused the document, for its partition,
with the reason as the run's failure and no stack trace: Dagster shows a partition failed only when a
failed run planned it (open-source event storages keep no asset failure events), and a step's failure
always carries a stack trace. An unexpected error (a bug, an outage: ``steps.is_unexpected``) fails the run
at its end, with the error's traceback in the step's log."""

import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import dagster as dg

from kb_assets.defs.dagster_internals import DEFER_ASSET_EVENTS_TAG, report_planned, report_planned_materialization
from kb_assets.defs.provenance import materialization_tags
from kb_assets.pipeline import planning, steps
from kb_assets.pipeline.step_results import Publication, Serving, StepResult, Target
from kb_assets.pipeline.versions import STEPS, from_step
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
    the partitions of these documents are planned first (not those of documents that failed at an
    earlier step: this step never sees them)."""
    run_id = context.run.run_id
    docs = planning.run_documents(list(context.partition_keys), run_id, catalog, claim_of(context))
    active = [
        doc for doc in docs if doc.status != "deleted" and not (doc.status == "failed" and doc.last_run_id == run_id)
    ]
    if events_deferred(context):
        plan(context, sorted(context.selected_asset_keys), worked_keys(context, active))
    return active


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
        except steps.DocumentFailed as error:  # refused: the reason is all there is to say
            failures[doc.document_id] = str(error)
        except Exception as error:  # an unexpected bug in one document must not stop the batch
            context.log.error(f"{doc.source_uri}: unexpected error\n{traceback.format_exc()}")
            failures[doc.document_id] = steps.unexpected_failure(doc, error)
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
    """After a step's documents: log each failure (a refusal as one line), record every partition
    (``record_partitions``), and fail the step when every document failed and one of them for an
    unexpected error (the steps after it have nothing to do; a batch refused as bad input does not fail)."""
    for document_id, reason in failures.items():
        said = "failed" if steps.is_unexpected(reason) else "refused"
        context.log.warning(f"document {document_id} {said}: {reason}")
    record_partitions(context, catalog, results, failures, asset_keys or [context.asset_key])
    if failures and not results and any(steps.is_unexpected(reason) for reason in failures.values()):
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
    materialization with the partition's own metadata and Dagster's provenance (``provenance.py``: it reads
    the inputs' events, so record an asset after those of its inputs this step materializes) when none of
    its documents failed in this run; else none, and an observation with the reason when it failed here,
    where a refused document is recorded failed (``record_refusals``). Otherwise: per-partition metadata on
    Dagster's events (the run's end records the refusals: ``settle_run``)."""
    run_id, deferred = context.run.run_id, events_deferred(context)
    partitions = documents_by_partition(list(context.partition_keys), run_id, catalog, claim_of(context))
    parsed = all(STEPS.index(k.to_user_string()) > 1 for k in asset_keys if k.to_user_string() in STEPS)
    modes = catalog.page_modes([d.document_id for docs in partitions.values() for d in docs]) if parsed else {}
    held = [key for key, docs in partitions.items() if docs]
    provenance = {key: materialization_tags(context, key, held) for key in asset_keys} if deferred else {}
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
            elif not failed:  # with Dagster's provenance: the UI's "Unsynced" follows the inputs and versions
                tags = provenance[asset_key][key]
                context.log_event(dg.AssetMaterialization(asset_key, partition=key, metadata=metadata, tags=tags))
            elif failed_here:
                context.log_event(dg.AssetObservation(asset_key, partition=key, metadata=metadata))
        refused_here = [
            d
            for d in failed_here
            if not steps.is_unexpected(failures[d.document_id]) and steps_from(d)[0] in asset_keys
        ]
        if deferred and refused_here and not planning.is_bucket(key):  # at the asset that refused it, in its log
            record_refusals(context, key, refused_here)  # (a bucket's later steps plan it again: at the run's end)


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


def settle_run(context: dg.AssetExecutionContext, catalog: Catalog, results: Results) -> None:
    """The run's last document step: each document refused in this run is recorded failed in a run of its
    own (``record_refusals``), and when one failed for an unexpected error the run fails (after the
    others were published), so that Dagster shows the partitions it planned and did not materialize failed.
    In a run whose events Dagster wrote, such a document's partitions are planned again first (after the
    materializations Dagster gave them). ``results``: the documents this last step took through (a failed
    document whose last good version a migration carried over is one: its failure is older than this run)."""
    run_id = context.run.run_id
    held = documents_by_partition(list(context.partition_keys), run_id, catalog, claim_of(context))
    if claim_of(context):  # what it claimed and found current (nothing rewritten) was run by it all the same
        catalog.settle_claim(claim_of(context) or "", run_id)
    docs = [doc for docs in held.values() for doc in docs]
    failed = [d for d in docs if d.status == "failed" and d.last_run_id == run_id and d.document_id not in results]
    refused = {d.document_id for d in failed if not steps.is_unexpected(d.error)}
    recorded = {  # by their step, as they were refused; left: those a check quarantined, and Dagster-run ones
        r.tags.get("dagster/partition") for r in context.instance.get_runs(dg.RunsFilter(tags={REFUSED_IN_TAG: run_id}))
    }
    for key, held_docs in held.items():
        if key not in recorded and (here := [d for d in held_docs if d.document_id in refused]):
            record_refusals(context, key, here)
    errors = [d for d in failed if d.document_id not in refused]
    if errors and not events_deferred(context):  # Dagster materialized them: planned again, they show failed
        selected = context.run.asset_selection
        for key, doc in ((key, d) for key, docs in held.items() for d in docs if d in errors):
            plan(context, [k for k in steps_from(doc) if not selected or k in selected], [key])
    if errors:
        raise dg.Failure(
            description=f"{len(errors)} of {len(docs)} documents failed for an unexpected error (its traceback "
            "is in the failing step's log): "
            + "; ".join(f"{d.source_path} at {d.failed_step}: {d.error}" for d in errors)[:2000],
            metadata={"failed": dg.MetadataValue.json({d.source_path: d.error for d in errors})},
        )


def steps_from(doc: Document) -> list[dg.AssetKey]:
    """The assets from the one a failed document failed at (``step@version``) to the last."""
    step = (doc.failed_step or "raw_files@").partition("@")[0]
    return [dg.AssetKey(s) for s in from_step(step if step in STEPS else "raw_files")]


REFUSED_IN_TAG = "kb/refused_in"  # on a refusal run: the run that refused its documents


def record_refusals(context: dg.AssetExecutionContext, key: str, docs: list[Document]) -> str:
    """Record that this run refused these documents of partition ``key``: a run of its own of this job, of
    the asset they were refused at (in a run whose events Dagster wrote: from there on, superseding the
    materializations Dagster gave them; a hash bucket: from there on too, since a bucket that holds a failed
    document is never materialized) for that partition, created failed with the reasons as its failure
    message, and not executed. Its partition is planned in it (the assets only: their checks did not fail),
    so it shows failed at that asset (and only there); the run names the documents and the step without a
    stack trace, and this run stays a success for the others. Its run id."""
    first = min((steps_from(doc)[0] for doc in docs), key=lambda k: STEPS.index(k.to_user_string()))
    selected = context.run.asset_selection
    keys = (
        [first]  # a document's later assets never saw it: missing, not failed
        if events_deferred(context) and not planning.is_bucket(key)
        else [k for k in steps_from(docs[0]) if not selected or k in selected]
    )
    at = ", ".join(sorted({doc.failed_step or first.to_user_string() for doc in docs}))
    run = context.instance.create_run_for_job(
        context.job_def,
        run_config=context.run.run_config,
        asset_selection=set(keys),
        tags={"dagster/partition": key, REFUSED_IN_TAG: context.run.run_id, "kb/refused_at": at, **DEFER_ASSET_EVENTS},
    )
    for asset_key in keys:
        step = context.job_def.asset_layer.get(asset_key).assets_def.op.name  # embed_and_publish for two
        report_planned(context.instance, run, step, asset_key, key)
    reasons = "; ".join(" ".join((doc.error or "refused").split()) for doc in docs)
    context.instance.report_run_failed(
        run,
        f"{first.to_user_string()} refused {', '.join(d.source_path for d in docs)} in run {context.run.run_id}: "
        f"{reasons}. Quarantined until the file or {at} changes (kb-assets ingest --retry-failed runs it "
        "again). Nothing was executed in this run: it records the refusal, so that the partition shows failed.",
    )
    context.log.warning(f"{key}: refused at {at}, recorded failed in run {run.run_id}")
    return run.run_id


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
