"""Consistency of the stores, per document: Postgres rows vs lake rows vs Milvus entities.

Every entity of the published collection is counted against the published chunk rows: a document's
entities must all be of the version that serves (``published_version``, the one search returns) and as
many as its recorded chunks; entities of any other version (a half-written new version of a killed run,
a pending or failed one) are strays. A document whose newer file failed while its last good version
serves is a notice, not a problem. Its BM25 statistics must be kept for exactly the chunks that serve,
and each knowledge base's term counts must be those of its chunks'.

``verify`` reports; with ``repair`` it fixes what it can from the source of record and the lake: removes
strays, re-syncs a published document's entities and BM25 statistics from its lake rows (and counts a
knowledge base's terms again), removes entities and lake files of deleted or unknown documents. What
needs a re-run (missing lake rows) is reported, not guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pymilvus import MilvusClient

from kb_assets.embedding.model import EmbeddingModel
from kb_assets.embedding.vectors import vectors_for
from kb_assets.lib.json_types import JsonObject
from kb_assets.lib.lexical import chunk_row_terms
from kb_assets.stores.catalog import Catalog, Document
from kb_assets.stores.entities import (
    chunk_entities,
    count_entities,
    delete_document,
    delete_stale_versions,
    document_ids,
    sync_document,
    version_counts,
)
from kb_assets.stores.lake import Lake
from kb_assets.stores.vectors import collection_spec, flush, published_collection

if TYPE_CHECKING:
    import polars as pl


@dataclass(frozen=True)
class Problem:
    document_id: str | None  # None: a knowledge base's or the collection's
    problem: str
    repaired: bool = False

    def as_json(self) -> JsonObject:
        return {"documentId": self.document_id, "problem": self.problem, "repaired": self.repaired}


@dataclass(frozen=True)
class Notice:
    document_id: str | None
    notice: str

    def as_json(self) -> JsonObject:
        return {"documentId": self.document_id, "notice": self.notice}


@dataclass(frozen=True)
class VerifyReport:
    """What ``verify`` found (and repaired); ``run_id``: the ``repair_stores`` run that repaired it."""

    collection: str | None
    entities: int
    published_chunk_rows: int
    problems: list[Problem] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    run_id: str | None = None

    @property
    def consistent(self) -> bool:
        return not self.problems

    def as_json(self) -> JsonObject:
        return {
            "consistent": self.consistent,
            "collection": self.collection,
            "entities": self.entities,
            "publishedChunkRows": self.published_chunk_rows,
            "problems": [p.as_json() for p in self.problems],
            "notices": [n.as_json() for n in self.notices],
            **({"runId": self.run_id} if self.run_id else {}),
        }


def last_good_notice(doc: Document) -> str:
    """What ``docs``, ``verify`` and search say of a document whose newer file did not publish."""
    state = f"failed ({doc.error})" if doc.status == "failed" else doc.status
    return (
        f"{doc.source_path}: version {(doc.version or '')[:12]} is {state}; its last good version "
        f"{(doc.published_version or '')[:12]} serves"
    )


def verify(
    catalog: Catalog,
    lake: Lake,
    client: MilvusClient,
    alias: str,
    repair: bool = False,
    load_model: Callable[[str], EmbeddingModel] | None = None,
) -> VerifyReport:
    """Problems per document; ``repair`` fixes them (``load_model``: model id -> EmbeddingModel, used to
    re-encode chunks whose lake vectors are of another spec than the published collection's)."""
    problems: list[Problem] = []
    notices: list[Notice] = []

    def problem(document_id: str | None, text: str, repaired: bool = False) -> None:
        problems.append(Problem(document_id, text, repaired))

    def problem_with_statistics(doc: Document, chunks: pl.DataFrame) -> None:
        """BM25 statistics (``chunk_terms``) kept for exactly the chunks that serve; repaired from the lake."""
        chunk_ids = set(chunks["chunk_id"].to_list())
        kept = catalog.kept_term_chunks(doc.document_id)
        paged = kept == chunk_ids and catalog.kept_term_chunks(doc.document_id, with_pages=True) == chunk_ids
        if doc.term_count is not None and paged:
            return
        if repair:
            with catalog.connect() as conn:
                catalog.replace_chunk_terms(conn, doc.document_id, chunk_row_terms(chunks))
        if doc.term_count is None:
            text = "no BM25 statistics kept for what serves (search keeps Milvus's scores for it)"
        elif kept != chunk_ids:
            text = (
                f"BM25 statistics kept for {len(kept & chunk_ids)} of its "
                f"{len(chunk_ids)} chunks and {len(kept - chunk_ids)} others"
            )
        else:  # kept before page ranges were: pageindex searches its located pages in Milvus
            text = "BM25 statistics kept without the chunks' page ranges (located pages searched in Milvus)"
        problem(doc.document_id, text, repair)

    collection = published_collection(client, catalog, alias)
    documents = {d.document_id: d for d in catalog.list_documents()}
    published_rows = 0
    with lake.batch():  # what repair deletes from the lake: one file a table
        for doc in documents.values():
            chunks = lake.read("chunks", doc.document_id)
            vectors = lake.read("embeddings", doc.document_id)
            versions = version_counts(client, collection, doc.document_id) if collection else {}
            if doc.status == "deleted":
                entities = sum(versions.values())
                if entities or chunks.height or vectors.height:
                    if repair:
                        if collection is not None:  # nothing published: no entities, only lake rows to remove
                            delete_document(client, collection, doc.document_id)
                        lake.delete("chunks", doc.document_id)
                        lake.delete("embeddings", doc.document_id)
                    problem(
                        doc.document_id,
                        f"deleted document still has {entities} entities, {chunks.height} chunk "
                        f"rows, {vectors.height} vectors",
                        repair,
                    )
                continue
            serving = doc.published_version
            strays = {version: n for version, n in versions.items() if version != serving}
            if strays:
                if repair and collection is not None:  # (strays are entities of the collection)
                    delete_stale_versions(client, collection, doc.document_id, serving)
                problem(
                    doc.document_id,
                    f"{sum(strays.values())} stray entities of versions that do not serve ("
                    + ", ".join(f"{v[:12]}: {n}" for v, n in strays.items())
                    + f"; {doc.status})",
                    repair,
                )
            if not serving:
                continue
            published_rows += doc.chunk_count or 0
            entities = versions.get(serving, 0)
            if doc.serves_last_good_version:
                notices.append(Notice(doc.document_id, last_good_notice(doc)))
            if not chunks.height or not (chunks["document_version"] == serving).all():
                if collection and entities != doc.chunk_count:  # the lake holds another version: count only
                    problem(
                        doc.document_id,
                        f"{entities} entities of its published version for {doc.chunk_count} "
                        "recorded chunks, and the lake holds another version: re-ingest it",
                    )
                elif doc.status == "published":
                    problem(
                        doc.document_id, "published document has no chunk rows of its version in the lake: re-ingest it"
                    )
                continue
            problem_with_statistics(doc, chunks)
            if set(vectors["chunk_id"].to_list()) != set(chunks["chunk_id"].to_list()):
                problem(doc.document_id, f"{chunks.height} chunk rows but {vectors.height} vectors: re-ingest it")
                continue
            if collection is None:
                continue
            if doc.chunk_count != chunks.height or entities != chunks.height:
                repaired = False
                if repair and load_model is not None:
                    spec = collection_spec(client, collection)
                    model = load_model(spec["model"])
                    [(vectors, _)] = vectors_for([(chunks, vectors)], model, spec["model"], "repair")
                    sync_document(client, collection, doc.document_id, chunk_entities(chunks, vectors))
                    with catalog.connect() as conn:
                        catalog.update_document(
                            conn, doc.document_id, chunk_count=chunks.height, collection_name=collection
                        )
                    repaired = True
                problem(
                    doc.document_id,
                    f"{chunks.height} chunk rows, {entities} Milvus entities, {doc.chunk_count} recorded chunks",
                    repaired,
                )
        if collection:
            for document_id in sorted(document_ids(client, collection, excluding=list(documents))):
                if repair:
                    delete_document(client, collection, document_id)
                problem(document_id, "Milvus entities of a document Postgres does not know", repair)
        for table in ("chunks", "embeddings"):
            for document_id in lake.document_ids(table):
                if document_id not in documents:
                    if repair:
                        lake.delete(table, document_id)
                    problem(document_id, f"lake {table} of a document Postgres does not know", repair)
    for knowledge_base_id, differing in sorted(catalog.term_drift().items()):  # after the documents' repairs
        if repair:
            catalog.rebuild_terms(knowledge_base_id)
        text = f"BM25 term counts of knowledge base {knowledge_base_id}: {differing} differ from its chunks'"
        problem(None, text, repair)
    for table in ("chunks", "embeddings"):
        if repair:
            lake.compact(table, force=True)
        dead, rows = lake.dead_rows(table)
        if dead:  # not a problem: compaction removes them as runs write
            notices.append(Notice(None, f"lake {table}: {dead} of {rows} rows superseded or deleted"))
    total = 0
    if collection:
        if repair:
            flush(client, collection)
        total = count_entities(client, collection)
        if total != published_rows and not problems:  # a difference no document's problem explains
            problem(None, f"{total} entities in {collection} for {published_rows} published chunk rows")
    return VerifyReport(collection, total, published_rows, problems, notices)
