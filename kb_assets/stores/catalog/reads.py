"""Reads of the catalog.

Plain reads (documents, pages, nodes, cached summaries and chunk contexts, collection versions) open a connection each.
The retrieval service's queries (``search_pages``, ``page_facts``, ``locate_pages``, ``published_versions``,
the BM25 statistics ``term_statistics`` and ``chunk_term_counts``, a chunk's document ``chunk_document``) run
on the pooled read-only connections of ``reader()``, every statement bounded by the statement timeout.
"""

from __future__ import annotations

import psycopg2.extras

from kb_assets.lib.rows import NodeRow, PageRow
from kb_assets.stores.catalog.connection import CatalogConnection, one_row
from kb_assets.stores.catalog.records import (
    COLLECTION_COLUMNS,
    DOCUMENT_COLUMNS,
    CollectionVersion,
    Document,
    KnowledgeBaseCount,
    RootSummary,
)

MAX_PAGE_CHARS = 200_000  # a page's text as the service answers it is cut here (``truncated``)


class CatalogReads(CatalogConnection):
    # documents -------------------------------------------------------------------------------
    def get_documents(self, document_ids: list[str]) -> dict[str, Document]:
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                f"SELECT {', '.join(DOCUMENT_COLUMNS)} FROM documents WHERE document_id = ANY(%s)",
                (list(document_ids),),
            )
            return {row[0]: Document(*row) for row in cur.fetchall()}

    def get_document(self, document_id: str) -> Document | None:
        return self.get_documents([document_id]).get(document_id)

    def find_document(self, keys: list[str]) -> Document | None:
        """A document by id, partition key, source path or source URI, trying ``keys`` (the newest match)."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                f"SELECT {', '.join(DOCUMENT_COLUMNS)} FROM documents "
                "WHERE document_id = ANY(%s) OR partition_key = ANY(%s) OR source_path = ANY(%s) "
                "OR source_uri = ANY(%s) ORDER BY (status = 'deleted'), updated_at DESC LIMIT 1",
                (keys, keys, keys, keys),
            )
            row = cur.fetchone()
            return Document(*row) if row else None

    def documents_by_partition_keys(self, keys: list[str]) -> dict[str, Document]:
        """Documents by their partition key."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                f"SELECT {', '.join(DOCUMENT_COLUMNS)} FROM documents WHERE partition_key = ANY(%s)", (list(keys),)
            )
            found = (Document(*row) for row in cur.fetchall())
            return {doc.partition_key: doc for doc in found if doc.partition_key is not None}  # all: matched by it

    def documents_without_partition_key(self) -> list[Document]:
        """Documents registered before partition keys were readable (none once they are migrated)."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT {', '.join(DOCUMENT_COLUMNS)} FROM documents WHERE partition_key IS NULL")
            return [Document(*row) for row in cur.fetchall()]

    def taken_partition_keys(self, keys: list[str]) -> set[str]:
        """Which of these partition keys a document holds already."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT partition_key FROM documents WHERE partition_key = ANY(%s)", (list(keys),))
            return {row[0] for row in cur.fetchall()}

    def source_roots(self, knowledge_base_id: str) -> list[str]:
        """The source roots a knowledge base has documents from (deleted ones included: they are its history)."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT DISTINCT source_root FROM documents WHERE knowledge_base_id = %s ORDER BY 1",
                (knowledge_base_id,),
            )
            return [row[0] for row in cur.fetchall()]

    def root_summary(self, knowledge_base_ids: list[str] | None = None) -> list[RootSummary]:
        """Per knowledge base and root: how many documents by status."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT knowledge_base_id, source_root, status, count(*) FROM documents "
                "WHERE %s::text[] IS NULL OR knowledge_base_id = ANY(%s) GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
                (knowledge_base_ids, knowledge_base_ids),
            )
            out: dict[tuple[str, str], RootSummary] = {}
            for kb, root, status, count in cur.fetchall():
                out.setdefault((kb, root), RootSummary(kb, root, {})).documents[status] = count
            return list(out.values())

    def document_ids_under(self, knowledge_base_id: str, source_root: str) -> dict[str, str]:
        """Source path -> document id of every document registered under a root."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT source_path, document_id FROM documents WHERE knowledge_base_id = %s AND source_root = %s",
                (knowledge_base_id, source_root),
            )
            return dict(cur.fetchall())

    def source_etags(self, document_ids: list[str]) -> dict[str, tuple[str, str]]:
        """(ETag, version) last seen for the s3:// sources of these documents."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT document_id, etag, version FROM source_etags WHERE document_id = ANY(%s)", (list(document_ids),)
            )
            return {row[0]: (row[1], row[2]) for row in cur.fetchall()}

    def list_documents(self, knowledge_base_ids: list[str] | None = None) -> list[Document]:
        with self.connect() as conn, conn.cursor() as cur:
            if knowledge_base_ids:
                cur.execute(
                    f"SELECT {', '.join(DOCUMENT_COLUMNS)} FROM documents "
                    "WHERE knowledge_base_id = ANY(%s) ORDER BY knowledge_base_id, source_path",
                    (list(knowledge_base_ids),),
                )
            else:
                cur.execute(
                    f"SELECT {', '.join(DOCUMENT_COLUMNS)} FROM documents ORDER BY knowledge_base_id, source_path"
                )
            return [Document(*row) for row in cur.fetchall()]

    def documents_of_run(self, run_id: str, claim: str | None = None) -> list[Document]:
        """Documents that are pending, that this run wrote last or that carry its claim (a hash bucket's
        run: its stale documents, ``planning.claim_documents``), by id."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                f"SELECT {', '.join(DOCUMENT_COLUMNS)} FROM documents "
                "WHERE status = 'pending' OR last_run_id = ANY(%s) ORDER BY document_id",
                ([run_id, *([claim] if claim else [])],),
            )
            return [Document(*row) for row in cur.fetchall()]

    # pages, PageIndex nodes, summaries -------------------------------------------------------
    def read_pages(self, document_id: str) -> list[PageRow]:
        with self.connect() as conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            cur.execute(
                "SELECT document_id, version, page_index, page_label, text, blocks, summary, keywords, "
                "parser, mode, image_key, run_id, pipeline_version, width, height FROM pages WHERE document_id = %s "
                "ORDER BY page_index",
                (document_id,),
            )
            return [dict(row) for row in cur.fetchall()]

    def read_page(self, document_id: str, page_index: int, max_chars: int | None = None) -> PageRow | None:
        """One page record (as ``read_pages`` gives them, without blocks), or None; with ``max_chars`` its
        text is cut to that many characters in Postgres, and ``text_chars`` says how long it is."""
        with self.connect() as conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            cur.execute(
                "SELECT document_id, version, page_index, page_label, "
                "CASE WHEN %s::int IS NULL THEN text ELSE left(text, %s::int) END AS text, length(text) AS text_chars, "
                "summary, keywords, parser, mode, image_key, run_id, width, height FROM pages "
                "WHERE document_id = %s AND page_index = %s",
                (max_chars, max_chars, document_id, page_index),
            )
            row = cur.fetchone()
            return dict(row) if row else None

    def chunk_document(self, chunk_id: str, knowledge_base_ids: list[str] | None = None) -> str | None:
        """The document whose published version holds the chunk (``chunk_terms``, by its primary key), when
        it is in one of these knowledge bases (None: any); else None."""
        with self.reader() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT c.document_id FROM chunk_terms c JOIN documents d USING (document_id) "
                "WHERE c.chunk_id = %s AND (%s::text[] IS NULL OR d.knowledge_base_id = ANY(%s::text[]))",
                (chunk_id, knowledge_base_ids, knowledge_base_ids),
            )
            row = cur.fetchone()
            return row[0] if row else None

    def knowledge_base_counts(self, knowledge_base_ids: list[str] | None = None) -> list[KnowledgeBaseCount]:
        """Per knowledge base (those named; None: all), its documents by status."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT knowledge_base_id, count(*) FILTER (WHERE status <> 'deleted') AS documents, "
                "count(*) FILTER (WHERE status = 'published') AS published, "
                "count(*) FILTER (WHERE status = 'failed') AS failed, "
                "count(*) FILTER (WHERE status = 'pending') AS pending "
                "FROM documents WHERE %(all)s OR knowledge_base_id = ANY(%(kbs)s) "
                "GROUP BY knowledge_base_id ORDER BY knowledge_base_id",
                {"all": knowledge_base_ids is None, "kbs": list(knowledge_base_ids or [])},
            )
            return [KnowledgeBaseCount(*row) for row in cur.fetchall()]

    def page_modes(self, document_ids: list[str]) -> dict[str, str]:
        """Per document, the parser modes of its pages ("docling-native-pdf, ocr-rapidocr"): what the UI's
        metadata of every step after parsing shows, so a degraded parse stays visible downstream."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT document_id, string_agg(DISTINCT mode, ', ' ORDER BY mode) FROM pages "
                "WHERE document_id = ANY(%s) GROUP BY document_id",
                (list(document_ids),),
            )
            return {document_id: modes for document_id, modes in cur.fetchall()}

    def read_nodes(self, document_id: str) -> list[NodeRow]:
        with self.connect() as conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            cur.execute("SELECT * FROM pageindex_nodes WHERE document_id = %s ORDER BY ordinal", (document_id,))
            return [dict(row) for row in cur.fetchall()]

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
            cur.execute(
                "SELECT summarizer, text_sha, summary FROM page_summaries "
                "WHERE text_sha = ANY(%s) AND summarizer = ANY(%s)",
                (list(set(text_shas)), summarizers),
            )
            for summarizer, sha, summary in cur.fetchall():
                out[summarizer][sha] = summary
        return out

    def cached_chunk_contexts(self, request_shas: list[str], contextualizer: str) -> dict[str, str]:
        """Cached situating sentences of the chunk contextualizer: request sha256 -> sentence."""
        if not request_shas:
            return {}
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT request_sha, context FROM chunk_contexts WHERE request_sha = ANY(%s) AND contextualizer = %s",
                (list(set(request_shas)), contextualizer),
            )
            return dict(cur.fetchall())

    # collection versions ---------------------------------------------------------------------
    def collections(self) -> list[CollectionVersion]:
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT {', '.join(COLLECTION_COLUMNS)} FROM collection_versions ORDER BY created_at")
            return [CollectionVersion(*row) for row in cur.fetchall()]

    def collection(self, name: str) -> CollectionVersion | None:
        return next((c for c in self.collections() if c.name == name), None)

    def published_collection(self, alias: str) -> str | None:
        """The collection recorded as published under the alias (on an engine without aliases, what
        search reads: ``stores.vectors.published_collection``)."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT name FROM collection_versions WHERE alias = %s AND state = 'published' "
                "ORDER BY published_at DESC NULLS LAST LIMIT 1",
                (alias,),
            )
            row = cur.fetchone()
            return row[0] if row else None

    # sizing ------------------------------------------------------------------------------------
    def table_sizes(self) -> dict[str, tuple[int, int]]:
        """Rows and bytes on disk (with indexes and TOAST) of each table of the schema."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename")
            sizes = {}
            for (table,) in cur.fetchall():
                cur.execute(f'SELECT count(*), pg_total_relation_size(%s) FROM "{table}"', (table,))
                sizes[table] = tuple(one_row(cur))
            return sizes
