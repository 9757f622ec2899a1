"""The retrieval service's reads of the catalog: on the pooled read-only connections of ``reader()``, every
statement bounded by the statement timeout (pages by their words, page facts, published versions, BM25
statistics)."""

from __future__ import annotations

import psycopg2.extras

from kb_assets.stores.catalog.connection import CatalogConnection


class CatalogSearchReads(CatalogConnection):
    # retrieval (read-only, pooled connections) -------------------------------------------------
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
                {"patterns": [like_pattern(t) for t in terms], "kbs": list(knowledge_base_ids or []), "limit": limit},
            )
            return [dict(row) for row in cur.fetchall()]

    def published_versions(self, document_ids: list[str]) -> dict[str, dict]:
        """What search may serve of these documents: ``published_version`` (None: nothing), and the
        current ``version``, ``status`` and ``error`` (a failed newer version means the last good one serves),
        ``term_count`` (None: no BM25 statistics kept for what serves) and ``metadata`` (read from content)."""
        if not document_ids:
            return {}
        with self.reader() as conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            cur.execute(
                "SELECT document_id, published_version, version, status, error, term_count, metadata FROM documents "
                "WHERE document_id = ANY(%s)",
                (list(set(document_ids)),),
            )
            return {row["document_id"]: dict(row) for row in cur.fetchall()}

    def document_metadata(self, knowledge_base_ids: list[str] | None) -> dict[str, dict]:
        """{document_id: metadata read from content} of the published documents of these knowledge bases."""
        with self.reader() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT document_id, metadata FROM documents WHERE published_version IS NOT NULL "
                "AND status <> 'deleted' AND metadata IS NOT NULL "
                "AND (%s::text[] IS NULL OR knowledge_base_id = ANY(%s))",
                (knowledge_base_ids, knowledge_base_ids),
            )
            return {document_id: metadata for document_id, metadata in cur.fetchall()}

    def chunk_term_counts(self, chunk_ids: list[str], terms: list[str]) -> dict[str, tuple[int, dict[str, int]]]:
        """(length in terms, term -> occurrences) of the chunks that hold any of ``terms`` (the others are
        left out)."""
        if not chunk_ids or not terms:
            return {}
        with self.reader() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT c.chunk_id, t.term, t.tf, c.chunk_length FROM chunk_terms c, "
                "unnest(c.terms, c.counts) AS t(term, tf) WHERE c.chunk_id = ANY(%s) AND t.term = ANY(%s)",
                (list(chunk_ids), list(terms)),
            )
            out: dict[str, tuple[int, dict[str, int]]] = {}
            for chunk_id, term, tf, length in cur.fetchall():
                out.setdefault(chunk_id, (length, {}))[1][term] = tf
            return out

    def located_chunk_terms(
        self, pages: list[tuple[str, int]], terms: list[str]
    ) -> tuple[dict[str, tuple[str, str, int, dict[str, int]]], set[str]]:
        """The chunks touching these (document_id, page_index) pages that hold any of ``terms``: chunk_id ->
        (document_id, knowledge_base_id, length in terms, term -> occurrences); and the pages' documents
        whose kept rows have no page ranges (kept before they were, or none kept), which this cannot answer."""
        documents = sorted({document_id for document_id, _ in pages})
        if not documents:
            return {}, set()
        with self.reader() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT w.d FROM unnest(%s::text[]) AS w(d) WHERE NOT EXISTS (SELECT 1 FROM chunk_terms c "
                "WHERE c.document_id = w.d AND c.page_index IS NOT NULL)",
                (documents,),
            )
            lacking = {row[0] for row in cur.fetchall()}
            out: dict[str, tuple[str, str, int, dict[str, int]]] = {}
            if not terms:
                return out, lacking
            cur.execute(
                "SELECT DISTINCT c.chunk_id, c.document_id, d.knowledge_base_id, c.chunk_length, t.term, t.tf "
                "FROM unnest(%s::text[], %s::int[]) AS w(document_id, page_index) "
                "JOIN chunk_terms c ON c.document_id = w.document_id AND c.page_index <= w.page_index "
                "AND c.page_end >= w.page_index JOIN documents d ON d.document_id = c.document_id, "
                "unnest(c.terms, c.counts) AS t(term, tf) WHERE t.term = ANY(%s)",
                ([d for d, _ in pages], [p for _, p in pages], list(terms)),
            )
            for chunk_id, document_id, kb, length, term, tf in cur.fetchall():
                out.setdefault(chunk_id, (document_id, kb, length, {}))[3][term] = tf
            return out, lacking

    def kept_term_chunks(self, document_id: str, with_pages: bool = False) -> set[str]:
        """The chunks of a document whose BM25 term counts are kept (``chunk_terms``); ``with_pages``: only
        those kept with their page range."""
        with self.reader() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT chunk_id FROM chunk_terms WHERE document_id = %s"
                + (" AND page_index IS NOT NULL" if with_pages else ""),
                (document_id,),
            )
            return {row[0] for row in cur.fetchall()}

    def page_facts(self, pages: list[tuple[str, int]], with_text: bool = False) -> dict[tuple[str, int], dict]:
        """``is_toc`` and ``image_key`` (and the page ``text`` when asked) of (document_id, page_index)
        pairs, for search results."""
        if not pages:
            return {}
        with self.reader() as conn, conn.cursor() as cur:
            cur.execute(
                f"SELECT p.document_id, p.page_index, p.is_toc, p.image_key, {'p.text' if with_text else 'NULL'} "
                "FROM pages p JOIN unnest(%s::text[], %s::int[]) AS wanted(document_id, page_index) "
                "USING (document_id, page_index)",
                ([d for d, _ in pages], [i for _, i in pages]),
            )
            return {
                (d, i): {"is_toc": toc, "image_key": key, **({"text": text} if with_text else {})}
                for d, i, toc, key, text in cur.fetchall()
            }

    def statement_nodes(
        self, knowledge_base_ids: list[str] | None, document_ids: list[str] | None = None
    ) -> list[tuple[str, str, int, int]]:
        """(document_id, title, start_page, end_page) of the statement nodes (``structure/statements.py``) of the
        published documents of these knowledge bases (``document_ids``: of these only)."""
        with self.reader() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT n.document_id, n.title, n.start_page, n.end_page FROM pageindex_nodes n "
                "JOIN documents d USING (document_id) WHERE d.status = 'published' AND n.node_id LIKE 'statement-%%' "
                "AND (%(kbs)s::text[] IS NULL OR d.knowledge_base_id = ANY(%(kbs)s)) "
                "AND (%(docs)s::text[] IS NULL OR d.document_id = ANY(%(docs)s))",
                {"kbs": knowledge_base_ids, "docs": document_ids},
            )
            return [(d, title, start, end) for d, title, start, end in cur.fetchall()]

    def evidence_nodes(
        self, knowledge_base_ids: list[str] | None, document_ids: list[str] | None = None
    ) -> list[tuple[str, str, str, int, int]]:
        """(document_id, node_id, title, start_page, end_page) of the PageIndex nodes below the root of the
        published documents of these knowledge bases (``document_ids``: of these only; None: only the statement
        and section nodes of every document, ``structure/statements.py`` and ``structure/topics.py``)."""
        with self.reader() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT n.document_id, n.node_id, n.title, n.start_page, n.end_page FROM pageindex_nodes n "
                "JOIN documents d USING (document_id) WHERE d.status = 'published' AND n.depth > 0 "
                "AND (%(kbs)s::text[] IS NULL OR d.knowledge_base_id = ANY(%(kbs)s)) "
                "AND (%(docs)s::text[] IS NULL AND (n.node_id LIKE 'statement-%%' OR n.node_id LIKE 'section-%%') "
                "OR d.document_id = ANY(%(docs)s))",
                {"kbs": knowledge_base_ids, "docs": document_ids},
            )
            return [tuple(row) for row in cur.fetchall()]

    def locate_pages(
        self,
        terms: list[str],
        query: str,
        knowledge_base_ids: list[str] | None,
        limit: int,
        document_ids: list[str] | None = None,
    ) -> list[dict]:
        """Pages most likely to answer a query, best first: [{document_id, page_index, score}].

        A PageIndex node (not the root) scores by the share of the query's terms in its title
        (substring match, so Chinese works), plus 0.5 when the whole query is in the title, plus 0.3 x
        the share of terms among its keywords; it lends its score to its first pages (at most 3, the
        later ones a little less). A page adds 0.5 x the share of terms in its summary and 0.3 x the
        share among its keywords. Table-of-contents pages (``pages.is_toc``) never count. ``document_ids``:
        only pages of these documents (None: of every one).
        """
        if not terms:
            return []
        sql, params = locate_statement(terms, query, knowledge_base_ids, limit, document_ids)
        with self.reader() as conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            cur.execute(sql, params)
            return [dict(row) for row in cur.fetchall()]


def like_pattern(term: str) -> str:
    """An ILIKE pattern matching the term anywhere (its own % _ \\ taken literally)."""
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def locate_statement(
    terms: list[str], query: str, knowledge_base_ids: list[str] | None, limit: int, document_ids: list[str] | None
) -> tuple[str, dict]:
    """The SQL of ``locate_pages`` and its parameters. Only rows that share a word with the query can score,
    so the nodes and pages are first filtered by an OR of their matches: a filter the trigram and keyword
    indexes answer (``sql/schema.sql``) instead of a scan of every page of the knowledge base."""
    patterns = [like_pattern(t) for t in terms]
    kb_filter = "AND d.knowledge_base_id = ANY(%(kbs)s)" if knowledge_base_ids else ""
    if document_ids is not None:
        kb_filter += " AND d.document_id = ANY(%(documents)s)"
    title_match = " OR ".join(f"n.title ILIKE %(pattern{i})s" for i in range(len(patterns)))
    summary_match = " OR ".join(f"p.summary ILIKE %(pattern{i})s" for i in range(len(patterns)))
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
            WHERE n.depth > 0 AND ({title_match} OR n.title ILIKE %(exact)s OR n.keywords && %(terms)s::text[])
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
            WHERE {summary_match} OR p.keywords && %(terms)s::text[]
        ),
        scored AS (
            SELECT document_id, page_index, sum(score) AS score
            FROM (SELECT * FROM node_pages UNION ALL SELECT * FROM summary_pages) both_sources
            GROUP BY document_id, page_index
        )
        SELECT s.document_id, s.page_index, s.score
        FROM scored s JOIN pages p USING (document_id, page_index)
        WHERE s.score > 0 AND NOT p.is_toc
        ORDER BY s.score DESC, s.document_id, s.page_index
        LIMIT %(limit)s
    """
    params = {
        "patterns": patterns,
        "terms": terms,
        "n": len(terms),
        "exact": like_pattern(" ".join(query.split())),
        "kbs": list(knowledge_base_ids or []),
        "documents": list(document_ids or []),
        "limit": limit,
        **{f"pattern{i}": pattern for i, pattern in enumerate(patterns)},
    }
    return sql, params
