"""Postgres, the source of record: documents, pages, PageIndex nodes and collection versions.

The DDL lives in ``sql/schema.sql`` and is applied idempotently on first use.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import psycopg2
import psycopg2.extras

from kb_assets.settings import libpq_url

# sql/ stays at the top of the repository; kb_assets/sql links to it, so wheels carry the schema too
SCHEMA_FILE = Path(__file__).resolve().parents[1] / "sql" / "schema.sql"

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
        self.dsn = libpq_url(dsn)
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

    def find_document(self, keys: list[str]) -> Document | None:
        """A document by id, source path or source URI, trying ``keys`` (the newest match)."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                f"SELECT {', '.join(DOCUMENT_COLUMNS)} FROM documents "
                "WHERE document_id = ANY(%s) OR source_path = ANY(%s) OR source_uri = ANY(%s) "
                "ORDER BY (status = 'deleted'), updated_at DESC LIMIT 1",
                (keys, keys, keys),
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

    def mark_deleted(self, document_id: str, object_key: str | None) -> bool:
        """Tombstone a deleted document (its pages and tree removed); True when another live document
        still shares its stored original (same bytes), which must then stay."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("DELETE FROM pageindex_nodes WHERE document_id = %s", (document_id,))
            cur.execute("DELETE FROM pages WHERE document_id = %s", (document_id,))
            cur.execute("SELECT count(*) FROM documents WHERE object_key = %s AND document_id <> %s "
                        "AND status <> 'deleted'", (object_key, document_id))
            shared = cur.fetchone()[0] > 0
            self.update_document(conn, document_id, status="deleted", error=None, chunk_count=0,
                                 published_version=None)
        return shared

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
        """Published pages ranked by how many of the terms they contain (substring match: works for Chinese).

        Ties go to pages whose summary holds more of the terms, then document order; table-of-contents
        pages (``pages.is_toc``) come after the others. Postgres full-text search has no
        Chinese parser and pg_trgm ignores CJK characters under the C locale, so this is a scan with
        ILIKE: fine for a fallback (~554 pages, a few ms), not for a primary search path.
        """
        if not terms:
            return []
        kb_filter = "AND d.knowledge_base_id = ANY(%(kbs)s)" if knowledge_base_ids else ""
        with self.reader() as conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            cur.execute(
                f"""
                WITH terms AS (SELECT unnest(%(patterns)s::text[]) AS pattern)
                SELECT * FROM (
                    SELECT p.document_id, d.knowledge_base_id, d.title AS document_title, d.source_uri,
                           p.page_index, p.page_label, p.summary, p.text, p.image_key, p.is_toc,
                           (SELECT count(*) FROM terms WHERE p.text ILIKE terms.pattern) AS matched_terms,
                           (SELECT count(*) FROM terms WHERE p.summary ILIKE terms.pattern) AS summary_terms
                    FROM pages p JOIN documents d USING (document_id)
                    WHERE d.status = 'published' {kb_filter}
                ) ranked
                WHERE matched_terms > 0
                ORDER BY is_toc, matched_terms DESC, summary_terms DESC, document_id, page_index
                LIMIT %(limit)s
                """,
                {"patterns": [_like_pattern(t) for t in terms], "kbs": list(knowledge_base_ids or []), "limit": limit},
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

    # page structure: summaries, keywords, table-of-contents flags ------------------------------
    def update_page_structure(self, conn, document_id: str, pages: list[dict]) -> None:
        """Set summary, keywords, is_toc and text_sha of a document's pages (by page_index)."""
        with conn.cursor() as cur:
            psycopg2.extras.execute_values(
                cur,
                "UPDATE pages SET summary = v.summary, keywords = v.keywords, is_toc = v.is_toc, "
                "text_sha = v.text_sha FROM (VALUES %s) AS v (document_id, page_index, summary, keywords, is_toc, "
                "text_sha) WHERE pages.document_id = v.document_id AND pages.page_index = v.page_index",
                [(document_id, p["page_index"], p["summary"], p["keywords"] or [], bool(p["is_toc"]), p["text_sha"])
                 for p in pages],
                template="(%s, %s, %s, %s::text[], %s, %s)",
            )

    def toc_pages(self, document_id: str) -> set[int]:
        """page_index of the document's table-of-contents (navigation) pages."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT page_index FROM pages WHERE document_id = %s AND is_toc", (document_id,))
            return {row[0] for row in cur.fetchall()}

    def cached_summaries(self, text_shas: list[str], summarizers: list[str]) -> dict[str, dict[str, str]]:
        """Cached summary bodies: summarizer -> {page-text sha256: body}."""
        out: dict[str, dict[str, str]] = {name: {} for name in summarizers}
        if not text_shas or not summarizers:
            return out
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT summarizer, text_sha, summary FROM page_summaries "
                        "WHERE text_sha = ANY(%s) AND summarizer = ANY(%s)", (list(set(text_shas)), summarizers))
            for summarizer, sha, summary in cur.fetchall():
                out[summarizer][sha] = summary
        return out

    def store_summaries(self, conn, bodies: dict[str, dict[str, str]]) -> None:
        """Cache summary bodies (summarizer -> {page-text sha256: body})."""
        rows = [(sha, summarizer, body) for summarizer, by_sha in bodies.items() for sha, body in by_sha.items()]
        if not rows:
            return
        with conn.cursor() as cur:
            psycopg2.extras.execute_values(
                cur, "INSERT INTO page_summaries (text_sha, summarizer, summary) VALUES %s "
                     "ON CONFLICT (text_sha, summarizer) DO NOTHING", rows)

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

    # retrieval (read-only, pooled connections) -------------------------------------------------
    @contextmanager
    def reader(self) -> Iterator[psycopg2.extensions.connection]:
        """A pooled read-only connection for the retrieval service (a fresh connection costs ~7 ms).

        Connecting and every statement are bounded by ``statement_timeout_ms``; a connection that saw an
        error is discarded.
        """
        import psycopg2.pool

        with self.__dict__.setdefault("_pool_lock", threading.Lock()):
            if getattr(self, "_pool", None) is None:
                # psycopg2 keeps at most ``minconn`` idle connections: 4 stay open, up to 32 in use at once
                self._pool = psycopg2.pool.ThreadedConnectionPool(
                    4, 32, self.dsn, connect_timeout=max(1, -(-self.statement_timeout_ms // 1000)),
                    options=f"-c statement_timeout={self.statement_timeout_ms}")
        conn = self._pool.getconn()
        broken = False
        try:
            if not conn.autocommit:
                conn.set_session(readonly=True, autocommit=True)
            yield conn
        except Exception:
            broken = True
            raise
        finally:
            self._pool.putconn(conn, close=broken or conn.closed != 0)

    def close_pool(self) -> None:
        with self.__dict__.setdefault("_pool_lock", threading.Lock()):
            if getattr(self, "_pool", None) is not None:
                self._pool.closeall()
                self._pool = None

    def page_facts(self, pages: list[tuple[str, int]]) -> dict[tuple[str, int], dict]:
        """``is_toc`` and ``image_key`` of (document_id, page_index) pairs, for search results."""
        if not pages:
            return {}
        with self.reader() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT p.document_id, p.page_index, p.is_toc, p.image_key FROM pages p "
                "JOIN unnest(%s::text[], %s::int[]) AS wanted(document_id, page_index) USING (document_id, page_index)",
                ([d for d, _ in pages], [i for _, i in pages]),
            )
            return {(d, i): {"is_toc": toc, "image_key": key} for d, i, toc, key in cur.fetchall()}

    def locate_pages(self, terms: list[str], query: str, knowledge_base_ids: list[str] | None,
                     limit: int) -> list[dict]:
        """Pages most likely to answer a query, best first: [{document_id, page_index, score}].

        A PageIndex node (not the root) scores by the share of the query's terms in its title
        (substring match, so Chinese works), plus 0.5 when the whole query is in the title, plus 0.3 x
        the share of terms among its keywords; it lends its score to its first pages (at most 3, the
        later ones a little less). A page adds 0.5 x the share of terms in its summary and 0.3 x the
        share among its keywords. Table-of-contents pages (``pages.is_toc``) never count.
        """
        if not terms:
            return []
        patterns = [_like_pattern(t) for t in terms]
        kb_filter = "AND d.knowledge_base_id = ANY(%(kbs)s)" if knowledge_base_ids else ""
        sql = f"""
            WITH terms AS (SELECT unnest(%(patterns)s::text[]) AS pattern, unnest(%(terms)s::text[]) AS term),
            docs AS (
                SELECT document_id FROM documents d WHERE d.status = 'published' {kb_filter}
            ),
            nodes AS (
                SELECT n.document_id, n.start_page, n.end_page,
                       (SELECT count(*) FROM terms WHERE n.title ILIKE terms.pattern)::float / %(n)s
                       + CASE WHEN n.title ILIKE %(exact)s THEN 0.5 ELSE 0 END
                       + 0.3 * (SELECT count(*) FROM terms WHERE terms.term = ANY(n.keywords))::float / %(n)s
                         AS score
                FROM pageindex_nodes n JOIN docs USING (document_id)
                WHERE n.depth > 0
            ),
            node_pages AS (
                SELECT document_id, page_index, max(score * (1 - 0.1 * (page_index - start_page))) AS score
                FROM nodes, generate_series(start_page, least(end_page, start_page + 2)) AS page_index
                WHERE score > 0
                GROUP BY document_id, page_index
            ),
            summary_pages AS (
                SELECT p.document_id, p.page_index,
                       0.5 * (SELECT count(*) FROM terms WHERE p.summary ILIKE terms.pattern)::float / %(n)s
                       + 0.3 * (SELECT count(*) FROM terms WHERE terms.term = ANY(p.keywords))::float / %(n)s
                         AS score
                FROM pages p JOIN docs USING (document_id)
            )
            SELECT p.document_id, p.page_index,
                   coalesce(np.score, 0) + coalesce(sp.score, 0) AS score
            FROM pages p
            JOIN docs USING (document_id)
            LEFT JOIN node_pages np ON np.document_id = p.document_id AND np.page_index = p.page_index
            LEFT JOIN summary_pages sp ON sp.document_id = p.document_id AND sp.page_index = p.page_index
            WHERE coalesce(np.score, 0) + coalesce(sp.score, 0) > 0 AND NOT p.is_toc
            ORDER BY score DESC, p.document_id, p.page_index
            LIMIT %(limit)s
        """
        params = {"patterns": patterns, "terms": terms, "n": len(terms), "exact": _like_pattern(" ".join(query.split())),
                  "kbs": list(knowledge_base_ids or []), "limit": limit}
        with self.reader() as conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            cur.execute(sql, params)
            return [dict(row) for row in cur.fetchall()]


def _like_pattern(term: str) -> str:
    """An ILIKE pattern matching the term anywhere (its own % _ \\ taken literally)."""
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
