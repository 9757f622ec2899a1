"""chunks: content-aware chunks of a document's pages in the lake, with their lineage."""

from __future__ import annotations

from typing import NamedTuple

from kb_assets.chunking.chunker import DocumentContext, OverBudget, chunk_with_fallback
from kb_assets.chunking.contextual import EndpointContextualizer, add_chunk_contexts, context_requests
from kb_assets.embedding.model import EmbeddingModel
from kb_assets.pipeline.step_results import BuiltChunks
from kb_assets.pipeline.steps.common import DocumentFailed, current, same_rows, version_of
from kb_assets.pipeline.versions import after, partly_contextualized
from kb_assets.stores.catalog import Catalog, Document
from kb_assets.stores.lake import Lake
from kb_assets.structure.statements import is_statement_node


# chunks --------------------------------------------------------------------------------------
def build_chunks(
    doc: Document,
    catalog: Catalog,
    lake: Lake,
    model: EmbeddingModel,
    run_id: str,
    version: str = "1",
    max_chunks: int | None = None,
    contextualizer: EndpointContextualizer | None = None,
    deferred: list[ChunksRecord] | None = None,
) -> BuiltChunks:
    """Content-aware chunks of the document's pages (the rule-based fallback when that pass fails); a
    document of more than ``max_chunks`` chunks is refused (KB_MAX_CHUNKS_PER_DOCUMENT). The optional
    ``contextualizer`` adds a situating sentence to text chunks' embedding inputs (best-effort, cached).
    Chunks that come out the same as the stored ones are not rewritten (their vectors stay).

    ``deferred``: the run writes its chunks in a lake batch, so the step is recorded there (document,
    version, steps made stale) and ``record_chunks`` records it once the batch's file is written."""
    doc_version = version_of(doc)
    stored = lake.read("chunks", doc.document_id)
    if stored.height and (stored["document_version"] == doc_version).all() and current(doc, "chunks", version):
        return BuiltChunks(chunks=stored.height, skipped=True)
    pages = catalog.read_pages(doc.document_id)
    nodes = [n for n in catalog.read_nodes(doc.document_id) if n["version"] == doc_version and not is_statement_node(n)]
    context = DocumentContext(
        document_id=doc.document_id,
        knowledge_base_id=doc.knowledge_base_id,
        version=doc_version,
        title=doc.title or doc.source_path,
        source_uri=doc.source_uri,
        source_kind=doc.source_kind or "",
        mime=doc.mime or "",
        run_id=run_id,
        pipeline_version=version,
    )
    try:
        frame, fallback = chunk_with_fallback(
            pages, context, model.count_tokens, model.max_tokens, nodes, catalog.toc_pages(doc.document_id), max_chunks
        )
    except OverBudget as error:
        raise DocumentFailed(
            f"{doc.source_path}: {error} chunks a document (KB_MAX_CHUNKS_PER_DOCUMENT): "
            "split the file or raise the budget"
        ) from None
    except ValueError as error:
        raise DocumentFailed(f"{doc.source_path}: cannot chunk ({error})") from None
    if frame.is_empty():
        raise DocumentFailed(f"{doc.source_path}: no chunks (the document has no text)")
    if max_chunks is not None and frame.height > max_chunks:
        raise DocumentFailed(
            f"{doc.source_path}: {frame.height} chunks, over the budget of {max_chunks} chunks a "
            "document (KB_MAX_CHUNKS_PER_DOCUMENT): split the file or raise the budget"
        )
    contexts = None
    if contextualizer is not None:
        requests = context_requests(frame, {p["page_index"]: p["text"] for p in pages})
        cached = catalog.cached_chunk_contexts([r.sha for r in requests], contextualizer.contextualizer_id)
        contexts = add_chunk_contexts(
            frame,
            requests,
            cached,
            contextualizer,
            model.count_tokens,
            model.max_tokens,
            lambda sentences: store_chunk_contexts(catalog, contextualizer, sentences),
        )
        frame = contexts.chunks
    unchanged = same_rows(stored, frame)
    if not unchanged:
        lake.write("chunks", doc.document_id, frame)
    # chunks left plain by a failing endpoint: a version that is never current, so the next run retries them
    made_by = partly_contextualized(version) if contexts is not None and contexts.left_plain else version
    record = ChunksRecord(doc.document_id, made_by, () if unchanged else after("chunks"))
    if deferred is not None:
        deferred.append(record)
    else:
        record_chunks(catalog, [record])
    if contexts is None:
        return BuiltChunks(chunks=frame.height, unchanged=unchanged, fallback=fallback)
    return BuiltChunks(
        chunks=frame.height,
        unchanged=unchanged,
        fallback=fallback,
        contextualized=len(requests) - contexts.left_plain - contexts.too_long,
        contexts_written=len(contexts.new_cache),
        warnings=tuple(contexts.warnings),
    )


class ChunksRecord(NamedTuple):
    """The chunks step of a document, to record once the run's lake file is written (``build_chunks``)."""

    document_id: str
    made_by: str  # the version that made the chunks
    invalidate: tuple[str, ...]  # the steps after it made stale (none when the chunks came out the same)


def record_chunks(catalog: Catalog, records: list[ChunksRecord]) -> None:
    """Record the chunks step of documents (``build_chunks``' deferred records), in one transaction."""
    if records:
        with catalog.connect() as conn:
            for document_id, made_by, invalidate in records:
                catalog.record_step(conn, document_id, "chunks", made_by, invalidate=invalidate)


def store_chunk_contexts(catalog: Catalog, contextualizer: EndpointContextualizer, sentences: dict[str, str]) -> None:
    """Save situating sentences as they come, in a transaction of their own (a cache: safe to write before
    the chunks)."""
    with catalog.connect() as conn:
        catalog.store_chunk_contexts(conn, contextualizer.contextualizer_id, sentences)
