"""Postgres, the source of record: documents, pages, PageIndex nodes and collection versions.

The DDL lives in ``sql/schema.sql`` and is applied idempotently on first use.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import psycopg2
import psycopg2.extras

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "sql" / "schema.sql"

DOCUMENT_COLUMNS = (
    "document_id", "knowledge_base_id", "source_path", "source_uri", "title", "version", "size_bytes",
    "mime", "source_kind", "object_key", "status", "error", "page_count", "chunk_count",
    "published_version", "collection_name", "last_run_id", "updated_at",
)


@dataclass
class Document:
    document_id: str
    knowledge_base_id: str
    source_path: str
    source_uri: str
    title: str | None
    version: str | None
    size_bytes: int | None
    mime: str | None
    source_kind: str | None
    object_key: str | None
    status: str
    error: str | None
    page_count: int | None
    chunk_count: int | None
    published_version: str | None
    collection_name: str | None
    last_run_id: str | None
    updated_at: object = None


class Catalog:
    """Connections and queries of the Postgres source of record."""

    def __init__(self, dsn: str, statement_timeout_ms: int = 30_000):
        self.dsn = dsn.replace("postgresql+psycopg2://", "postgresql://")
        self.statement_timeout_ms = statement_timeout_ms
        self._schema_applied = False

    @contextmanager
    def connect(self) -> Iterator[psycopg2.extensions.connection]:
        """A connection in a transaction: committed on success, rolled back on error."""
        conn = psycopg2.connect(
            self.dsn, connect_timeout=10, options=f"-c statement_timeout={self.statement_timeout_ms}"
        )
        try:
            with conn:
                yield conn
        finally:
            conn.close()

    def ensure_schema(self) -> None:
        if self._schema_applied:
            return
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(4242)")
            cur.execute(SCHEMA_FILE.read_text())
        self._schema_applied = True

    # documents -------------------------------------------------------------------------------
    def register_document(self, conn, *, document_id: str, knowledge_base_id: str, source_path: str,
                          source_uri: str, version: str, size_bytes: int) -> None:
        """Insert or update a document's registration; a new version makes it pending again."""
        with conn.cursor() as cur:
            cur.execute(
                """
                INSERT INTO documents (document_id, knowledge_base_id, source_path, source_uri, version,
                                       size_bytes, status)
                VALUES (%s, %s, %s, %s, %s, %s, 'pending')
                ON CONFLICT (document_id) DO UPDATE SET
                    source_uri = EXCLUDED.source_uri,
                    size_bytes = EXCLUDED.size_bytes,
                    status = CASE WHEN documents.version IS DISTINCT FROM EXCLUDED.version
                                   OR documents.status IN ('failed', 'deleted')
                                  THEN 'pending' ELSE documents.status END,
                    error = CASE WHEN documents.version IS DISTINCT FROM EXCLUDED.version
                                  OR documents.status IN ('failed', 'deleted')
                                 THEN NULL ELSE documents.error END,
                    version = EXCLUDED.version,
                    updated_at = now()
                """,
                (document_id, knowledge_base_id, source_path, source_uri, version, size_bytes),
            )

    def get_documents(self, document_ids: list[str]) -> dict[str, Document]:
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT {', '.join(DOCUMENT_COLUMNS)} FROM documents WHERE document_id = ANY(%s)",
                        (list(document_ids),))
            return {row[0]: Document(*row) for row in cur.fetchall()}

    def get_document(self, document_id: str) -> Document | None:
        return self.get_documents([document_id]).get(document_id)

    def find_document(self, key: str) -> Document | None:
        """A document by id, source path or source URI (the newest match)."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                f"SELECT {', '.join(DOCUMENT_COLUMNS)} FROM documents "
                "WHERE document_id = %s OR source_path = %s OR source_uri = %s "
                "ORDER BY (status = 'deleted'), updated_at DESC LIMIT 1",
                (key, key, key),
            )
            row = cur.fetchone()
            return Document(*row) if row else None

    def list_documents(self, knowledge_base_ids: list[str] | None = None) -> list[Document]:
        with self.connect() as conn, conn.cursor() as cur:
            if knowledge_base_ids:
                cur.execute(f"SELECT {', '.join(DOCUMENT_COLUMNS)} FROM documents "
                            "WHERE knowledge_base_id = ANY(%s) ORDER BY knowledge_base_id, source_path",
                            (list(knowledge_base_ids),))
            else:
                cur.execute(f"SELECT {', '.join(DOCUMENT_COLUMNS)} FROM documents "
                            "ORDER BY knowledge_base_id, source_path")
            return [Document(*row) for row in cur.fetchall()]

    def update_document(self, conn, document_id: str, **fields) -> None:
        unknown = set(fields) - set(DOCUMENT_COLUMNS)
        if unknown:
            raise ValueError(f"unknown document columns: {sorted(unknown)}")
        assignments = ", ".join(f"{name} = %s" for name in fields)
        with conn.cursor() as cur:
            cur.execute(f"UPDATE documents SET {assignments}, updated_at = now() WHERE document_id = %s",
                        (*fields.values(), document_id))

    def mark_failed(self, document_id: str, reason: str, run_id: str | None = None) -> None:
        with self.connect() as conn:
            self.update_document(conn, document_id, status="failed", error=reason, last_run_id=run_id)

    # pages -----------------------------------------------------------------------------------
    def replace_pages(self, conn, document_id: str, version: str, pages: list[dict], run_id: str) -> None:
        """Replace a document's pages (one transaction with the caller's other writes)."""
        with conn.cursor() as cur:
            cur.execute("DELETE FROM pages WHERE document_id = %s", (document_id,))
            psycopg2.extras.execute_values(
                cur,
                "INSERT INTO pages (document_id, version, page_index, page_label, text, blocks, summary, "
                "keywords, parser, mode, image_key, run_id) VALUES %s",
                [(document_id, version, p["page_index"], p.get("page_label"), p["text"],
                  json.dumps(p["blocks"], ensure_ascii=False), p.get("summary"), p.get("keywords") or [],
                  p["parser"], p["mode"], p.get("image_key"), run_id) for p in pages],
            )

    def read_pages(self, document_id: str) -> list[dict]:
        with self.connect() as conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            cur.execute(
                "SELECT document_id, version, page_index, page_label, text, blocks, summary, keywords, "
                "parser, mode, image_key, run_id FROM pages WHERE document_id = %s ORDER BY page_index",
                (document_id,),
            )
            return [dict(row) for row in cur.fetchall()]

    def search_pages(self, terms: list[str], knowledge_base_ids: list[str] | None, limit: int) -> list[dict]:
        """Published pages ranked by how many of the terms they contain (substring match: works for Chinese)."""
        if not terms:
            return []
        patterns = ["%" + t.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" for t in terms]
        hits = " + ".join(["(p.text ILIKE %s)::int"] * len(patterns))
        kb_filter = "AND d.knowledge_base_id = ANY(%s)" if knowledge_base_ids else ""
        params = [*patterns, *([list(knowledge_base_ids)] if knowledge_base_ids else []), limit]
        with self.connect() as conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            cur.execute(
                f"""
                SELECT * FROM (
                    SELECT p.document_id, d.knowledge_base_id, d.title AS document_title, d.source_uri,
                           p.page_index, p.page_label, p.summary, p.text, ({hits}) AS matched_terms
                    FROM pages p JOIN documents d USING (document_id)
                    WHERE d.status = 'published' {kb_filter}
                ) ranked
                WHERE matched_terms > 0
                ORDER BY matched_terms DESC, document_id, page_index
                LIMIT %s
                """,
                params,
            )
            return [dict(row) for row in cur.fetchall()]

    # PageIndex nodes -------------------------------------------------------------------------
    def replace_nodes(self, conn, document_id: str, version: str, nodes: list[dict], run_id: str) -> None:
        with conn.cursor() as cur:
            cur.execute("DELETE FROM pageindex_nodes WHERE document_id = %s", (document_id,))
            psycopg2.extras.execute_values(
                cur,
                "INSERT INTO pageindex_nodes (document_id, node_id, parent_id, ordinal, title, depth, "
                "start_page, end_page, summary, keywords, version, run_id) VALUES %s",
                [(document_id, n["node_id"], n["parent_id"], n["ordinal"], n["title"], n["depth"],
                  n["start_page"], n["end_page"], n.get("summary"), n.get("keywords") or [], version, run_id)
                 for n in nodes],
            )

    def read_nodes(self, document_id: str) -> list[dict]:
        with self.connect() as conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            cur.execute("SELECT * FROM pageindex_nodes WHERE document_id = %s ORDER BY ordinal", (document_id,))
            return [dict(row) for row in cur.fetchall()]

    # collection versions ---------------------------------------------------------------------
    def record_collection(self, conn, *, name: str, alias: str, schema_version: int, model: str,
                          dimension: int, languages: list[str], state: str) -> None:
        with conn.cursor() as cur:
            cur.execute(
                """
                INSERT INTO collection_versions (name, alias, schema_version, model, dimension, languages, state)
                VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING
                """,
                (name, alias, schema_version, model, dimension, languages, state),
            )

    def set_collection_state(self, conn, name: str, state: str, entity_count: int | None = None) -> None:
        with conn.cursor() as cur:
            cur.execute(
                "UPDATE collection_versions SET state = %s, entity_count = COALESCE(%s, entity_count), "
                "published_at = CASE WHEN %s = 'published' THEN now() ELSE published_at END WHERE name = %s",
                (state, entity_count, state, name),
            )

    def collections(self) -> list[dict]:
        with self.connect() as conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            cur.execute("SELECT * FROM collection_versions ORDER BY created_at")
            return [dict(row) for row in cur.fetchall()]

    def collection(self, name: str) -> dict | None:
        return next((c for c in self.collections() if c["name"] == name), None)
