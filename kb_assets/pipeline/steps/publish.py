"""embeddings and milvus_collection: vectors encoded in bounded slices, stored in the lake and published as
Milvus entities of the configured spec's collection."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from pymilvus import MilvusClient

from kb_assets.embedding.model import EmbeddingModel
from kb_assets.embedding.vectors import DocumentVectors, encode_in_slices, plan_vectors, vectors_frame
from kb_assets.lib.lexical import chunk_row_terms
from kb_assets.pipeline.step_results import Embedded, Published, Serving, Target, Written
from kb_assets.pipeline.steps.common import DocumentFailed, current
from kb_assets.pipeline.versions import after
from kb_assets.stores.catalog import Catalog, Document
from kb_assets.stores.entities import (
    Entity,
    chunk_entities,
    count_entities,
    document_filter,
    entity_counts,
    sync_document,
    sync_documents,
    weighted_groups,
)
from kb_assets.stores.lake import Lake
from kb_assets.stores.vectors import flush, publish, published_collection

if TYPE_CHECKING:
    import polars as pl


# embeddings and milvus_collection: one step, in bounded slices --------------------------------
def embed_and_publish(
    docs: list[Document],
    catalog: Catalog,
    lake: Lake,
    model: EmbeddingModel,
    model_id: str,
    run_id: str,
    slice_size: int,
    violations: Callable[[list[str]], dict[str, str]],
    target: Target | None,
    on_published: Callable[[Document], None] = lambda doc: None,
    versions: tuple[str, str] = ("1", "1"),
    also: Serving | None = None,
) -> tuple[dict[str, Embedded], dict[str, str]]:
    """Embed the documents' chunks in slices of ``slice_size`` (``encode_in_slices``: smallest documents
    first) and, at the end of the slice in which a document got every vector, store the vectors of the
    slice's ready documents (one lake file), check them (``violations``: document id -> reason, of the
    problems of their stored vectors) and publish them into ``target`` (client, collection; None: embed
    only; ``also``: a migration's published collection, see ``publish_document``) with one flush.

    ``versions``: the ``embeddings`` ("encoding version:model") and ``milvus_collection`` step versions,
    recorded per document. A vector is reused while its input, the model, the dimension and the encoding
    version are unchanged; vectors that come out the same are not rewritten. Returns per-document stats
    and failures (each failed document is marked failed at the step it failed in); a failure to encode
    raises."""
    embedding_version, collection_version = versions
    encoding = embedding_version.split(":", 1)[0]
    by_id = {doc.document_id: doc for doc in docs}
    stored = {doc.document_id: lake.read("embeddings", doc.document_id) for doc in docs}
    plans = [
        plan_vectors(
            doc.document_id,
            lake.read("chunks", doc.document_id),
            stored[doc.document_id],
            model_id,
            model.dimension,
            encoding,
        )
        for doc in docs
    ]
    results: dict[str, Embedded] = {}
    failures: dict[str, str] = {}
    waiting: list[DocumentVectors] = []  # ready, published together at the end of their slice

    def fail(doc: Document, error: Exception, step: str) -> None:
        reason = (
            str(error)
            if isinstance(error, DocumentFailed)
            else f"{doc.source_path}: unexpected {type(error).__name__}: {error}"
        )
        failures[doc.document_id] = reason
        catalog.mark_failed(doc.document_id, reason, run_id, step)

    def publish_ready() -> None:
        """The documents that became ready in this slice, together: their vectors in one lake file, checked
        in one pass, recorded, then published with one Milvus flush."""
        plans, waiting[:] = list(waiting), []
        if not plans:
            return
        docs = [by_id[plan.document_id] for plan in plans]
        with catalog.documents_lock([doc.document_id for doc in docs]):
            unchanged = {}
            with lake.batch():
                for plan, doc in zip(plans, docs, strict=True):
                    frame = vectors_frame(plan, model_id, model.dimension, run_id)
                    previous = stored[doc.document_id]
                    same = plan.encoded == 0 and previous.height == frame.height and previous.equals(frame)
                    unchanged[doc.document_id] = same
                    if not same:
                        lake.write("embeddings", doc.document_id, frame)
            found = violations([doc.document_id for doc in docs])
            good = []
            with lake.batch():
                for plan, doc in zip(plans, docs, strict=True):
                    try:
                        if doc.document_id in found:
                            lake.delete("embeddings", doc.document_id)
                            raise DocumentFailed(found[doc.document_id])
                        with catalog.connect() as conn:
                            same = unchanged[doc.document_id]
                            invalidate = () if same else after("embeddings")
                            catalog.record_step(conn, doc.document_id, "embeddings", embedding_version, invalidate)
                        results[doc.document_id] = Embedded(
                            embedded=plan.encoded, reused=plan.chunks.height - plan.encoded, skipped=same
                        )
                        good.append(doc)
                    except Exception as error:  # one document's failure is its own: the others go on
                        fail(doc, error, f"embeddings@{embedding_version}")
            if target is None:
                return
            to_write = [  # new vectors: the collection must take them
                doc
                if unchanged[doc.document_id]
                else dataclasses.replace(doc, step_versions={**(doc.step_versions or {}), "milvus_collection": ""})
                for doc in good
            ]
            pending = []
            wrote = write_slice_entities(to_write, lake, *target, collection_version, also, dimension=model.dimension)
            for doc in to_write:
                written = wrote[doc.document_id]
                if isinstance(written, Exception):
                    results.pop(doc.document_id, None)
                    fail(doc, written, f"milvus_collection@{collection_version}")
                else:
                    pending.append((doc, written))
            # durable before Postgres says so: Milvus Lite loses unflushed writes when it is killed, and a
            # document recorded as published is not written again (one flush a slice: 20-150 ms each)
            if any(not written["skipped"] for _, written in pending):
                flush_written(target[0], target[1], also)
            for doc, written in pending:
                try:
                    published = record_published(doc, catalog, written, target[1], run_id, collection_version, also)
                    results[doc.document_id] = dataclasses.replace(results[doc.document_id], published=published)
                    on_published(doc)
                except Exception as error:
                    results.pop(doc.document_id, None)
                    fail(doc, error, f"milvus_collection@{collection_version}")

    def checkpoint(plan: DocumentVectors) -> None:
        """A document still encoding keeps its vectors so far (a killed run resumes from here)."""
        lake.write("embeddings", plan.document_id, vectors_frame(plan, model_id, model.dimension, run_id, partial=True))

    encode_in_slices(plans, model.encode, slice_size, waiting.append, checkpoint, publish_ready)
    return results, failures


# milvus_collection ---------------------------------------------------------------------------
def publish_document(
    doc: Document,
    catalog: Catalog,
    lake: Lake,
    client: MilvusClient,
    collection: str,
    run_id: str,
    version: str = "1",
    also: Serving | None = None,
) -> Published:
    """Make the collection hold exactly this document's current chunks (only what changed is written),
    then record the version that serves, with its chunks' BM25 term counts (``kb_assets.lib.lexical``).

    ``also``: while a collection migration is due, the published collection of the previous embedding
    spec and its model: the document is written there too (what changed is encoded with that model), so
    it is neither missing nor stale on either side of the alias swap. The chunks' file version becomes
    the published version; the document is ``published`` when that is its current file version (a
    migration run re-publishes a failed document's last good version and leaves it failed).
    ``embed_and_publish`` does the same for a slice of documents with one flush: ``write_entities``,
    ``flush``, ``record_published``.
    """
    written = write_entities(doc, lake, client, collection, version, also)
    if not written["skipped"]:
        flush_written(client, collection, also)
    return record_published(doc, catalog, written, collection, run_id, version, also)


def flush_written(client: MilvusClient, collection: str, also: Serving | None) -> None:
    """Make what ``write_entities`` wrote durable, in the collection and in a migration's published one."""
    flush(client, collection)
    if also is not None:
        flush(client, also[0])


def write_entities(
    doc: Document,
    lake: Lake,
    client: MilvusClient,
    collection: str,
    version: str = "1",
    also: Serving | None = None,
) -> Written:
    """The Milvus half of ``publish_document`` (not flushed): what it wrote, for ``record_published``."""
    ready = entities_to_write(doc, lake, version)
    if isinstance(ready, dict):
        return ready
    return sync_ready_entities(doc, *ready, client, collection, also)


def sync_ready_entities(
    doc: Document,
    chunks: pl.DataFrame,
    serving: str,
    entities: list[Entity],
    client: MilvusClient,
    collection: str,
    also: Serving | None = None,
) -> Written:
    """``write_entities`` once ``entities_to_write`` has read what to write."""
    counts = sync_document(client, collection, doc.document_id, entities)
    expect_entities(client, collection, doc, chunks.height)
    if also is not None:
        other, other_model = also
        inputs = dict(zip(chunks["chunk_id"].to_list(), chunks["embedding_input"].to_list(), strict=False))
        written = sync_document(
            client,
            other,
            doc.document_id,
            [{k: v for k, v in e.items() if k != "dense"} for e in entities],
            vectors=lambda todo: other_model.encode([inputs[e["chunk_id"]] for e in todo]),
        )
        expect_entities(client, other, doc, chunks.height)
        counts["alsoWritten"] = written["written"]
    return {"skipped": False, "chunks": chunks, "serving": serving, "counts": counts}


def entities_to_write(
    doc: Document, lake: Lake, version: str, dimension: int | None = None
) -> Written | tuple[pl.DataFrame, str, list[Entity]]:
    """What ``write_entities`` writes for the document: (its chunk rows, the version they are of, its
    entities), or, when there is nothing to write, what ``write_entities`` returns for it; vectors not of
    ``dimension`` (the collection's) fail the document before anything is written."""
    if (
        current(doc, "milvus_collection", version)
        and doc.status == "published"
        and doc.published_version == doc.version
        and doc.term_count is not None
    ):
        kept = doc.chunk_count or 0
        return {"skipped": True, "counts": {"written": 0, "deleted": 0, "kept": kept, "entities": kept}}
    chunks = lake.read("chunks", doc.document_id)
    if not chunks.height:
        raise DocumentFailed(f"{doc.source_path}: no chunk rows in the lake to publish")
    serving = chunks["document_version"][0]
    if serving not in (doc.version, doc.published_version):
        # chunks of neither the current file nor the version that serves (a migration cannot carry a
        # failed document's last good version): nothing to publish
        note = "its last good version is not in the lake: not carried over"
        return {
            "skipped": True,
            "record": True,
            "counts": {"written": 0, "deleted": 0, "kept": 0, "entities": 0, "note": note},
        }
    try:
        entities = chunk_entities(chunks, lake.read("embeddings", doc.document_id), dimension)
    except ValueError as error:
        raise DocumentFailed(f"{doc.source_path}: {error}") from None
    return chunks, serving, entities


def write_slice_entities(
    docs: list[Document],
    lake: Lake,
    client: MilvusClient,
    collection: str,
    version: str = "1",
    also: Serving | None = None,
    group_entities: int = 2000,
    dimension: int | None = None,
) -> dict[str, Written | Exception]:
    """``write_entities`` for a slice's documents, by document id (what it wrote, or why it failed).

    Small documents share their Milvus calls: up to ``group_entities`` entities (new or stored) of several
    documents are read, written and counted together (``sync_documents``, ``entity_counts``), so a note
    costs a share of a few calls instead of four of its own, and no call a document passes over the whole
    collection. A document alone in its group, a migration's (written to two collections), and the
    documents of a group whose shared call failed are written one by one: a document's failure stays its own.
    """
    outcome: dict[str, Written | Exception] = {}
    weighed: list[tuple[tuple[Document, pl.DataFrame, str, list[Entity]], int]] = []
    for doc in docs:
        try:
            ready = entities_to_write(doc, lake, version, dimension)
        except Exception as error:
            outcome[doc.document_id] = error
            continue
        if isinstance(ready, dict):
            outcome[doc.document_id] = ready
            continue
        weighed.append(((doc, *ready), max(ready[0].height, doc.chunk_count or 0)))
    for group in weighted_groups(weighed, group_entities):
        if len(group) > 1 and also is None:
            try:
                counts = sync_documents(client, collection, {doc.document_id: rows for doc, _, _, rows in group})
                ids = [doc.document_id for doc, *_ in group]
                held = entity_counts(client, collection, ids, limit=2 * group_entities + 1)
            except Exception:  # one document's bad entity fails the shared call: find it one by one
                pass
            else:
                for doc, chunks, serving, _ in group:
                    outcome[doc.document_id] = (
                        {"skipped": False, "chunks": chunks, "serving": serving, "counts": counts[doc.document_id]}
                        if held[doc.document_id] == chunks.height
                        else DocumentFailed(entities_mismatch(doc, collection, held[doc.document_id], chunks.height))
                    )
                continue
        for doc, chunks, serving, rows in group:
            try:
                outcome[doc.document_id] = sync_ready_entities(doc, chunks, serving, rows, client, collection, also)
            except Exception as error:
                outcome[doc.document_id] = error
    return outcome


def record_published(
    doc: Document,
    catalog: Catalog,
    written: Written,
    collection: str,
    run_id: str,
    version: str = "1",
    also: Serving | None = None,
) -> Published:
    """The Postgres half of ``publish_document``, once the entities ``write_entities`` wrote are flushed."""
    if written["skipped"]:
        if written.get("record"):
            with catalog.connect() as conn:
                catalog.record_step(conn, doc.document_id, "milvus_collection", version)
        return Published.of(written["counts"], skipped=True)
    chunks, serving = written["chunks"], written["serving"]
    published = serving == doc.version
    counts = written["counts"]
    wrote = counts["written"] + counts["deleted"] + counts.get("alsoWritten", 0) > 0  # lineage credits this run
    counted = chunk_row_terms(chunks)
    with catalog.connect() as conn:
        catalog.replace_chunk_terms(conn, doc.document_id, counted)
        catalog.update_document(
            conn,
            doc.document_id,
            chunk_count=chunks.height,
            published_version=serving,
            collection_name=also[0] if also else collection,
            last_run_id=run_id,
            **({"published_run_id": run_id} if wrote else {}),
            **({"status": "published", "error": None, "failed_step": None} if published else {}),
        )
        catalog.record_step(conn, doc.document_id, "milvus_collection", version)
    return Published.of(written["counts"], skipped=False, entities=chunks.height, terms_kept=len(counted))


def expect_entities(client: MilvusClient, collection: str, doc: Document, chunks: int) -> None:
    in_milvus = count_entities(client, collection, document_filter(doc.document_id))
    if in_milvus != chunks:
        raise DocumentFailed(entities_mismatch(doc, collection, in_milvus, chunks))


def entities_mismatch(doc: Document, collection: str, in_milvus: int, chunks: int) -> str:
    return f"{doc.source_path}: {collection} holds {in_milvus} entities for {chunks} chunks"


def publish_if_unpublished(client: MilvusClient, catalog: Catalog, alias: str, collection: str) -> str | None:
    """Publish the collection through the alias when nothing is published yet (first build).

    When the alias already serves this collection it stays; when it serves another one (a different
    embedding spec), publishing waits for ``kb-assets migrate``, which validates before it swaps.
    Returns the collection the alias now serves when that is ``collection``, else None.
    """
    current = published_collection(client, catalog, alias)
    if current not in (None, collection):
        return None
    if current is None:
        publish(client, catalog, alias, collection)
    with catalog.connect() as conn:
        catalog.set_collection_state(conn, collection, "published", entity_count=count_entities(client, collection))
    return collection
