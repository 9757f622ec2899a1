"""The work of each asset for one document, as plain functions over the stores.

Each step is idempotent and skips a document whose output is current: made from the document's
version of the file by the step's current pipeline version (``version``, see ``kb_assets.pipeline.versions``), so a
re-materialization of unchanged content costs nothing. A step that runs again and makes the same output
as before writes nothing and records only that its version confirmed it; a step whose output changed
marks the steps after it stale (their recorded version becomes ""), so they run again. A step that cannot handle a
document raises :class:`DocumentFailed` with the reason; the asset marks that document failed and goes on.
"""

from __future__ import annotations

import dataclasses
import json
import mimetypes
import tempfile
from pathlib import Path, PurePosixPath
from typing import Callable

import polars as pl
from pymilvus import MilvusClient

from kb_assets.chunking.chunker import DocumentContext, OverBudget, chunk_with_fallback
from kb_assets.chunking.contextual import EndpointContextualizer, add_chunk_contexts, context_requests
from kb_assets.embedding.model import EmbeddingModel
from kb_assets.embedding.vectors import DocumentVectors, encode_in_slices, plan_vectors, vectors_frame
from kb_assets.lib.lexical import chunk_row_terms
from kb_assets.pipeline.page_images import has_page_images, page_image_key
from kb_assets.parsing import DocumentParseError, ParseOptions, parse_document
from kb_assets.pipeline.planning import sha256_bytes
from kb_assets.stores.catalog import Catalog, Document
from kb_assets.stores.lake import Lake
from kb_assets.stores.objects import ObjectStore
from kb_assets.stores.paths import source_path
from kb_assets.stores.vectors import (
    chunk_entities,
    collection_exists,
    count_entities,
    delete_document,
    document_filter,
    flush,
    publish,
    published_collection,
    sync_document,
)
from kb_assets.pipeline.versions import after, legacy_version, partly_contextualized
from kb_assets.structure.outline import read_outline
from kb_assets.structure.pageindex import build_document_tree
from kb_assets.structure.summaries import (
    RULES_SUMMARIZER,
    PageSummarizer,
    summarize_document,
)
from kb_assets.lib.text import sha256_text


class DocumentFailed(Exception):
    """One document cannot go on; the message says why (shown to users as the document's error)."""


def made_again(doc: Document) -> dict:
    """What a step that records its run on a failed document it has just made again (a retry from
    ``raw_files`` or ``parsed_pages``) sets too: pending, so that the run's next steps take it (they skip
    documents that failed in this run) until it publishes or fails again."""
    return {"status": "pending", "error": None, "failed_step": None} if doc.status == "failed" else {}


# raw_files -----------------------------------------------------------------------------------
def current(doc: Document, step: str, version: str) -> bool:
    """Whether the document's index records ``step``'s output as made (or confirmed) by ``version``."""
    made_by = (doc.step_versions or {}).get(step)
    return (legacy_version(step, None) if made_by is None else made_by) == version


def store_raw_file(doc: Document, catalog: Catalog, store: ObjectStore, max_bytes: int, run_id: str,
                   source_options: dict | None = None, version: str = "1") -> dict:
    """Copy the source bytes (a local file or an s3:// object, read with ``source_options``) into the
    content-addressed object store and record their version."""
    try:
        data = source_path(doc.source_uri, source_options).read_bytes()
    except FileNotFoundError:
        raise DocumentFailed(f"{doc.source_uri}: source file not found") from None
    except OSError as error:
        raise DocumentFailed(f"{doc.source_uri}: cannot read source file ({error})") from None
    if not data:
        raise DocumentFailed(f"{doc.source_path}: empty file")
    if len(data) > max_bytes:
        raise DocumentFailed(f"{doc.source_path}: {len(data)} bytes exceeds the {max_bytes}-byte limit "
                             "(KB_PARSE_MAX_FILE_BYTES)")
    sha = sha256_bytes(data)
    suffix = PurePosixPath(doc.source_path).suffix
    key = store.put(ObjectStore.original_key(sha, suffix), data)
    mime = mimetypes.guess_type(doc.source_path)[0] or "application/octet-stream"
    with catalog.connect() as conn:
        catalog.update_document(conn, doc.document_id, version=sha, object_key=key, size_bytes=len(data),
                                mime=mime, last_run_id=run_id, **made_again(doc))
        catalog.record_step(conn, doc.document_id, "raw_files", version)
    return {"version": sha, "bytes": len(data), "skipped": False}


# parsed_pages --------------------------------------------------------------------------------
def parse_pages(doc: Document, catalog: Catalog, store: ObjectStore, options: ParseOptions, run_id: str,
                version: str = "1") -> dict:
    """Parse the stored original into page records (text, blocks, parser, mode, label; summaries and
    keywords are ``pageindex_trees``' work) and store figure crops (PDF) in the object store:
    ``figures/{document_id}/{version}/{page_index}-{n}.png`` (key on the figure block). Pages of PDF
    and image documents get the key of their page image (``page_images.page_image_key``), rendered
    later, off the path to publication (the ``page_images`` asset, or on first request).

    Crops are written before the page rows (one transaction); a failed parse writes nothing, and
    the images of earlier versions are removed once the new pages are committed. The source's local copy
    lives in ``options.scratch_dir`` (removed on every exit path; a killed run's by the next run).
    """
    existing = catalog.read_pages(doc.document_id)
    if existing and all(p["version"] == doc.version for p in existing) and current(doc, "parsed_pages", version):
        return {"pages": len(existing), "skipped": True, "mode": existing[0]["mode"]}
    suffix = PurePosixPath(doc.source_path).suffix
    name = PurePosixPath(doc.source_path).name
    with tempfile.TemporaryDirectory(dir=options.scratch_dir, prefix="parse-") as tmp:
        local = Path(tmp) / f"source{suffix.lower()}"
        local.write_bytes(store.get(doc.object_key))
        try:
            parsed = parse_document(local, name=name, options=options)
        except DocumentParseError as error:
            raise DocumentFailed(str(error)) from None
    if not parsed.pages or not any(page.text.strip() for page in parsed.pages):
        no_text = "; ".join(parsed.warnings[-3:]) or "empty document"
        raise DocumentFailed(f"{name}: no text found ({no_text})")
    pages, images = [], 0
    with_images = has_page_images(parsed.source_kind)
    for page in parsed.pages:
        image_key = page_image_key(doc.document_id, doc.version, page.page_index) if with_images else None
        blocks, figure = [], 0
        for block in page.blocks:
            record = {k: v for k, v in dataclasses.asdict(block).items() if v is not None and k != "image_png"}
            if block.kind == "figure" and block.image_png:
                figure += 1
                key = f"figures/{doc.document_id}/{doc.version}/{page.page_index}-{figure}.png"
                record["image_key"] = store.put(key, block.image_png)
                images += 1
            blocks.append(record)
        pages.append({
            "page_index": page.page_index, "page_label": page.label, "text": page.text, "blocks": blocks,
            "parser": page.parser, "mode": page.mode, "image_key": image_key,
            "width": page.width, "height": page.height,
        })
    title = parsed.title or name
    unchanged = title == doc.title and same_pages(existing, pages, doc.version)
    with catalog.connect() as conn:
        if not unchanged:
            catalog.replace_pages(conn, doc.document_id, doc.version, pages, run_id, version)
        catalog.update_document(conn, doc.document_id, title=title, mime=parsed.mime,
                                source_kind=parsed.source_kind, page_count=len(pages), last_run_id=run_id,
                                **made_again(doc))
        catalog.record_step(conn, doc.document_id, "parsed_pages", version,
                            invalidate=() if unchanged else after("parsed_pages"))
    for old_version in {p["version"] for p in existing} - {doc.version}:
        store.delete_prefix(f"pages/{doc.document_id}/{old_version}")
        store.delete_prefix(f"figures/{doc.document_id}/{old_version}")
    modes: dict[str, int] = {}
    for page in pages:
        modes[page["mode"]] = modes.get(page["mode"], 0) + 1
    return {"pages": len(pages), "skipped": False, "unchanged": unchanged, "mode": pages[0]["mode"], "modes": modes,
            "images": images, "warnings": parsed.warnings[:20]}


PAGE_FIELDS = ("page_index", "page_label", "text", "blocks", "parser", "mode", "image_key")


def same_pages(stored: list[dict], pages: list[dict], version: str) -> bool:
    """Whether freshly parsed pages equal the stored pages of the same file version (blocks compared as
    the JSON they are stored as)."""
    if len(stored) != len(pages) or any(p["version"] != version for p in stored):
        return False
    for old, new in zip(stored, pages):
        new = {**new, "blocks": json.loads(json.dumps(new["blocks"], ensure_ascii=False))}
        if any(old.get(name) != new.get(name) for name in PAGE_FIELDS):
            return False
    return True


# pageindex_trees -----------------------------------------------------------------------------
def build_pageindex(doc: Document, catalog: Catalog, run_id: str, store: ObjectStore | None = None,
                    summarizer: PageSummarizer | None = None, version: str = "1") -> dict:
    """The document's PageIndex tree, its page summaries/keywords and its table-of-contents pages.

    The tree comes from the PDF outline of the stored original (``store``) when it has one, else from
    a printed table of contents, headings or page groups. Summaries are cached by page-text hash; the
    optional ``summarizer`` is best-effort (its failure leaves rule-based summaries, never a failure).
    """
    nodes = catalog.read_nodes(doc.document_id)
    if nodes and all(n["version"] == doc.version for n in nodes) and current(doc, "pageindex_trees", version):
        return {"nodes": len(nodes), "skipped": True}
    pages = catalog.read_pages(doc.document_id)
    toc_before = catalog.toc_pages(doc.document_id)
    title = doc.title or doc.source_path
    summarizers = [RULES_SUMMARIZER] + ([summarizer.summarizer_id] if summarizer is not None else [])
    cached = catalog.cached_summaries([sha256_text(p["text"]) for p in pages], summarizers)
    summaries = summarize_document(pages, cached, title, summarizer)
    for page, summary in zip(pages, summaries.pages):
        page.update(summary=summary["summary"], keywords=summary["keywords"])
    tree = build_document_tree(title, pages, pdf_outline(doc, store))
    navigation = set(tree.navigation_pages)
    # chunks read the tree's titles and page ranges and the table-of-contents pages, not the summaries
    same_structure = navigation == toc_before and tree_shape(nodes, doc.version) == tree_shape(tree.nodes, doc.version)
    with catalog.connect() as conn:
        catalog.store_summaries(conn, summaries.new_cache)
        catalog.update_page_structure(conn, doc.document_id,
                                      [{**s, "is_toc": s["page_index"] in navigation} for s in summaries.pages])
        catalog.replace_nodes(conn, doc.document_id, doc.version, tree.nodes, run_id, version)
        catalog.record_step(conn, doc.document_id, "pageindex_trees", version,
                            invalidate=() if same_structure else after("pageindex_trees"))
    return {"nodes": len(tree.nodes), "depth": max(n["depth"] for n in tree.nodes), "source": tree.source,
            "toc_pages": len(navigation), "summaries_computed": sum(map(len, summaries.new_cache.values())),
            "warnings": summaries.warnings, "skipped": False, "unchanged": same_structure}


def tree_shape(nodes: list[dict], version: str) -> list[tuple] | None:
    """What chunking reads of a tree (None for a tree of another file version)."""
    if any(n.get("version", version) != version for n in nodes):
        return None
    return sorted((n["node_id"], n["parent_id"], n["ordinal"], n["title"], n["depth"], n["start_page"], n["end_page"])
                  for n in nodes)


def pdf_outline(doc: Document, store: ObjectStore | None) -> list[tuple[int, str, int]]:
    """The bookmarks of a stored PDF original ([] for other formats or when it cannot be read)."""
    if store is None or not doc.object_key or not doc.object_key.lower().endswith(".pdf"):
        return []
    try:
        return read_outline(store.get(doc.object_key))
    except OSError:
        return []


# chunks --------------------------------------------------------------------------------------
def build_chunks(doc: Document, catalog: Catalog, lake: Lake, model: EmbeddingModel, run_id: str,
                 version: str = "1", max_chunks: int | None = None,
                 contextualizer: EndpointContextualizer | None = None) -> dict:
    """Content-aware chunks of the document's pages (the rule-based fallback when that pass fails); a
    document of more than ``max_chunks`` chunks is refused (KB_MAX_CHUNKS_PER_DOCUMENT). The optional
    ``contextualizer`` adds a situating sentence to text chunks' embedding inputs (best-effort, cached).
    Chunks that come out the same as the stored ones are not rewritten (their vectors stay)."""
    stored = lake.read("chunks", doc.document_id)
    if stored.height and (stored["document_version"] == doc.version).all() and current(doc, "chunks", version):
        return {"chunks": stored.height, "skipped": True}
    pages = catalog.read_pages(doc.document_id)
    nodes = [n for n in catalog.read_nodes(doc.document_id) if n["version"] == doc.version]
    context = DocumentContext(
        document_id=doc.document_id, knowledge_base_id=doc.knowledge_base_id, version=doc.version,
        title=doc.title or doc.source_path, source_uri=doc.source_uri, source_kind=doc.source_kind or "",
        mime=doc.mime or "", run_id=run_id, pipeline_version=version,
    )
    try:
        frame, fallback = chunk_with_fallback(pages, context, model.count_tokens, model.max_tokens, nodes,
                                              catalog.toc_pages(doc.document_id), max_chunks)
    except OverBudget as error:
        raise DocumentFailed(f"{doc.source_path}: {error} chunks a document (KB_MAX_CHUNKS_PER_DOCUMENT): "
                             "split the file or raise the budget") from None
    except ValueError as error:
        raise DocumentFailed(f"{doc.source_path}: cannot chunk ({error})") from None
    if frame.is_empty():
        raise DocumentFailed(f"{doc.source_path}: no chunks (the document has no text)")
    if max_chunks is not None and frame.height > max_chunks:
        raise DocumentFailed(f"{doc.source_path}: {frame.height} chunks, over the budget of {max_chunks} chunks a "
                             "document (KB_MAX_CHUNKS_PER_DOCUMENT): split the file or raise the budget")
    contexts = None
    if contextualizer is not None:
        requests = context_requests(frame, {p["page_index"]: p["text"] for p in pages})
        cached = catalog.cached_chunk_contexts([r.sha for r in requests], contextualizer.contextualizer_id)
        contexts = add_chunk_contexts(frame, requests, cached, contextualizer, model.count_tokens, model.max_tokens,
                                      lambda sentences: store_chunk_contexts(catalog, contextualizer, sentences))
        frame = contexts.chunks
    unchanged = same_rows(stored, frame)
    if not unchanged:
        lake.write("chunks", doc.document_id, frame)
    with catalog.connect() as conn:
        # chunks left plain by a failing endpoint: a version that is never current, so the next run retries them
        made_by = partly_contextualized(version) if contexts is not None and contexts.left_plain else version
        catalog.record_step(conn, doc.document_id, "chunks", made_by, invalidate=() if unchanged else after("chunks"))
    result = {"chunks": frame.height, "skipped": False, "unchanged": unchanged, "fallback": fallback}
    if contexts is not None:
        result.update(contextualized=len(requests) - contexts.left_plain - contexts.too_long,
                      contexts_written=len(contexts.new_cache), warnings=contexts.warnings)
    return result


def store_chunk_contexts(catalog: Catalog, contextualizer: EndpointContextualizer, sentences: dict[str, str]) -> None:
    """Save situating sentences as they come, in a transaction of their own (a cache: safe to write before
    the chunks)."""
    with catalog.connect() as conn:
        catalog.store_chunk_contexts(conn, contextualizer.contextualizer_id, sentences)


def same_rows(stored: pl.DataFrame, fresh: pl.DataFrame, ignore: tuple[str, ...] = ("run_id", "pipeline_version")) -> bool:
    """Whether fresh lake rows equal the stored ones but for who made them."""
    if stored.height != fresh.height or not stored.height:
        return False
    return stored.drop(*ignore).equals(fresh.drop(*ignore))


# embeddings and milvus_collection: one step, in bounded slices --------------------------------
def embed_and_publish(docs: list[Document], catalog: Catalog, lake: Lake, model: EmbeddingModel, model_id: str,
                      run_id: str, slice_size: int, violations: Callable[[str], list],
                      target: tuple[MilvusClient, str] | None,
                      on_published: Callable[[Document], None] = lambda doc: None,
                      versions: tuple[str, str] = ("1", "1"),
                      also: tuple[str, EmbeddingModel] | None = None) -> tuple[dict[str, dict], dict[str, str]]:
    """Embed the documents' chunks in slices of ``slice_size`` (``encode_in_slices``: smallest documents
    first) and, as soon as a document has every vector, store them, check them (``violations``: the
    problems of its stored vectors) and publish it into ``target`` (client, collection; None: embed
    only; ``also``: a migration's published collection, see ``publish_document``).

    ``versions``: the ``embeddings`` ("encoding version:model") and ``milvus_collection`` step versions,
    recorded per document. A vector is reused while its input, the model, the dimension and the encoding
    version are unchanged; vectors that come out the same are not rewritten. Returns per-document stats
    and failures (each failed document is marked failed at the step it failed in); a failure to encode
    raises."""
    embedding_version, collection_version = versions
    encoding = embedding_version.split(":", 1)[0]
    by_id = {doc.document_id: doc for doc in docs}
    stored = {doc.document_id: lake.read("embeddings", doc.document_id) for doc in docs}
    plans = [plan_vectors(doc.document_id, lake.read("chunks", doc.document_id), stored[doc.document_id],
                          model_id, model.dimension, encoding) for doc in docs]
    results: dict[str, dict] = {}
    failures: dict[str, str] = {}

    def ready(plan: DocumentVectors) -> None:
        doc = by_id[plan.document_id]
        frame = vectors_frame(plan, model_id, model.dimension, run_id)
        previous = stored[doc.document_id]
        unchanged = plan.encoded == 0 and previous.height == frame.height and previous.equals(frame)
        step = f"embeddings@{embedding_version}"
        try:
            with catalog.document_lock(doc.document_id):
                if not unchanged:
                    lake.write("embeddings", doc.document_id, frame)
                found = violations(doc.document_id)
                if found:
                    lake.delete("embeddings", doc.document_id)
                    raise DocumentFailed(found[0].reason())
                with catalog.connect() as conn:
                    catalog.record_step(conn, doc.document_id, "embeddings", embedding_version,
                                        invalidate=() if unchanged else after("embeddings"))
                result = {"embedded": plan.encoded, "reused": frame.height - plan.encoded, "skipped": unchanged}
                if target is not None:
                    step = f"milvus_collection@{collection_version}"
                    if not unchanged:   # new vectors: the collection must take them
                        doc = dataclasses.replace(doc, step_versions={**(doc.step_versions or {}),
                                                                      "milvus_collection": ""})
                    published = publish_document(doc, catalog, lake, *target, run_id, collection_version, also)
                    result.update({k: v for k, v in published.items() if k != "skipped"},
                                  published_skipped=published["skipped"])
            results[doc.document_id] = result
            on_published(doc)
        except Exception as error:  # one document's failure is its own: the others go on
            reason = str(error) if isinstance(error, DocumentFailed) else \
                f"{doc.source_path}: unexpected {type(error).__name__}: {error}"
            failures[doc.document_id] = reason
            catalog.mark_failed(doc.document_id, reason, run_id, step)

    def checkpoint(plan: DocumentVectors) -> None:
        """A document still encoding keeps its vectors so far (a killed run resumes from here)."""
        lake.write("embeddings", plan.document_id, vectors_frame(plan, model_id, model.dimension, run_id, partial=True))

    encode_in_slices(plans, model.encode, slice_size, ready, checkpoint)
    return results, failures


# milvus_collection ---------------------------------------------------------------------------
def publish_document(doc: Document, catalog: Catalog, lake: Lake, client: MilvusClient, collection: str,
                     run_id: str, version: str = "1", also: tuple[str, EmbeddingModel] | None = None) -> dict:
    """Make the collection hold exactly this document's current chunks (only what changed is written),
    then record the version that serves, with its chunks' BM25 term counts (``kb_assets.lib.lexical``).

    ``also``: while a collection migration is due, the published collection of the previous embedding
    spec and its model: the document is written there too (what changed is encoded with that model), so
    it is neither missing nor stale on either side of the alias swap. The chunks' file version becomes
    the published version; the document is ``published`` when that is its current file version (a
    migration run re-publishes a failed document's last good version and leaves it failed).
    """
    if current(doc, "milvus_collection", version) and doc.status == "published" and \
            doc.published_version == doc.version and doc.term_count is not None:
        return {"written": 0, "deleted": 0, "kept": doc.chunk_count or 0, "entities": doc.chunk_count or 0,
                "skipped": True}
    chunks = lake.read("chunks", doc.document_id)
    if not chunks.height:
        raise DocumentFailed(f"{doc.source_path}: no chunk rows in the lake to publish")
    serving = chunks["document_version"][0]
    if serving not in (doc.version, doc.published_version):
        # chunks of neither the current file nor the version that serves (a migration cannot carry a
        # failed document's last good version): nothing to publish
        with catalog.connect() as conn:
            catalog.record_step(conn, doc.document_id, "milvus_collection", version)
        return {"written": 0, "deleted": 0, "kept": 0, "entities": 0, "skipped": True,
                "note": "its last good version is not in the lake: not carried over"}
    entities = chunk_entities(chunks, lake.read("embeddings", doc.document_id))
    counts = sync_document(client, collection, doc.document_id, entities)
    expect_entities(client, collection, doc, chunks.height)
    if also is not None:
        other, other_model = also
        inputs = dict(zip(chunks["chunk_id"].to_list(), chunks["embedding_input"].to_list()))
        written = sync_document(client, other, doc.document_id, [{k: v for k, v in e.items() if k != "dense"}
                                                                  for e in entities],
                                vectors=lambda todo: other_model.encode([inputs[e["chunk_id"]] for e in todo]))
        expect_entities(client, other, doc, chunks.height)
        counts["alsoWritten"] = written["written"]
    # durable before Postgres says so: Milvus Lite loses unflushed writes when it is killed, and a
    # document recorded as published is not written again (flush: 20-150 ms for 20-1,000 entities)
    flush(client, collection)
    if also is not None:
        flush(client, also[0])
    published = serving == doc.version
    counted = chunk_row_terms(chunks)
    with catalog.connect() as conn:
        catalog.replace_chunk_terms(conn, doc.document_id, counted)
        catalog.update_document(conn, doc.document_id, chunk_count=chunks.height, published_version=serving,
                                collection_name=also[0] if also else collection, last_run_id=run_id,
                                **({"status": "published", "error": None, "failed_step": None} if published else {}))
        catalog.record_step(conn, doc.document_id, "milvus_collection", version)
    return {**counts, "entities": chunks.height, "skipped": False, "terms_kept": len(counted)}


def expect_entities(client: MilvusClient, collection: str, doc: Document, chunks: int) -> None:
    in_milvus = count_entities(client, collection, document_filter(doc.document_id))
    if in_milvus != chunks:
        raise DocumentFailed(f"{doc.source_path}: {collection} holds {in_milvus} entities for {chunks} chunks")


def purge_document(doc: Document, catalog: Catalog, store: ObjectStore, lake: Lake, client: MilvusClient,
                   collections: list[str]) -> dict:
    """Remove a deleted document from Milvus, the lake and the object store; keep a tombstone row.
    Returns what was removed."""
    removed = {}
    for collection in collections:
        removed[collection] = count_entities(client, collection, document_filter(doc.document_id))
        delete_document(client, collection, doc.document_id)
    rows = lake.read("chunks", doc.document_id).height
    lake.delete("embeddings", doc.document_id)
    lake.delete("chunks", doc.document_id)
    shared = catalog.mark_deleted(doc.document_id, doc.object_key)
    if doc.object_key and not shared:
        store.delete(doc.object_key)
    store.delete_prefix(f"pages/{doc.document_id}")      # page images and figure crops of every version
    store.delete_prefix(f"figures/{doc.document_id}")
    return {"documentId": doc.document_id, "knowledgeBaseId": doc.knowledge_base_id, "sourcePath": doc.source_path,
            "sourceUri": doc.source_uri, "entitiesRemoved": removed, "chunkRowsRemoved": rows,
            "original": (f"kept (shared with another document): {doc.object_key}" if shared
                         else f"deleted {doc.object_key}") if doc.object_key else "none stored"}


def purge_documents(gone: list[Document], catalog: Catalog, store: ObjectStore, lake: Lake,
                    client: MilvusClient) -> list[dict]:
    """Purge documents whose files are gone from every collection, the lake and the object store."""
    if not gone:
        return []
    collections = [c["name"] for c in catalog.collections() if collection_exists(client, c["name"])]
    return [purge_document(doc, catalog, store, lake, client, collections) for doc in gone]


def publish_if_unpublished(client: MilvusClient, catalog: Catalog, alias: str, collection: str) -> str | None:
    """Publish the collection through the alias when nothing is published yet (first build).

    When the alias already serves this collection it stays; when it serves another one (a different
    embedding spec), publishing waits for ``kb-assets migrate``, which validates before it swaps.
    Returns the collection the alias now serves when that is ``collection``, else None.
    """
    current = published_collection(client, alias)
    if current not in (None, collection):
        return None
    if current is None:
        publish(client, alias, collection)
    with catalog.connect() as conn:
        catalog.set_collection_state(conn, collection, "published",
                                     entity_count=count_entities(client, collection))
    return collection
