"""The locating index (``locate_terms``, ``sql/schema.sql``, issue 51): pages located by the words of their
PageIndex nodes' titles, their summaries and keywords, read through an inverted index instead of a filter over
every page; and what ``kb-assets verify`` checks of it (its entries against the pages and nodes they are made
from) and repairs."""

from __future__ import annotations

import re

import psycopg2.errors
import psycopg2.extras

from kb_assets.stores.catalog.connection import CatalogConnection
from kb_assets.stores.catalog.search_reads import like_pattern


class CatalogLocating(CatalogConnection):
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
        params = locate_parameters(terms, query, knowledge_base_ids, limit, document_ids)
        execute = f"EXECUTE kb_locate ({', '.join(['%s'] * len(params))})"
        with self.reader() as conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            try:
                cur.execute(execute, params)
            except psycopg2.errors.InvalidSqlStatementName:  # this connection's first: prepared once (autocommit)
                cur.execute(f"PREPARE kb_locate ({LOCATE_TYPES}) AS {LOCATE_SQL}")
                cur.execute(execute, params)
            return [dict(row) for row in cur.fetchall()]

    def locate_drift(self) -> dict[str, int]:
        """Document -> how many locating entries differ from those its pages and nodes make (none listed when
        they agree)."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT document_id, count(*) FROM ("
                "(SELECT * FROM locate_entries EXCEPT ALL SELECT * FROM locate_terms) UNION ALL "
                "(SELECT * FROM locate_terms EXCEPT ALL SELECT * FROM locate_entries)) differing GROUP BY 1"
            )
            return {document_id: int(n) for document_id, n in cur.fetchall()}

    def reindex_located(self, document_id: str) -> None:
        """Make a document's locating entries again from its pages and nodes."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("DELETE FROM locate_terms WHERE document_id = %s", (document_id,))
            cur.execute("INSERT INTO locate_terms SELECT * FROM locate_entries WHERE document_id = %s", (document_id,))


# The SQL of ``locate_pages``: the same text for every question (the terms are parameters), so each pooled
# connection prepares it once (``LOCATE_PREPARED``) and Postgres plans it once. Parameters: the Latin terms' numbers
# and LIKE patterns, the CJK terms' numbers, pairs (or single characters), how many pairs each needs and the term,
# every term and its number (keywords are matched whole), the number of terms, the whole question as a pattern,
# the knowledge bases (empty: all), the documents (NULL: all) and the limit.
LOCATE_SQL = """
    WITH asked (term_no, token, text_match, need, term) AS (
        SELECT DISTINCT l.term_no, v.token, true, 1, NULL::text
        FROM unnest($1::int[], $2::text[]) AS l(term_no, pattern) JOIN locate_vocabulary v ON v.token LIKE l.pattern
        UNION ALL
        SELECT g.term_no, g.token, true, g.need, g.term
        FROM unnest($3::int[], $4::text[], $5::int[], $6::text[]) AS g(term_no, token, need, term)
        UNION ALL
        SELECT k.term_no, k.token, false, 1, NULL FROM unnest($7::int[], $8::text[]) AS k(term_no, token)
    ),
    hits AS (  -- a title, summary or keyword holding a term: one row a unit and term
        SELECT t.document_id, t.source, t.node_id, t.first_page, t.last_page, a.term_no,
               coalesce(bool_or(length(a.term) >= 3), false) AS check_text, min(a.term) AS term
        FROM asked a JOIN locate_terms t ON t.token = a.token AND (t.source IN (0, 2)) = a.text_match
            AND (cardinality($9::text[]) = 0 OR t.knowledge_base_id = ANY($9))
            AND ($10::text[] IS NULL OR t.document_id = ANY($10))
        GROUP BY 1, 2, 3, 4, 5, 6
        HAVING count(*) >= max(a.need)
    ),
    units AS (
        SELECT h.document_id, h.source IN (0, 1) AS is_node, h.node_id, h.first_page, h.last_page,
               count(*) FILTER (WHERE h.source IN (0, 2)) AS in_text,
               count(*) FILTER (WHERE h.source IN (1, 3)) AS in_keywords,
               CASE WHEN h.source IN (0, 1) AND count(*) FILTER (WHERE h.source IN (0, 2)) = $11 THEN (
                   SELECT n.title ILIKE $12 FROM pageindex_nodes n
                   WHERE n.document_id = h.document_id AND n.node_id = h.node_id
               ) ELSE false END AS exact  -- the whole question in the title (only a title holding every term can)
        FROM hits h
        WHERE NOT h.check_text OR position(h.term IN CASE WHEN h.source = 0
            THEN (SELECT n.title FROM pageindex_nodes n WHERE n.document_id = h.document_id AND n.node_id = h.node_id)
            ELSE (SELECT p.summary FROM pages p WHERE p.document_id = h.document_id AND p.page_index = h.first_page)
            END) > 0  -- a CJK term of three or more characters: its pairs found, the term itself checked
        GROUP BY 1, 2, 3, 4, 5
    ),
    scored AS (
        SELECT u.document_id, g.page_index,
               -- in double precision throughout: a node's score lent to its first pages at 1, 0.9 and 0.8
               max((u.in_text::float8 / $11
                 + CASE WHEN u.exact THEN 0.5::float8 ELSE 0::float8 END
                 + 0.3::float8 * u.in_keywords::float8 / $11)
                 * CASE g.page_index - u.first_page WHEN 0 THEN 1::float8 WHEN 1 THEN 0.9::float8 ELSE 0.8::float8 END
               ) FILTER (WHERE u.is_node) AS node_score,
               max(0.5::float8 * u.in_text::float8 / $11 + 0.3::float8 * u.in_keywords::float8 / $11)
                 FILTER (WHERE NOT u.is_node) AS page_score
        FROM units u,
            generate_series(u.first_page, CASE WHEN u.is_node THEN least(u.last_page, u.first_page + 2)
                ELSE u.first_page END) AS g(page_index)
        GROUP BY 1, 2
    )
    SELECT s.document_id, s.page_index, coalesce(s.node_score, 0) + coalesce(s.page_score, 0) AS score
    FROM scored s
    WHERE coalesce(s.node_score, 0) + coalesce(s.page_score, 0) > 0
    AND NOT EXISTS (  -- pages of published documents only (a document being ingested again, failed, deleted: none)
        SELECT 1 FROM documents d WHERE d.status <> 'published' AND d.document_id = s.document_id
    )
    AND NOT EXISTS (
        SELECT 1 FROM pages p WHERE p.is_toc AND p.document_id = s.document_id AND p.page_index = s.page_index
    )
    ORDER BY 3 DESC, 1, 2
    LIMIT $13
"""
LOCATE_TYPES = "int[], text[], int[], text[], int[], text[], int[], text[], text[], text[], int, text, int"
_CJK_TERM = re.compile(r"^[\u3400-\u9fff\uf900-\ufaff]+$")


def locate_parameters(
    terms: list[str], query: str, knowledge_base_ids: list[str] | None, limit: int, document_ids: list[str] | None
) -> tuple:
    """The parameters of ``LOCATE_SQL`` for these terms (``query_terms``) and the question.

    A term is in a title or summary as ``ILIKE '%term%'`` has it: a Latin term through the vocabulary's tokens that
    contain it, a Chinese one through its characters (one) or pairs of characters (all of them; a term of three or
    more characters is then checked in the text, since its pairs may stand apart). A keyword is matched whole.
    """
    latin = [(number, like_pattern(term.lower())) for number, term in enumerate(terms) if not _CJK_TERM.match(term)]
    grams: list[tuple[int, str, int, str]] = []
    for number, term in enumerate(terms):
        if _CJK_TERM.match(term):
            parts = sorted({term} if len(term) == 1 else {term[i : i + 2] for i in range(len(term) - 1)})
            grams += [(number, part, len(parts), term) for part in parts]
    return (
        [number for number, _ in latin],
        [pattern for _, pattern in latin],
        [g[0] for g in grams],
        [g[1] for g in grams],
        [g[2] for g in grams],
        [g[3] for g in grams],
        list(range(len(terms))),
        list(terms),
        list(knowledge_base_ids or []),
        None if document_ids is None else list(document_ids),
        len(terms),
        like_pattern(" ".join(query.split())),
        limit,
    )
