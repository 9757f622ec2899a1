"""embeddings and milvus_collection: vectors encoded in bounded slices, stored in the lake and published as
Milvus entities of the configured spec's collection."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from pymilvus import MilvusClient

from kb_assets.embedding.model import EmbeddingModel
from kb_assets.embedding.vectors import DocumentVectors, encode_in_slices, plan_vectors, vectors_frame
from kb_assets.lib.lexical import chunk_row_terms
from kb_assets.pipeline.steps.common import DocumentFailed, current
from kb_assets.pipeline.versions import after
from kb_assets.stores.catalog import Catalog, Document
from kb_assets.stores.entities import chunk_entities, count_entities, document_filter, sync_document
from kb_assets.stores.lake import Lake
from kb_assets.stores.vectors import flush, publish, published_collection


# embeddings and milvus_collection: one step, in bounded slices --------------------------------
def embed_and_publish(
    docs: list[Document],
    catalog: Catalog,
    lake: Lake,
    model: EmbeddingModel,
    model_id: str,
    run_id: str,
    slice_size: int,
    violations: Callable[[str], list],
    target: tuple[MilvusClient, str] | None,
    on_published: Callable[[Document], None] = lambda doc: None,
    versions: tuple[str, str] = ("1", "1"),
    also: tuple[str, EmbeddingModel] | None = None,
) -> tuple[dict[str, dict], dict[str, str]]:
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
                    catalog.record_step(
                        conn,
                        doc.document_id,
                        "embeddings",
                        embedding_version,
                        invalidate=() if unchanged else after("embeddings"),
                    )
                result = {"embedded": plan.encoded, "reused": frame.height - plan.encoded, "skipped": unchanged}
                if target is not None:
                    step = f"milvus_collection@{collection_version}"
                    if not unchanged:  # new vectors: the collection must take them
                        doc = dataclasses.replace(
                            doc, step_versions={**(doc.step_versions or {}), "milvus_collection": ""}
                        )
                    published = publish_document(doc, catalog, lake, *target, run_id, collection_version, also)
                    result.update(
                        {k: v for k, v in published.items() if k != "skipped"}, published_skipped=published["skipped"]
                    )
            results[doc.document_id] = result
            on_published(doc)
        except Exception as error:  # one document's failure is its own: the others go on
            reason = (
                str(error)
                if isinstance(error, DocumentFailed)
                else f"{doc.source_path}: unexpected {type(error).__name__}: {error}"
            )
            failures[doc.document_id] = reason
            catalog.mark_failed(doc.document_id, reason, run_id, step)

    def checkpoint(plan: DocumentVectors) -> None:
        """A document still encoding keeps its vectors so far (a killed run resumes from here)."""
        lake.write("embeddings", plan.document_id, vectors_frame(plan, model_id, model.dimension, run_id, partial=True))

    encode_in_slices(plans, model.encode, slice_size, ready, checkpoint)
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
    also: tuple[str, EmbeddingModel] | None = None,
) -> dict:
    """Make the collection hold exactly this document's current chunks (only what changed is written),
    then record the version that serves, with its chunks' BM25 term counts (``kb_assets.lib.lexical``).

    ``also``: while a collection migration is due, the published collection of the previous embedding
    spec and its model: the document is written there too (what changed is encoded with that model), so
    it is neither missing nor stale on either side of the alias swap. The chunks' file version becomes
    the published version; the document is ``published`` when that is its current file version (a
    migration run re-publishes a failed document's last good version and leaves it failed).
    """
    if (
        current(doc, "milvus_collection", version)
        and doc.status == "published"
        and doc.published_version == doc.version
        and doc.term_count is not None
    ):
        return {
            "written": 0,
            "deleted": 0,
            "kept": doc.chunk_count or 0,
            "entities": doc.chunk_count or 0,
            "skipped": True,
        }
    chunks = lake.read("chunks", doc.document_id)
    if not chunks.height:
        raise DocumentFailed(f"{doc.source_path}: no chunk rows in the lake to publish")
    serving = chunks["document_version"][0]
    if serving not in (doc.version, doc.published_version):
        # chunks of neither the current file nor the version that serves (a migration cannot carry a
        # failed document's last good version): nothing to publish
        with catalog.connect() as conn:
            catalog.record_step(conn, doc.document_id, "milvus_collection", version)
        return {
            "written": 0,
            "deleted": 0,
            "kept": 0,
            "entities": 0,
            "skipped": True,
            "note": "its last good version is not in the lake: not carried over",
        }
    entities = chunk_entities(chunks, lake.read("embeddings", doc.document_id))
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
    # durable before Postgres says so: Milvus Lite loses unflushed writes when it is killed, and a
    # document recorded as published is not written again (flush: 20-150 ms for 20-1,000 entities)
    flush(client, collection)
    if also is not None:
        flush(client, also[0])
    published = serving == doc.version
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
    return {**counts, "entities": chunks.height, "skipped": False, "terms_kept": len(counted)}


def expect_entities(client: MilvusClient, collection: str, doc: Document, chunks: int) -> None:
    in_milvus = count_entities(client, collection, document_filter(doc.document_id))
    if in_milvus != chunks:
        raise DocumentFailed(f"{doc.source_path}: {collection} holds {in_milvus} entities for {chunks} chunks")


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
        catalog.set_collection_state(conn, collection, "published", entity_count=count_entities(client, collection))
    return collection
