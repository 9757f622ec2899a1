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

import dagster as dg

from kb_assets.defs import checks
from kb_assets.defs.document_assets import document_step
from kb_assets.defs.document_steps import (
    active_documents,
    failed_step,
    for_each_document,
    record_partitions,
    report,
    step_version,
    written,
)
from kb_assets.defs.provenance import SOURCE_FILES, observe_unobserved
from kb_assets.defs.publish_assets import EMBEDDINGS, MILVUS_COLLECTION, embed_and_publish
from kb_assets.pipeline import steps
from kb_assets.pipeline.page_images import has_page_images, render_missing
from kb_assets.pipeline.step_results import RenderedImages
from kb_assets.stores import Stores


@document_step(
    kinds={"python", "s3"},
    check=(
        "original_stored",
        "The original bytes are in the object store under their sha256, which is the document version.",
    ),
    after=SOURCE_FILES,
)
def raw_files(context: dg.AssetExecutionContext, stores: dg.ResourceParam[Stores]):
    """Original bytes of each source document, content-addressed in the object store; sha256 is the version."""
    started, cat, store = time.monotonic(), stores.catalog, stores.objects
    docs = active_documents(context, cat)
    observe_unobserved(context.instance, docs, stores.settings.partitioning)  # its provenance reads the file's
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
    report(context, results, failures, started, bytes=sum(r.bytes for r in results.values()))
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
    modes = sorted({r.mode for r in results.values()})
    check = checks.check_pages(cat, written(results), context.run.run_id, failed_step(context))
    report(
        context,
        results,
        failures,
        started,
        pages=sum(r.pages for r in results.values()),
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
    for warning in sorted({w for r in results.values() for w in r.warnings}):
        context.log.warning(warning)
    check = checks.check_trees(cat, written(results), context.run.run_id, failed_step(context))
    sources = sorted({r.source for r in results.values() if r.source})
    report(
        context,
        results,
        failures,
        started,
        nodes=sum(r.nodes for r in results.values()),
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
    deferred: list[steps.ChunksRecord] = []  # the run's chunks go into one lake file: recorded once it is written
    run_id, version, budget = context.run.run_id, step_version(context), stores.settings.max_chunks_per_document
    with lk.batch():
        results, failures = for_each_document(
            context,
            cat,
            docs,
            lambda d: steps.build_chunks(d, cat, lk, model, run_id, version, budget, contextualizer, deferred),
        )
    steps.record_chunks(cat, [record for record in deferred if record.document_id in results])
    for document_id, result in results.items():
        if result.fallback:
            context.log.warning(f"document {document_id}: {result.fallback}")
    for warning in sorted({w for r in results.values() for w in r.warnings}):
        context.log.warning(warning)
    check = checks.check_chunks(cat, lk, written(results), model, context.run.run_id, failed_step(context))
    report(
        context,
        results,
        failures,
        started,
        chunks=sum(r.chunks for r in results.values()),
        fallback_chunked=sum(1 for r in results.values() if r.fallback),
        **(
            {
                "contextualized_chunks": sum(r.contextualized for r in results.values()),
                "contexts_written": sum(r.contexts_written for r in results.values()),
            }
            if contextualizer
            else {}
        ),
    )
    return dg.MaterializeResult(check_results=[check])


@document_step(kinds={"python", "s3"}, after=parsed_pages, op_tags={"dagster/priority": "-10"})
def page_images(context: dg.AssetExecutionContext, stores: dg.ResourceParam[Stores]):
    """Page renders (PNG, 72 dpi) of PDF and image documents, for the page images search results and
    the page endpoint link to. Off the path to publication: the lowest priority of the run, so it
    runs after its documents are published; a page still without a render is rendered on its first request."""
    started, cat, store = time.monotonic(), stores.catalog, stores.objects
    results: dict[str, RenderedImages] = {}
    failures: dict[str, str] = {}
    for doc in active_documents(context, cat):
        if not has_page_images(doc.source_kind):
            results[doc.document_id] = RenderedImages(skipped=True)
            continue
        try:
            results[doc.document_id] = render_missing(doc, cat, store)
        except Exception as error:  # a page image is not worth failing a published document: rendered on request
            failures[doc.document_id] = f"{doc.source_path}: {type(error).__name__}: {error}"
            context.log.warning(f"page images of {doc.source_path}: {failures[doc.document_id]}")
    rendered, present = sum(r.rendered for r in results.values()), sum(r.present for r in results.values())
    report(context, results, failures, started, rendered=rendered, already_present=present)
    record_partitions(context, cat, results, failures, [context.asset_key])
    return dg.MaterializeResult()


ASSETS = [raw_files, parsed_pages, pageindex_trees, chunks, embed_and_publish, page_images]
__all__ = ["ASSETS", "EMBEDDINGS", "MILVUS_COLLECTION"]
