"""Writes to the catalog: document registrations and updates, pages, PageIndex nodes, the summary
and chunk-context caches, collection versions and tombstones (BM25 term counts: ``terms.py``).

A method that takes ``conn`` writes inside the caller's transaction (``with catalog.connect() as
conn:``), so one step's writes commit together; the others open their own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import psycopg2.extras

from kb_assets.stores.catalog.connection import one_row
from kb_assets.stores.catalog.records import DOCUMENT_COLUMNS
from kb_assets.stores.catalog.terms import CatalogTerms

READ_PAGES = ("pageindex_trees", "chunks", "embeddings", "milvus_collection")  # the steps after parsed_pages


class CatalogWrites(CatalogTerms):
    # documents -------------------------------------------------------------------------------
    def register_document(
        self,
        conn,
        *,
        document_id: str,
        knowledge_base_id: str,
        source_root: str,
        source_path: str,
        source_uri: str,
        version: str,
        size_bytes: int,
        partition_key: str | None = None,
    ) -> None:
        """Insert or update a document's registration; a new version makes it pending again (a failed
        document of the same version stays failed: the planner decides whether it is retried). A
        document's id, root and partition key never change here (``relocate_root`` moves a root)."""
        with conn.cursor() as cur:
            cur.execute(
                """
                INSERT INTO documents (document_id, knowledge_base_id, source_root, source_path, source_uri,
                                       version, size_bytes, status, partition_key)
                VALUES (%s, %s, %s, %s, %s, %s, %s, 'pending', %s)
                ON CONFLICT (document_id) DO UPDATE SET
                    source_uri = EXCLUDED.source_uri,
                    size_bytes = EXCLUDED.size_bytes,
                    partition_key = COALESCE(documents.partition_key, EXCLUDED.partition_key),
                    status = CASE WHEN documents.version IS DISTINCT FROM EXCLUDED.version
                                   OR documents.status = 'deleted'
                                  THEN 'pending' ELSE documents.status END,
                    error = CASE WHEN documents.version IS DISTINCT FROM EXCLUDED.version
                                  OR documents.status = 'deleted'
                                 THEN NULL ELSE documents.error END,
                    failed_step = CASE WHEN documents.version IS DISTINCT FROM EXCLUDED.version
                                        OR documents.status = 'deleted'
                                       THEN NULL ELSE documents.failed_step END,
                    version = EXCLUDED.version,
                    updated_at = now()
                """,
                (
                    document_id,
                    knowledge_base_id,
                    source_root,
                    source_path,
                    source_uri,
                    version,
                    size_bytes,
                    partition_key,
                ),
            )

    def set_partition_keys(self, conn, keys: dict[str, str]) -> None:
        """Give documents that have none their partition key (document id -> key)."""
        with conn.cursor() as cur:
            psycopg2.extras.execute_values(
                cur,
                "UPDATE documents SET partition_key = v.key FROM (VALUES %s) AS v (id, key) "
                "WHERE documents.document_id = v.id AND documents.partition_key IS NULL",
                list(keys.items()),
            )

    def relocate_root(self, knowledge_base_id: str, old_root: str, new_root: str) -> int:
        """Move every document of a root to another root (the files moved): ids, versions, partition keys
        and everything published stay; only ``source_root`` and ``source_uri`` change. Returns how many."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                "UPDATE documents SET source_root = %s, source_uri = %s || '/' || source_path, updated_at = now() "
                "WHERE knowledge_base_id = %s AND source_root = %s",
                (new_root, new_root, knowledge_base_id, old_root),
            )
            return cur.rowcount

    def record_source_etag(self, conn, document_id: str, etag: str, version: str) -> None:
        """Remember that the s3:// object of a document had this ETag when its bytes hashed to ``version``."""
        with conn.cursor() as cur:
            cur.execute(
                "INSERT INTO source_etags (document_id, etag, version) VALUES (%s, %s, %s) "
                "ON CONFLICT (document_id) DO UPDATE SET etag = EXCLUDED.etag, version = EXCLUDED.version, "
                "updated_at = now()",
                (document_id, etag, version),
            )

    def claim_documents(self, document_ids: list[str], claim: str) -> None:
        """Mark documents as a planned bucket run's (``planning.claim_documents``): their last run is its claim."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("UPDATE documents SET last_run_id = %s WHERE document_id = ANY(%s)", (claim, document_ids))

    def settle_claim(self, claim: str, run_id: str) -> None:
        """A bucket run's end: the documents it claimed and did not rewrite were last run by it all the same."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("UPDATE documents SET last_run_id = %s WHERE last_run_id = %s", (run_id, claim))

    def update_document(self, conn, document_id: str, **fields) -> None:
        unknown = set(fields) - set(DOCUMENT_COLUMNS)
        if unknown:
            raise ValueError(f"unknown document columns: {sorted(unknown)}")
        assignments = ", ".join(f"{name} = %s" for name in fields)
        with conn.cursor() as cur:
            cur.execute(
                f"UPDATE documents SET {assignments}, updated_at = now() WHERE document_id = %s",
                (*fields.values(), document_id),
            )

    def mark_failed(
        self, document_id: str, reason: str, run_id: str | None = None, failed_step: str | None = None
    ) -> None:
        """Mark a document failed with the reason, the run and the step it failed at ("step@version").

        A document that never published keeps nothing of what failed: its pages and PageIndex nodes are
        removed in the same transaction. They must then be made again, so a failure at a step that reads
        them is recorded at ``parsed_pages`` (where its retry starts; the reason says where it failed)."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT published_version, step_versions FROM documents WHERE document_id = %s FOR UPDATE",
                (document_id,),
            )
            row = cur.fetchone()
            removed = {}
            if row is not None and row[0] is None:
                cur.execute("DELETE FROM pageindex_nodes WHERE document_id = %s", (document_id,))
                cur.execute("DELETE FROM pages WHERE document_id = %s", (document_id,))
                if cur.rowcount:
                    if failed_step and failed_step.partition("@")[0] in READ_PAGES:
                        failed_step = f"parsed_pages@{(row[1] or {}).get('parsed_pages', '')}"
                    self.record_step(conn, document_id, "parsed_pages", "", invalidate=("pageindex_trees",))
                    removed = {"page_count": None}
            self.update_document(
                conn, document_id, status="failed", error=reason, last_run_id=run_id, failed_step=failed_step, **removed
            )

    def mark_deleted(self, document_id: str, object_key: str | None) -> bool:
        """Tombstone a deleted document (its pages and tree removed); True when another live document
        still shares its stored original (same bytes), which must then stay."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("DELETE FROM pageindex_nodes WHERE document_id = %s", (document_id,))
            cur.execute("DELETE FROM pages WHERE document_id = %s", (document_id,))
            self.remove_chunk_terms(conn, document_id)
            cur.execute(
                "SELECT count(*) FROM documents WHERE object_key = %s AND document_id <> %s AND status <> 'deleted'",
                (object_key, document_id),
            )
            shared = one_row(cur)[0] > 0
            cur.execute("UPDATE documents SET step_versions = '{}'::jsonb WHERE document_id = %s", (document_id,))
            self.update_document(
                conn,
                document_id,
                status="deleted",
                error=None,
                chunk_count=0,
                published_version=None,
                failed_step=None,
                term_count=None,
            )
        return shared

    def record_step(self, conn, document_id: str, step: str, version: str, invalidate: tuple[str, ...] = ()) -> None:
        """Record that ``step``'s output of the document is current under ``version``; the entries of
        ``invalidate`` (the steps after it, when its output changed) become "" (made from older input), so
        they run again. A missing entry is an output made before versions were recorded."""
        stale = list(invalidate)
        with conn.cursor() as cur:
            cur.execute(
                "UPDATE documents SET step_versions = step_versions || jsonb_object(%s::text[], %s::text[]) "
                "|| jsonb_build_object(%s::text, %s::text) WHERE document_id = %s",
                (stale, [""] * len(stale), step, version, document_id),
            )

    def store_metadata(self, conn: Any, document_id: str, metadata: Mapping[str, Any]) -> None:
        """The document's metadata read from its content (``kb_assets.structure.metadata``)."""
        with conn.cursor() as cur:
            cur.execute(
                "UPDATE documents SET metadata = %s WHERE document_id = %s",
                (psycopg2.extras.Json(metadata), document_id),
            )

    # pages -----------------------------------------------------------------------------------
    def replace_pages(
        self, conn, document_id: str, version: str, pages: list[dict], run_id: str, pipeline_version: str = "1"
    ) -> None:
        """Replace a document's pages (one transaction with the caller's other writes)."""
        with conn.cursor() as cur:
            cur.execute("DELETE FROM pages WHERE document_id = %s", (document_id,))
            psycopg2.extras.execute_values(
                cur,
                "INSERT INTO pages (document_id, version, page_index, page_label, text, blocks, summary, "
                "keywords, parser, mode, image_key, run_id, pipeline_version, width, height) VALUES %s",
                [
                    (
                        document_id,
                        version,
                        p["page_index"],
                        p.get("page_label"),
                        p["text"],
                        json.dumps(p["blocks"], ensure_ascii=False),
                        p.get("summary"),
                        p.get("keywords") or [],
                        p["parser"],
                        p["mode"],
                        p.get("image_key"),
                        run_id,
                        pipeline_version,
                        p.get("width"),
                        p.get("height"),
                    )
                    for p in pages
                ],
            )

    # BM25 term counts ----------------------------------------------------------------------------
    # PageIndex nodes -------------------------------------------------------------------------
    def replace_nodes(
        self, conn, document_id: str, version: str, nodes: list[dict], run_id: str, pipeline_version: str = "1"
    ) -> None:
        with conn.cursor() as cur:
            cur.execute("DELETE FROM pageindex_nodes WHERE document_id = %s", (document_id,))
            psycopg2.extras.execute_values(
                cur,
                "INSERT INTO pageindex_nodes (document_id, node_id, parent_id, ordinal, title, depth, "
                "start_page, end_page, summary, keywords, version, run_id, pipeline_version) VALUES %s",
                [
                    (
                        document_id,
                        n["node_id"],
                        n["parent_id"],
                        n["ordinal"],
                        n["title"],
                        n["depth"],
                        n["start_page"],
                        n["end_page"],
                        n.get("summary"),
                        n.get("keywords") or [],
                        version,
                        run_id,
                        pipeline_version,
                    )
                    for n in nodes
                ],
            )

    # page structure: summaries, keywords, table-of-contents flags ------------------------------
    def update_page_structure(self, conn, document_id: str, pages: list[dict]) -> None:
        """Set summary, keywords, is_toc and text_sha of a document's pages (by page_index)."""
        with conn.cursor() as cur:
            psycopg2.extras.execute_values(
                cur,
                "UPDATE pages SET summary = v.summary, keywords = v.keywords, is_toc = v.is_toc, "
                "text_sha = v.text_sha FROM (VALUES %s) AS v (document_id, page_index, summary, keywords, is_toc, "
                "text_sha) WHERE pages.document_id = v.document_id AND pages.page_index = v.page_index",
                [
                    (document_id, p["page_index"], p["summary"], p["keywords"] or [], bool(p["is_toc"]), p["text_sha"])
                    for p in pages
                ],
                template="(%s, %s, %s, %s::text[], %s, %s)",
            )

    def store_summaries(self, conn, bodies: dict[str, dict[str, str]]) -> None:
        """Cache summary bodies (summarizer -> {page-text sha256: body})."""
        rows = [(sha, summarizer, body) for summarizer, by_sha in bodies.items() for sha, body in by_sha.items()]
        if not rows:
            return
        with conn.cursor() as cur:
            psycopg2.extras.execute_values(
                cur,
                "INSERT INTO page_summaries (text_sha, summarizer, summary) VALUES %s "
                "ON CONFLICT (text_sha, summarizer) DO NOTHING",
                rows,
            )

    def store_chunk_contexts(self, conn, contextualizer: str, sentences: dict[str, str]) -> None:
        """Cache situating sentences of the chunk contextualizer (request sha256 -> sentence)."""
        if not sentences:
            return
        with conn.cursor() as cur:
            psycopg2.extras.execute_values(
                cur,
                "INSERT INTO chunk_contexts (request_sha, contextualizer, context) VALUES %s "
                "ON CONFLICT (request_sha, contextualizer) DO NOTHING",
                [(sha, contextualizer, sentence) for sha, sentence in sentences.items()],
            )

    # collection versions ---------------------------------------------------------------------
    def record_collection(
        self,
        conn,
        *,
        name: str,
        alias: str,
        schema_version: int,
        model: str,
        dimension: int,
        languages: list[str],
        state: str,
    ) -> None:
        with conn.cursor() as cur:
            cur.execute(
                """
                INSERT INTO collection_versions (name, alias, schema_version, model, dimension, languages, state)
                VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING
                """,
                (name, alias, schema_version, model, dimension, languages, state),
            )

    def publish_collection(self, alias: str, name: str) -> None:
        """Record the collection as the one published under the alias, and the one it replaces as retired,
        in one transaction (an engine without aliases publishes this way)."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT 1 FROM collection_versions WHERE name = %s FOR UPDATE", (name,))
            if cur.fetchone() is None:
                raise LookupError(f"collection {name} is not recorded in collection_versions: nothing to publish")
            cur.execute(
                "UPDATE collection_versions SET state = 'retired' "
                "WHERE alias = %s AND state = 'published' AND name <> %s",
                (alias, name),
            )
            cur.execute(
                "UPDATE collection_versions SET alias = %s, state = 'published', published_at = now() WHERE name = %s",
                (alias, name),
            )

    def set_collection_state(self, conn, name: str, state: str, entity_count: int | None = None) -> None:
        with conn.cursor() as cur:
            cur.execute(
                "UPDATE collection_versions SET state = %s, entity_count = COALESCE(%s, entity_count), "
                "published_at = CASE WHEN %s = 'published' THEN now() ELSE published_at END WHERE name = %s",
                (state, entity_count, state, name),
            )
