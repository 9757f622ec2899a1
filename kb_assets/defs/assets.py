"""The document assets, one dynamic partition per document (or hash bucket), batched: a run handles a
range of documents.

Assets are thin: they pick the run's documents, call the plain step of ``kb_assets.pipeline.steps`` for each,
quarantine documents that fail (status ``failed`` with the reason) and report counts to the UI. Every
asset carries a blocking data-quality check (see ``checks.py``).

Each asset's ``code_version`` is its pipeline version (``kb_assets.pipeline.versions``, set from the settings by
``versioned``); the step records it on what it writes. Each partition's materialization describes its
document alone (source path, knowledge base, version, outcome, its own figures); a document that fails
is not materialized by any step from the one it failed at, and the run fails at its end, so Dagster
shows exactly its partitions failed (``document_steps``); the others of its run go on.
"""

import time
import warnings

import dagster as dg

from kb_assets.defs import checks
from kb_assets.defs.document_steps import (
    active_documents,
    fail_run_if_documents_failed,
    failed_step,
    for_each_document,
    publication_target,
    record_partitions,
    report,
    settle,
    step_version,
    written,
)
from kb_assets.defs.partitions import PartitionedAsset, documents_partitions
from kb_assets.pipeline import steps
from kb_assets.pipeline.page_images import has_page_images, render_missing
from kb_assets.pipeline.versions import step_versions
from kb_assets.settings import Settings
from kb_assets.stores import Stores
from kb_assets.stores.vectors import flush

# The backfill policy is what batches many documents into one run; its beta notice is known
warnings.filterwarnings("ignore", category=dg.BetaWarning)

# A backfill launched from the UI is cut into runs of at most this many contiguous partitions (one run
# pod each on Kubernetes), as `kb-assets ingest` and the sensor cut theirs at KB_RUN_BATCH_SIZE; this
# is that setting's default (definitions are built before any setting is read).
BACKFILL_PARTITIONS_PER_RUN = Settings.run_batch_size

COMMON = PartitionedAsset(
    partitions_def=documents_partitions,
    backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=BACKFILL_PARTITIONS_PER_RUN),
    group_name="knowledge_base",
)


def document_step(
    kinds: set[str],
    check: tuple[str, str] | None = None,
    after: dg.AssetsDefinition | None = None,
    op_tags: dict[str, str] | None = None,
):
    """The decorator of a document asset: partitioned per document, backfilled in batches, after the step
    ``after``, guarded by the blocking data-quality check ``check`` (its name and description)."""

    def decorate(body) -> dg.AssetsDefinition:
        specs = [dg.AssetCheckSpec(check[0], asset=body.__name__, blocking=True, description=check[1])] if check else []
        return dg.asset(
            **COMMON,
            deps=[after] if after is not None else None,
            kinds=kinds,
            check_specs=specs or None,
            op_tags=op_tags,
        )(body)

    return decorate


def document_spec(name: str, after: dg.AssetSpec | dg.AssetsDefinition, kinds: set[str], description: str):
    """A document asset of a multi-asset step (``embed_and_publish``)."""
    return dg.AssetSpec(
        name,
        deps=[after],
        kinds=kinds,
        group_name=COMMON["group_name"],
        partitions_def=documents_partitions,
        description=description,
    )


@document_step(
    kinds={"python", "s3"},
    check=(
        "original_stored",
        "The original bytes are in the object store under their sha256, which is the document version.",
    ),
)
def raw_files(context: dg.AssetExecutionContext, stores: dg.ResourceParam[Stores]):
    """Original bytes of each source document, content-addressed in the object store; sha256 is the version."""
    started, cat, store = time.monotonic(), stores.catalog, stores.objects
    docs = active_documents(context, cat)
    sources = stores.settings.storage_options()  # s3:// sources are read with the same AWS_* settings
    results, failures = for_each_document(
        context,
        cat,
        docs,
        lambda d: steps.store_raw_file(
            d, cat, store, stores.settings.parse.max_file_bytes, context.run.run_id, sources, step_version(context)
        ),
    )
    published = {d.document_id for d in docs if d.status == "published" and d.published_version == d.version}
    new = [document_id for document_id in results if document_id not in published]  # the others were checked
    check = checks.check_raw_files(cat, store, new, context.run.run_id, failed_step(context))
    report(context, results, failures, started, bytes=sum(r["bytes"] for r in results.values()))
    return dg.MaterializeResult(check_results=[check])


@document_step(
    kinds={"python", "postgres"},
    check=(
        "pages_complete",
        "Pages numbered 0..n-1 without gaps, each with its parser and mode recorded (degraded paths are explicit).",
    ),
    after=raw_files,
)
def parsed_pages(context: dg.AssetExecutionContext, stores: dg.ResourceParam[Stores]):
    """Page records in Postgres (0-based page_index, text, blocks, summary, parser and mode per page)."""
    started, cat, store, options = time.monotonic(), stores.catalog, stores.objects, stores.parse_options()
    docs = active_documents(context, cat)
    version = step_version(context)
    results, failures = for_each_document(
        context, cat, docs, lambda d: steps.parse_pages(d, cat, store, options, context.run.run_id, version)
    )
    modes = sorted({r["mode"] for r in results.values()})
    check = checks.check_pages(cat, written(results), context.run.run_id, failed_step(context))
    report(
        context,
        results,
        failures,
        started,
        pages=sum(r["pages"] for r in results.values()),
        parser_modes=", ".join(modes) or "none",
    )
    return dg.MaterializeResult(check_results=[check])


@document_step(
    kinds={"python", "postgres"},
    check=("tree_within_pages", "One root per tree, every parent in the tree, every node within the document's pages."),
    after=parsed_pages,
)
def pageindex_trees(context: dg.AssetExecutionContext, stores: dg.ResourceParam[Stores]):
    """A PageIndex tree per document (from the PDF outline, a printed table of contents, headings or page
    groups): nodes with page ranges, summaries and keywords; page summaries; table-of-contents pages marked."""
    started, cat, store, page_summarizer = time.monotonic(), stores.catalog, stores.objects, stores.summarizer()
    docs = active_documents(context, cat)
    results, failures = for_each_document(
        context,
        cat,
        docs,
        lambda d: steps.build_pageindex(d, cat, context.run.run_id, store, page_summarizer, step_version(context)),
    )
    for warning in sorted({w for r in results.values() for w in r.get("warnings", [])}):
        context.log.warning(warning)
    check = checks.check_trees(cat, written(results), context.run.run_id, failed_step(context))
    sources = sorted({r["source"] for r in results.values() if r.get("source")})
    report(
        context,
        results,
        failures,
        started,
        nodes=sum(r["nodes"] for r in results.values()),
        tree_sources=", ".join(sources) or "none",
    )
    return dg.MaterializeResult(check_results=[check])


@document_step(
    kinds={"python", "parquet"},
    check=(
        "chunks_traceable",
        "Unique chunk ids; each chunk's content is found in its pages (lineage); its embedding input fits the model.",
    ),
    after=pageindex_trees,
)
def chunks(context: dg.AssetExecutionContext, stores: dg.ResourceParam[Stores]):
    """Content-aware chunks in the lake: content, embedding_input (with a situating sentence when a chunk
    contextualizer is configured), page range, section, lineage."""
    started, cat, lk, model = time.monotonic(), stores.catalog, stores.lake, stores.model()
    contextualizer = stores.contextualizer()
    docs = active_documents(context, cat)
    deferred: list = []  # the run's chunks go into one lake file: recorded once it is written
    run_id, version, budget = context.run.run_id, step_version(context), stores.settings.max_chunks_per_document
    with lk.batch():
        results, failures = for_each_document(
            context,
            cat,
            docs,
            lambda d: steps.build_chunks(d, cat, lk, model, run_id, version, budget, contextualizer, deferred),
        )
    steps.record_chunks(cat, [record for record in deferred if record[0] in results])
    for document_id, result in results.items():
        if result.get("fallback"):
            context.log.warning(f"document {document_id}: {result['fallback']}")
    for warning in sorted({w for r in results.values() for w in r.get("warnings", [])}):
        context.log.warning(warning)
    check = checks.check_chunks(cat, lk, written(results), model, context.run.run_id, failed_step(context))
    report(
        context,
        results,
        failures,
        started,
        chunks=sum(r["chunks"] for r in results.values()),
        fallback_chunked=sum(1 for r in results.values() if r.get("fallback")),
        **(
            {
                "contextualized_chunks": sum(r.get("contextualized", 0) for r in results.values()),
                "contexts_written": sum(r.get("contexts_written", 0) for r in results.values()),
            }
            if contextualizer
            else {}
        ),
    )
    return dg.MaterializeResult(check_results=[check])


EMBEDDINGS = document_spec(
    "embeddings",
    after=chunks,
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
    target = (publication[0], publication[1]) if publication is not None else None  # (client, collection)
    also = publication[2] if publication is not None else None
    docs = active_documents(context, cat)
    violations: list = []
    current = {d.document_id for d in docs if (d.step_versions or {}).get("embeddings") == versions[0]}

    def check(document_ids: list[str]) -> dict[str, str]:  # current vectors were checked when written
        fresh = [d for d in document_ids if d not in current]
        found = checks.embedding_violations(lk, fresh, model.dimension) if fresh else []
        violations.extend(found)
        return checks.failed_documents(found)

    alias_set: list[str | None] = []

    def published(doc) -> None:
        if target is not None and not alias_set:  # the first build: the alias serves the first published document
            alias_set.append(steps.publish_if_unpublished(target[0], cat, stores.alias, target[1]))

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
    settle(context, cat, results, failures, sorted(selected))  # steps.embed_and_publish marked them failed
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
            embedded=sum(r["embedded"] for r in results.values()),
            reused=sum(r["reused"] for r in results.values()),
        )
        yield dg.MaterializeResult(
            asset_key=EMBEDDINGS.key,
            check_results=[
                checks.check_embeddings(cat, checked, violations, run_id, failed_step(context, EMBEDDINGS.key))
            ],
        )
    if target is not None:  # publishing
        client, collection = target
        changed = any(r.get("written") or r.get("deleted") for r in results.values())
        for name in [collection, *([also[0]] if also else [])] if changed else []:
            flush(client, name)  # seals the write-ahead log into indexed segments: ~10x faster searches
        alias = steps.publish_if_unpublished(client, cat, stores.alias, collection)
        republished = [d for d, r in results.items() if r.get("published_skipped") is False]
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
            alias_target=alias or f"{also[0] if also else None} (the migration publishes {collection})",
            also_written_to=also[0] if also else "none",
            entities_written=sum(r.get("written", 0) for r in results.values()),
            entities_deleted=sum(r.get("deleted", 0) for r in results.values()),
            chunks_with_bm25_statistics_kept=sum(r.get("terms_kept", 0) for r in results.values()),
        )
        yield dg.MaterializeResult(asset_key=MILVUS_COLLECTION.key, check_results=[milvus_check])
    fail_run_if_documents_failed(context, cat, results)  # the run's last document step


@document_step(kinds={"python", "s3"}, after=parsed_pages, op_tags={"dagster/priority": "-10"})
def page_images(context: dg.AssetExecutionContext, stores: dg.ResourceParam[Stores]):
    """Page renders (PNG, 72 dpi) of PDF and image documents, for the page images search results and
    the page endpoint link to. Off the path to publication: the lowest priority of the run, so it
    runs after its documents are published; a page still without a render is rendered on its first request."""
    started, cat, store = time.monotonic(), stores.catalog, stores.objects
    results: dict[str, dict] = {}
    failures: dict[str, str] = {}
    for doc in active_documents(context, cat):
        if not has_page_images(doc.source_kind):
            results[doc.document_id] = {"rendered": 0, "present": 0, "skipped": True}
            continue
        try:
            results[doc.document_id] = render_missing(doc, cat, store)
        except Exception as error:  # a page image is not worth failing a published document: rendered on request
            failures[doc.document_id] = f"{doc.source_path}: {type(error).__name__}: {error}"
            context.log.warning(f"page images of {doc.source_path}: {failures[doc.document_id]}")
    rendered, present = (sum(r[k] for r in results.values()) for k in ("rendered", "present"))
    report(context, results, failures, started, rendered=rendered, already_present=present)
    record_partitions(context, cat, results, failures, [context.asset_key])
    return dg.MaterializeResult()


ASSETS = [raw_files, parsed_pages, pageindex_trees, chunks, embed_and_publish, page_images]


def versioned(assets: list[dg.AssetsDefinition], settings: Settings) -> list[dg.AssetsDefinition]:
    """The document assets with their pipeline versions as code versions (``pipeline.versions.step_versions``;
    ``page_images``, off the pipeline, has none)."""
    versions = step_versions(settings)
    return [
        asset.map_asset_specs(
            lambda spec: spec.replace_attributes(
                code_version=versions.get(spec.key.to_user_string(), spec.code_version)
            )
        )
        for asset in assets
    ]
