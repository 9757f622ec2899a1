"""The six assets, one dynamic partition per document, batched: a run handles a range of documents.

Assets are thin: they pick the run's documents, call the plain step of ``kb_assets.steps`` for each,
quarantine documents that fail (status ``failed`` with the reason) and report counts to the UI. Every
asset carries a blocking data-quality check (see ``checks.py``).
"""


import time
import warnings
from typing import Callable

import dagster as dg

from kb_assets import planning, steps
from kb_assets.defs import checks
from kb_assets.defs.partitions import documents_partitions
from kb_assets.page_images import has_page_images, render_missing
from kb_assets.defs.resources import (
    CatalogResource,
    EmbeddingModelResource,
    LakeResource,
    MilvusResource,
    ObjectStoreResource,
    ParsingResource,
    SummarizerResource,
)
from kb_assets.settings import Settings
from kb_assets.stores.catalog import Catalog, Document
from kb_assets.stores.vectors import SCHEMA_VERSION, ensure_collection, flush

# The backfill policy is what batches many documents into one run; its beta notice is known
warnings.filterwarnings("ignore", category=dg.BetaWarning)

# A backfill launched from the UI is cut into runs of at most this many contiguous partitions (one run
# pod each on Kubernetes), as `kb-assets ingest` and the sensor cut theirs at KB_RUN_BATCH_SIZE; this
# is that setting's default (definitions are built before any setting is read).
BACKFILL_PARTITIONS_PER_RUN = Settings.run_batch_size

COMMON = dict(
    partitions_def=documents_partitions,
    backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=BACKFILL_PARTITIONS_PER_RUN),
    group_name="knowledge_base",
)


def active_documents(context: dg.AssetExecutionContext, catalog: Catalog) -> list[Document]:
    """The run's documents that are still going (not failed or deleted), in partition order (a
    hash-bucket partition names its changed documents: ``planning.run_documents``)."""
    docs = planning.run_documents(list(context.partition_keys), context.run.run_id, catalog)
    return [doc for doc in docs if doc.status not in ("failed", "deleted")]


def for_each_document(context: dg.AssetExecutionContext, catalog: Catalog, docs: list[Document],
                      step: Callable[[Document], dict]) -> tuple[dict[str, dict], dict[str, str]]:
    """Run a step per document; a failing document is marked failed and the others go on."""
    results, failures = {}, {}
    for doc in docs:
        try:
            with catalog.document_lock(doc.document_id):   # a concurrent writer of the document waits
                results[doc.document_id] = step(doc)
        except steps.DocumentFailed as error:
            failures[doc.document_id] = str(error)
        except Exception as error:  # an unexpected bug in one document must not stop the batch
            context.log.exception(f"{doc.source_uri}: unexpected error")
            failures[doc.document_id] = f"{doc.source_path}: unexpected {type(error).__name__}: {error}"
    for document_id, reason in failures.items():
        catalog.mark_failed(document_id, reason, context.run.run_id)
        context.log.warning(f"document {document_id} failed: {reason}")
    return results, failures


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


@dg.asset(**COMMON, kinds={"python", "s3"},
          check_specs=[dg.AssetCheckSpec("original_stored", asset="raw_files", blocking=True)])
def raw_files(context: dg.AssetExecutionContext, catalog: CatalogResource, object_store: ObjectStoreResource,
              parsing: ParsingResource):
    """Original bytes of each source document, content-addressed in the object store; sha256 is the version."""
    started, cat, store = time.monotonic(), catalog.catalog(), object_store.store()
    docs = active_documents(context, cat)
    sources = object_store.s3.storage_options()   # s3:// sources are read with the same AWS_* settings
    results, failures = for_each_document(
        context, cat, docs,
        lambda d: steps.store_raw_file(d, cat, store, parsing.max_file_bytes, context.run.run_id, sources))
    check = checks.check_raw_files(cat, store, list(results), context.run.run_id)
    return dg.MaterializeResult(
        metadata=report(results, failures, started, bytes=sum(r["bytes"] for r in results.values())),
        check_results=[check])


@dg.asset(**COMMON, deps=[raw_files], kinds={"python", "postgres"},
          check_specs=[dg.AssetCheckSpec("pages_complete", asset="parsed_pages", blocking=True)])
def parsed_pages(context: dg.AssetExecutionContext, catalog: CatalogResource, object_store: ObjectStoreResource,
                 parsing: ParsingResource):
    """Page records in Postgres (0-based page_index, text, blocks, summary, parser and mode per page)."""
    started, cat, store, options = time.monotonic(), catalog.catalog(), object_store.store(), parsing.options()
    docs = active_documents(context, cat)
    results, failures = for_each_document(context, cat, docs,
                                          lambda d: steps.parse_pages(d, cat, store, options, context.run.run_id))
    modes = sorted({r["mode"] for r in results.values()})
    check = checks.check_pages(cat, list(results), context.run.run_id)
    return dg.MaterializeResult(
        metadata=report(results, failures, started, pages=sum(r["pages"] for r in results.values()),
                        parser_modes=", ".join(modes) or "none"),
        check_results=[check])


@dg.asset(**COMMON, deps=[parsed_pages], kinds={"python", "postgres"},
          check_specs=[dg.AssetCheckSpec("tree_within_pages", asset="pageindex_trees", blocking=True)])
def pageindex_trees(context: dg.AssetExecutionContext, catalog: CatalogResource, object_store: ObjectStoreResource,
                    summarizer: SummarizerResource):
    """A PageIndex tree per document (from the PDF outline, a printed table of contents, headings or page
    groups): nodes with page ranges, summaries and keywords; page summaries; table-of-contents pages marked."""
    started, cat, store, page_summarizer = time.monotonic(), catalog.catalog(), object_store.store(), summarizer.summarizer()
    docs = active_documents(context, cat)
    results, failures = for_each_document(
        context, cat, docs, lambda d: steps.build_pageindex(d, cat, context.run.run_id, store, page_summarizer))
    for warning in sorted({w for r in results.values() for w in r.get("warnings", [])}):
        context.log.warning(warning)
    check = checks.check_trees(cat, list(results), context.run.run_id)
    sources = sorted({r["source"] for r in results.values() if r.get("source")})
    return dg.MaterializeResult(
        metadata=report(results, failures, started, nodes=sum(r["nodes"] for r in results.values()),
                        tree_sources=", ".join(sources) or "none"),
        check_results=[check])


@dg.asset(**COMMON, deps=[pageindex_trees], kinds={"python", "parquet"},
          check_specs=[dg.AssetCheckSpec("chunks_traceable", asset="chunks", blocking=True)])
def chunks(context: dg.AssetExecutionContext, catalog: CatalogResource, lake: LakeResource,
           embedding_model: EmbeddingModelResource):
    """Content-aware chunks in the lake: content, embedding_input, page range, section, lineage."""
    started, cat, lk, model = time.monotonic(), catalog.catalog(), lake.lake(), embedding_model.load()
    docs = active_documents(context, cat)
    results, failures = for_each_document(
        context, cat, docs,
        lambda d: steps.build_chunks(d, cat, lk, model, context.run.run_id, embedding_model.max_chunks_per_document))
    for document_id, result in results.items():
        if result.get("fallback"):
            context.log.warning(f"document {document_id}: {result['fallback']}")
    check = checks.check_chunks(cat, lk, list(results), model, context.run.run_id)
    return dg.MaterializeResult(
        metadata=report(results, failures, started, chunks=sum(r["chunks"] for r in results.values()),
                        fallback_chunked=sum(1 for r in results.values() if r.get("fallback"))),
        check_results=[check])


EMBEDDINGS = dg.AssetSpec(
    "embeddings", deps=[chunks], kinds={"python", "parquet"}, group_name=COMMON["group_name"],
    partitions_def=documents_partitions,
    description="Dense vectors per chunk in the lake; only chunks whose embedding_input changed are re-encoded.")
MILVUS_COLLECTION = dg.AssetSpec(
    "milvus_collection", deps=[EMBEDDINGS], kinds={"python", "milvus"}, group_name=COMMON["group_name"],
    partitions_def=documents_partitions,
    description="Each document's chunks as Milvus entities (dense + BM25) of the collection of the embedding spec.")


@dg.multi_asset(
    specs=[EMBEDDINGS, MILVUS_COLLECTION], can_subset=True, backfill_policy=COMMON["backfill_policy"],
    partitions_def=documents_partitions,
    check_specs=[dg.AssetCheckSpec("vectors_valid", asset="embeddings", blocking=True),
                 dg.AssetCheckSpec("entities_match_chunks", asset="milvus_collection", blocking=True)])
def embed_and_publish(context: dg.AssetExecutionContext, catalog: CatalogResource, lake: LakeResource,
                      milvus: MilvusResource, embedding_model: EmbeddingModelResource):
    """``embeddings`` and ``milvus_collection`` in one step, so that a document is published as soon as
    its vectors are: chunks are encoded in bounded slices (KB_EMBEDDING_SLICE), smallest documents
    first, and each document's vectors are stored, checked (``vectors_valid``, before publishing) and
    upserted into Milvus when its last slice is done; a large document delays the others of its run by
    one slice at most."""
    started, cat, lk, model = time.monotonic(), catalog.catalog(), lake.lake(), embedding_model.load()
    run_id = context.run.run_id
    publishing = MILVUS_COLLECTION.key in context.selected_asset_keys
    target, client, collection = None, None, None
    if publishing:
        client, spec = milvus.client(), embedding_model.spec()
        collection = ensure_collection(client, spec, milvus.dense_index)
        with cat.connect() as conn:
            cat.record_collection(conn, name=collection, alias=milvus.alias, schema_version=SCHEMA_VERSION,
                                  model=spec.model, dimension=spec.dimension, languages=list(spec.languages),
                                  state="building")
        target = (client, collection)
    docs = active_documents(context, cat)
    violations: list = []

    def check(document_id: str) -> list:
        found = checks.embedding_violations(lk, document_id, model.dimension)
        violations.extend(found)
        return found

    alias_set: list[str | None] = []

    def published(doc) -> None:
        if publishing and not alias_set:   # the first build: the alias serves the first published document
            alias_set.append(steps.publish_if_unpublished(client, cat, milvus.alias, collection))

    try:
        results, failures = steps.embed_and_publish(docs, cat, lk, model, embedding_model.model, run_id,
                                                    embedding_model.slice_size, check, target, published)
    except Exception as error:  # encoding: a failure here is the model's, not a document's
        raise dg.Failure(f"embedding {len(docs)} documents failed: {error}") from error
    for document_id, reason in failures.items():
        context.log.warning(f"document {document_id} failed: {reason}")
    checked = sorted({*results, *(v for violation in violations for v in violation.document_ids)})
    yield dg.MaterializeResult(
        asset_key=EMBEDDINGS.key,
        metadata=report(results, failures, started, model=embedding_model.model, encoder=model.backend,
                        dimension=model.dimension, slice_size=embedding_model.slice_size,
                        embedded=sum(r["embedded"] for r in results.values()),
                        reused=sum(r["reused"] for r in results.values())),
        check_results=[checks.check_embeddings(cat, checked, violations, run_id)])
    if publishing:
        flush(client, collection)   # seals the write-ahead log into indexed segments: ~10x faster searches
        alias = steps.publish_if_unpublished(client, cat, milvus.alias, collection)
        check = checks.check_milvus(cat, lk, client, collection, list(results), run_id)
        yield dg.MaterializeResult(
            asset_key=MILVUS_COLLECTION.key,
            metadata=report(results, failures, started, collection=collection, alias=milvus.alias,
                            alias_target=alias or "not this collection (run kb-assets migrate)",
                            entities_written=sum(r.get("written", 0) for r in results.values()),
                            entities_deleted=sum(r.get("deleted", 0) for r in results.values())),
            check_results=[check])


@dg.asset(**COMMON, deps=[parsed_pages], kinds={"python", "s3"}, op_tags={"dagster/priority": "-10"})
def page_images(context: dg.AssetExecutionContext, catalog: CatalogResource, object_store: ObjectStoreResource):
    """Page renders (PNG, 72 dpi) of PDF and image documents, for the page images search results and
    the page endpoint link to. Off the path to publication: the lowest priority of the run, so it
    runs after its documents are published; a page still without a render is rendered on its first request."""
    started, cat, store = time.monotonic(), catalog.catalog(), object_store.store()
    results, failures = {}, {}
    for doc in (d for d in active_documents(context, cat) if has_page_images(d.source_kind)):
        try:
            results[doc.document_id] = render_missing(doc, cat, store)
        except Exception as error:  # a page image is not worth failing a published document: rendered on request
            failures[doc.document_id] = f"{doc.source_path}: {type(error).__name__}: {error}"
            context.log.warning(f"page images of {doc.source_path}: {failures[doc.document_id]}")
    return dg.MaterializeResult(metadata=report(
        results, failures, started, rendered=sum(r["rendered"] for r in results.values()),
        already_present=sum(r["present"] for r in results.values())))


ASSETS = [raw_files, parsed_pages, pageindex_trees, chunks, embed_and_publish, page_images]
