"""The blocking data-quality checks of the six assets (great-expectations expectations).

Each check validates the rows its asset wrote for the run's documents (a document a step skipped as
current was checked when it was written: a run with nothing written pays no great-expectations import
and no validation, the check passes with 0 documents checked). Documents whose rows break an
expectation are quarantined (status ``failed`` with the expectation as reason) and the check reports
WARN; when no document of the batch passes, it reports ERROR, which blocks everything downstream.
"""

from __future__ import annotations

import dagster as dg
import polars as pl
from pymilvus import MilvusClient

from kb_assets.chunking.chunker import CHUNK_KINDS
from kb_assets.defs.quality import Violation, failed_documents, validate
from kb_assets.embedding.model import EmbeddingModel
from kb_assets.pipeline.lineage import chunk_found_in_pages
from kb_assets.stores.catalog import Catalog
from kb_assets.stores.entities import delete_document, grouped_entity_counts
from kb_assets.stores.lake import Lake
from kb_assets.stores.objects import ObjectStore


def _expectations():
    """great-expectations takes seconds to import: only checks that run pay for it."""
    import great_expectations.expectations as gxe

    return gxe


def result(
    check_name: str,
    catalog: Catalog,
    document_ids: list[str],
    violations: list[Violation],
    run_id: str,
    step: str | None = None,
    asset_key: str | None = None,
    **metadata,
) -> dg.AssetCheckResult:
    """Quarantine the violating documents (failed at ``step``, "asset@version") and turn the violations
    into a check result (``asset_key``: which asset of a multi-asset step it checks)."""
    failed = failed_documents(violations)
    for document_id, reason in failed.items():
        catalog.mark_failed(document_id, reason, run_id, step)
    severity = (
        dg.AssetCheckSeverity.ERROR if document_ids and len(failed) == len(document_ids) else dg.AssetCheckSeverity.WARN
    )
    return dg.AssetCheckResult(
        check_name=check_name,
        asset_key=asset_key,
        passed=not violations,
        severity=severity,
        metadata={
            "documents_checked": len(document_ids),
            "documents_quarantined": len(failed),
            "violations": dg.MetadataValue.json([v.__dict__ for v in violations]) if violations else "none",
            **metadata,
        },
    )


def check_raw_files(
    catalog: Catalog, store: ObjectStore, document_ids: list[str], run_id: str, step: str | None = None
):
    if not document_ids:
        return result("original_stored", catalog, [], [], run_id, step)
    gxe = _expectations()
    docs = catalog.get_documents(document_ids).values()
    frame = pl.DataFrame(
        {
            "document_id": [d.document_id for d in docs],
            "version": [d.version for d in docs],
            "size_bytes": [d.size_bytes for d in docs],
            "stored": [bool(d.object_key and store.exists(d.object_key)) for d in docs],
        },
        schema={"document_id": pl.String, "version": pl.String, "size_bytes": pl.Int64, "stored": pl.Boolean},
    )
    violations = validate(
        frame,
        [
            gxe.ExpectColumnValuesToMatchRegex(column="version", regex=r"^[0-9a-f]{64}$"),
            gxe.ExpectColumnValuesToBeBetween(column="size_bytes", min_value=1),
            gxe.ExpectColumnValuesToBeInSet(column="stored", value_set=[True]),
        ],
    )
    return result("original_stored", catalog, document_ids, violations, run_id, step)


def check_pages(catalog: Catalog, document_ids: list[str], run_id: str, step: str | None = None):
    if not document_ids:
        return result("pages_complete", catalog, [], [], run_id, step)
    gxe = _expectations()
    rows = []
    for document_id in document_ids:
        for rank, page in enumerate(catalog.read_pages(document_id)):
            rows.append(
                {
                    "document_id": document_id,
                    "page_index_gap": page["page_index"] - rank,
                    "parser": page["parser"],
                    "mode": page["mode"],
                    "text_chars": len(page["text"]),
                }
            )
    frame = pl.DataFrame(
        rows,
        schema={
            "document_id": pl.String,
            "page_index_gap": pl.Int64,
            "parser": pl.String,
            "mode": pl.String,
            "text_chars": pl.Int64,
        },
    )
    violations = validate(
        frame,
        [
            gxe.ExpectColumnValuesToBeBetween(column="page_index_gap", min_value=0, max_value=0),
            gxe.ExpectColumnValuesToNotBeNull(column="parser"),
            gxe.ExpectColumnValuesToNotBeNull(column="mode"),
        ],
    )
    return result("pages_complete", catalog, document_ids, violations, run_id, step, pages=frame.height)


def check_trees(catalog: Catalog, document_ids: list[str], run_id: str, step: str | None = None):
    """One root per tree, every parent in the tree, every node within the document's pages."""
    if not document_ids:
        return result("tree_within_pages", catalog, [], [], run_id, step)
    gxe = _expectations()
    docs = catalog.get_documents(document_ids)
    rows = []
    for document_id in document_ids:
        last_page = (docs[document_id].page_count or 1) - 1
        nodes = catalog.read_nodes(document_id)
        ids = {n["node_id"] for n in nodes}
        roots = sum(1 for n in nodes if n["parent_id"] is None)
        for node in nodes:
            rows.append(
                {
                    "document_id": document_id,
                    "depth": node["depth"],
                    "span": node["end_page"] - node["start_page"],
                    "pages_past_end": node["end_page"] - last_page,
                    "start_page": node["start_page"],
                    "roots": roots,
                    "parent_known": node["parent_id"] is None or node["parent_id"] in ids,
                }
            )
    frame = pl.DataFrame(
        rows,
        schema={
            "document_id": pl.String,
            "depth": pl.Int64,
            "span": pl.Int64,
            "pages_past_end": pl.Int64,
            "start_page": pl.Int64,
            "roots": pl.Int64,
            "parent_known": pl.Boolean,
        },
    )
    violations = validate(
        frame,
        [
            gxe.ExpectColumnValuesToBeBetween(column="depth", min_value=0),
            gxe.ExpectColumnValuesToBeBetween(column="span", min_value=0),
            gxe.ExpectColumnValuesToBeBetween(column="pages_past_end", max_value=0),
            gxe.ExpectColumnValuesToBeBetween(column="start_page", min_value=0),
            gxe.ExpectColumnValuesToBeBetween(column="roots", min_value=1, max_value=1),
            gxe.ExpectColumnValuesToBeInSet(column="parent_known", value_set=[True]),
        ],
    )
    return result("tree_within_pages", catalog, document_ids, violations, run_id, step, nodes=frame.height)


def check_chunks(
    catalog: Catalog, lake: Lake, document_ids: list[str], model: EmbeddingModel, run_id: str, step: str | None = None
):
    """Unique ids; content found in its pages (lineage); embedding input within the model window;
    table chunks start with the header they repeat; known kinds."""
    if not document_ids:
        return result("chunks_traceable", catalog, [], [], run_id, step)
    gxe = _expectations()
    frames = []
    for document_id in document_ids:
        chunks = lake.read("chunks", document_id)
        page_texts = {p["page_index"]: p["text"] for p in catalog.read_pages(document_id)}
        found = [chunk_found_in_pages(c, page_texts) for c in chunks.iter_rows(named=True)]
        tokens = model.count_tokens(chunks["embedding_input"].to_list()) if chunks.height else []
        frames.append(
            chunks.select("chunk_id", "document_id", "page_index", "page_end", "content", "kind", "table_header")
            .with_columns(
                found_in_page=pl.Series(found, dtype=pl.Boolean),
                window_overflow=pl.Series(tokens, dtype=pl.Int64) - model.max_tokens,
                page_span=pl.col("page_end") - pl.col("page_index"),
                content_chars=pl.col("content").str.len_chars(),
                header_in_front=pl.col("table_header").is_null()
                | pl.col("content").str.starts_with(pl.col("table_header").fill_null("")),
            )
            .drop("content", "table_header")
        )
    frame = pl.concat(frames) if frames else pl.DataFrame()
    violations = validate(
        frame,
        [
            gxe.ExpectColumnValuesToBeUnique(column="chunk_id"),
            gxe.ExpectColumnValuesToBeInSet(column="found_in_page", value_set=[True]),
            gxe.ExpectColumnValuesToBeBetween(column="window_overflow", max_value=0),
            gxe.ExpectColumnValuesToBeBetween(column="page_span", min_value=0),
            gxe.ExpectColumnValuesToBeBetween(column="content_chars", min_value=1),
            gxe.ExpectColumnValuesToBeInSet(column="header_in_front", value_set=[True]),
            gxe.ExpectColumnValuesToBeInSet(column="kind", value_set=list(CHUNK_KINDS)),
        ],
    )
    for document_id in failed_documents(violations):
        lake.delete("chunks", document_id)
    return result("chunks_traceable", catalog, document_ids, violations, run_id, step, chunks=frame.height)


def embedding_violations(lake: Lake, document_ids: list[str], dimension: int) -> list[Violation]:
    """The ``vectors_valid`` expectations on documents' embedding rows: the model's dimension, unit norm,
    one vector per chunk and none for an unknown chunk. Run on a slice's documents before they are published."""
    gxe = _expectations()
    frames, violations = [], []
    for document_id in document_ids:
        vectors = lake.read("embeddings", document_id)
        chunk_ids = set(lake.read("chunks", document_id)["chunk_id"].to_list())
        if vectors.is_empty():
            if chunk_ids:
                violations.append(Violation("expect_vectors_for_every_chunk", "vector", (document_id,)))
            continue
        frames.append(
            vectors.select(
                "document_id",
                pl.col("vector").list.len().alias("vector_dimension"),
                pl.col("vector").list.eval(pl.element() ** 2).list.sum().sqrt().alias("norm"),
                pl.col("chunk_id").is_in(list(chunk_ids)).alias("has_chunk"),
            ).with_columns(covers_chunks=pl.lit(vectors.height == len(chunk_ids)))
        )
    if not frames:
        return violations
    return violations + validate(
        pl.concat(frames),
        [
            gxe.ExpectColumnValuesToBeInSet(column="vector_dimension", value_set=[dimension]),
            gxe.ExpectColumnValuesToBeBetween(column="norm", min_value=0.98, max_value=1.02),
            gxe.ExpectColumnValuesToBeInSet(column="has_chunk", value_set=[True]),
            gxe.ExpectColumnValuesToBeInSet(column="covers_chunks", value_set=[True]),
        ],
    )


def check_embeddings(
    catalog: Catalog, document_ids: list[str], violations: list[Violation], run_id: str, step: str | None = None
):
    """The ``vectors_valid`` result of a run: the violations its documents' checks found before publishing."""
    return result("vectors_valid", catalog, document_ids, violations, run_id, step, asset_key="embeddings")


def check_milvus(
    catalog: Catalog,
    lake: Lake,
    client: MilvusClient,
    collection: str,
    document_ids: list[str],
    run_id: str,
    step: str | None = None,
):
    if not document_ids:
        return result("entities_match_chunks", catalog, [], [], run_id, step, asset_key="milvus_collection")
    gxe = _expectations()
    expected = {document_id: lake.read("chunks", document_id).height for document_id in document_ids}
    actual = grouped_entity_counts(client, collection, expected)  # a query a group, not a pass a document
    rows = [{"document_id": d, "entities_minus_chunks": actual[d] - n} for d, n in expected.items()]
    frame = pl.DataFrame(rows, schema={"document_id": pl.String, "entities_minus_chunks": pl.Int64})
    violations = validate(
        frame,
        [
            gxe.ExpectColumnValuesToBeBetween(column="entities_minus_chunks", min_value=0, max_value=0),
        ],
    )
    for document_id in failed_documents(violations):
        delete_document(client, collection, document_id)
    return result(
        "entities_match_chunks",
        catalog,
        document_ids,
        violations,
        run_id,
        step,
        asset_key="milvus_collection",
        collection=collection,
    )
