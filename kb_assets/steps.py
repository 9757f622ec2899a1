"""The work of each asset for one document, as plain functions over the stores.

Each step is idempotent and skips a document whose output is already current for its version, so a
re-materialization of unchanged content costs nothing. A step that cannot handle a document raises
:class:`DocumentFailed` with the reason; the asset marks that document failed and goes on.
"""

from __future__ import annotations

import dataclasses
import mimetypes
import tempfile
from pathlib import Path, PurePosixPath
from typing import Callable

from pymilvus import MilvusClient

from kb_assets.chunking.chunker import DocumentContext, OverBudget, chunk_with_fallback
from kb_assets.embedding.model import EmbeddingModel
from kb_assets.embedding.vectors import DocumentVectors, encode_in_slices, plan_vectors, vectors_frame
from kb_assets.page_images import has_page_images, page_image_key
from kb_assets.parsing import DocumentParseError, ParseOptions, parse_document
from kb_assets.planning import sha256_bytes
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
    publish,
    published_collection,
    sync_document,
)
from kb_assets.structure.outline import read_outline
from kb_assets.structure.pageindex import build_document_tree
from kb_assets.structure.summaries import (
    RULES_SUMMARIZER,
    PageSummarizer,
    summarize_document,
)
from kb_assets.text import sha256_text


class DocumentFailed(Exception):
    """One document cannot go on; the message says why (shown to users as the document's error)."""


# raw_files -----------------------------------------------------------------------------------
def store_raw_file(doc: Document, catalog: Catalog, store: ObjectStore, max_bytes: int, run_id: str,
                   source_options: dict | None = None) -> dict:
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
    version = sha256_bytes(data)
    suffix = PurePosixPath(doc.source_path).suffix
    key = store.put(ObjectStore.original_key(version, suffix), data)
    mime = mimetypes.guess_type(doc.source_path)[0] or "application/octet-stream"
    with catalog.connect() as conn:
        catalog.update_document(conn, doc.document_id, version=version, object_key=key, size_bytes=len(data),
                                mime=mime, last_run_id=run_id)
    return {"version": version, "bytes": len(data), "skipped": False}


# parsed_pages --------------------------------------------------------------------------------
def parse_pages(doc: Document, catalog: Catalog, store: ObjectStore, options: ParseOptions, run_id: str) -> dict:
    """Parse the stored original into page records (text, blocks, parser, mode, label; summaries and
    keywords are ``pageindex_trees``' work) and store figure crops (PDF) in the object store:
    ``figures/{document_id}/{version}/{page_index}-{n}.png`` (key on the figure block). Pages of PDF
    and image documents get the key of their page image (``page_images.page_image_key``), rendered
    later, off the path to publication (the ``page_images`` asset, or on first request).

    Crops are written before the page rows (one transaction); a failed parse writes nothing, and
    the images of earlier versions are removed once the new pages are committed.
    """
    existing = catalog.read_pages(doc.document_id)
    if existing and all(p["version"] == doc.version for p in existing):
        return {"pages": len(existing), "skipped": True, "mode": existing[0]["mode"]}
    suffix = PurePosixPath(doc.source_path).suffix
    name = PurePosixPath(doc.source_path).name
    with tempfile.TemporaryDirectory() as tmp:
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
    with catalog.connect() as conn:
        catalog.replace_pages(conn, doc.document_id, doc.version, pages, run_id)
        catalog.update_document(conn, doc.document_id, title=parsed.title or name, mime=parsed.mime,
                                source_kind=parsed.source_kind, page_count=len(pages), last_run_id=run_id)
    for old_version in {p["version"] for p in existing} - {doc.version}:
        store.delete_prefix(f"pages/{doc.document_id}/{old_version}")
        store.delete_prefix(f"figures/{doc.document_id}/{old_version}")
    modes: dict[str, int] = {}
    for page in pages:
        modes[page["mode"]] = modes.get(page["mode"], 0) + 1
    return {"pages": len(pages), "skipped": False, "mode": pages[0]["mode"], "modes": modes,
            "images": images, "warnings": parsed.warnings[:20]}


# pageindex_trees -----------------------------------------------------------------------------
def build_pageindex(doc: Document, catalog: Catalog, run_id: str, store: ObjectStore | None = None,
                    summarizer: PageSummarizer | None = None) -> dict:
    """The document's PageIndex tree, its page summaries/keywords and its table-of-contents pages.

    The tree comes from the PDF outline of the stored original (``store``) when it has one, else from
    a printed table of contents, headings or page groups. Summaries are cached by page-text hash; the
    optional ``summarizer`` is best-effort (its failure leaves rule-based summaries, never a failure).
    """
    nodes = catalog.read_nodes(doc.document_id)
    if nodes and all(n["version"] == doc.version for n in nodes):
        return {"nodes": len(nodes), "skipped": True}
    pages = catalog.read_pages(doc.document_id)
    title = doc.title or doc.source_path
    summarizers = [RULES_SUMMARIZER] + ([summarizer.summarizer_id] if summarizer is not None else [])
    cached = catalog.cached_summaries([sha256_text(p["text"]) for p in pages], summarizers)
    summaries = summarize_document(pages, cached, title, summarizer)
    for page, summary in zip(pages, summaries.pages):
        page.update(summary=summary["summary"], keywords=summary["keywords"])
    tree = build_document_tree(title, pages, pdf_outline(doc, store))
    navigation = set(tree.navigation_pages)
    with catalog.connect() as conn:
        catalog.store_summaries(conn, summaries.new_cache)
        catalog.update_page_structure(conn, doc.document_id,
                                      [{**s, "is_toc": s["page_index"] in navigation} for s in summaries.pages])
        catalog.replace_nodes(conn, doc.document_id, doc.version, tree.nodes, run_id)
    return {"nodes": len(tree.nodes), "depth": max(n["depth"] for n in tree.nodes), "source": tree.source,
            "toc_pages": len(navigation), "summaries_computed": sum(map(len, summaries.new_cache.values())),
            "warnings": summaries.warnings, "skipped": False}


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
                 max_chunks: int | None = None) -> dict:
    """Content-aware chunks of the document's pages (the rule-based fallback when that pass fails); a
    document of more than ``max_chunks`` chunks is refused (KB_MAX_CHUNKS_PER_DOCUMENT)."""
    current = lake.read("chunks", doc.document_id)
    if current.height and (current["document_version"] == doc.version).all():
        return {"chunks": current.height, "skipped": True}
    pages = catalog.read_pages(doc.document_id)
    nodes = [n for n in catalog.read_nodes(doc.document_id) if n["version"] == doc.version]
    context = DocumentContext(
        document_id=doc.document_id, knowledge_base_id=doc.knowledge_base_id, version=doc.version,
        title=doc.title or doc.source_path, source_uri=doc.source_uri, source_kind=doc.source_kind or "",
        mime=doc.mime or "", run_id=run_id,
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
    lake.write("chunks", doc.document_id, frame)
    return {"chunks": frame.height, "skipped": False, "fallback": fallback}


# embeddings and milvus_collection: one step, in bounded slices --------------------------------
def embed_and_publish(docs: list[Document], catalog: Catalog, lake: Lake, model: EmbeddingModel, model_id: str,
                      run_id: str, slice_size: int, violations: Callable[[str], list],
                      target: tuple[MilvusClient, str] | None,
                      on_published: Callable[[Document], None] = lambda doc: None) -> tuple[dict[str, dict], dict[str, str]]:
    """Embed the documents' chunks in slices of ``slice_size`` (``encode_in_slices``: smallest documents
    first) and, as soon as a document has every vector, store them, check them (``violations``: the
    problems of its stored vectors) and publish it into ``target`` (client, collection; None: embed
    only). A vector is reused while its input is unchanged. Returns per-document stats and failures
    (each failed document is marked failed); a failure to encode raises."""
    by_id = {doc.document_id: doc for doc in docs}
    stored = {doc.document_id: lake.read("embeddings", doc.document_id) for doc in docs}
    plans = [plan_vectors(doc.document_id, lake.read("chunks", doc.document_id), stored[doc.document_id],
                          model_id, model.dimension) for doc in docs]
    results: dict[str, dict] = {}
    failures: dict[str, str] = {}

    def ready(plan: DocumentVectors) -> None:
        doc = by_id[plan.document_id]
        frame = vectors_frame(plan, model_id, model.dimension, run_id)
        previous = stored[doc.document_id]
        unchanged = plan.encoded == 0 and previous["chunk_id"].to_list() == frame["chunk_id"].to_list() \
            and (previous["model"] == model_id).all()
        try:
            with catalog.document_lock(doc.document_id):
                if not unchanged:
                    lake.write("embeddings", doc.document_id, frame)
                found = violations(doc.document_id)
                if found:
                    lake.delete("embeddings", doc.document_id)
                    raise DocumentFailed(found[0].reason())
                result = {"embedded": plan.encoded, "reused": frame.height - plan.encoded, "skipped": unchanged}
                if target is not None:
                    result.update(publish_document(doc, catalog, lake, *target, run_id))
            results[doc.document_id] = result
            on_published(doc)
        except Exception as error:  # one document's failure is its own: the others go on
            reason = str(error) if isinstance(error, DocumentFailed) else \
                f"{doc.source_path}: unexpected {type(error).__name__}: {error}"
            failures[doc.document_id] = reason
            catalog.mark_failed(doc.document_id, reason, run_id)

    def checkpoint(plan: DocumentVectors) -> None:
        """A document still encoding keeps its vectors so far (a killed run resumes from here)."""
        lake.write("embeddings", plan.document_id, vectors_frame(plan, model_id, model.dimension, run_id, partial=True))

    encode_in_slices(plans, model.encode, slice_size, ready, checkpoint)
    return results, failures


# milvus_collection ---------------------------------------------------------------------------
def publish_document(doc: Document, catalog: Catalog, lake: Lake, client: MilvusClient, collection: str,
                     run_id: str) -> dict:
    """Make the collection hold exactly this document's current chunks, then mark it published."""
    chunks = lake.read("chunks", doc.document_id)
    embeddings = lake.read("embeddings", doc.document_id)
    counts = sync_document(client, collection, doc.document_id, chunk_entities(chunks, embeddings))
    in_milvus = count_entities(client, collection, document_filter(doc.document_id))
    if in_milvus != chunks.height:
        raise DocumentFailed(f"{doc.source_path}: Milvus holds {in_milvus} entities for {chunks.height} chunks")
    with catalog.connect() as conn:
        catalog.update_document(conn, doc.document_id, status="published", error=None,
                                chunk_count=chunks.height, published_version=doc.version,
                                collection_name=collection, last_run_id=run_id)
    return {**counts, "entities": in_milvus}


def purge_document(doc: Document, catalog: Catalog, store: ObjectStore, lake: Lake, client: MilvusClient,
                   collections: list[str]) -> None:
    """Remove a deleted document from Milvus, the lake and the object store; keep a tombstone row."""
    for collection in collections:
        delete_document(client, collection, doc.document_id)
    lake.delete("embeddings", doc.document_id)
    lake.delete("chunks", doc.document_id)
    shared = catalog.mark_deleted(doc.document_id, doc.object_key)
    if doc.object_key and not shared:
        store.delete(doc.object_key)
    store.delete_prefix(f"pages/{doc.document_id}")      # page images and figure crops of every version
    store.delete_prefix(f"figures/{doc.document_id}")



def purge_documents(gone: list[Document], stores) -> list[str]:
    """Purge documents whose files are gone from every collection, the lake and the object store."""
    if not gone:
        return []
    client = stores.milvus
    collections = [c["name"] for c in stores.catalog.collections() if collection_exists(client, c["name"])]
    for doc in gone:
        purge_document(doc, stores.catalog, stores.objects, stores.lake, client, collections)
    return [doc.document_id for doc in gone]


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
