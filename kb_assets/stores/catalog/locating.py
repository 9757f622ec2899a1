"""The locating index (``locate_terms``, ``sql/schema.sql``, issue 51): pages located by the words of their
PageIndex nodes' titles, their summaries and keywords, read through an inverted index instead of a filter over
every page; and what ``kb-assets verify`` checks of it (its entries against the pages and nodes they are made
from) and repairs."""

from __future__ import annotations

import re
from typing import NamedTuple

import psycopg2.errors

from kb_assets.stores.catalog.connection import CatalogConnection
from kb_assets.stores.catalog.search_reads import like_pattern


class LocatedPage(NamedTuple):
    """A page located for a question (``locate_pages``), or routed to by its analyses (score 0)."""

    document_id: str
    page_index: int
    score: float


class CatalogLocating(CatalogConnection):
    def locate_pages(
        self,
        terms: list[str],
        query: str,
        knowledge_base_ids: list[str] | None,
        limit: int,
        document_ids: list[str] | None = None,
    ) -> list[LocatedPage]:
        """Pages most likely to answer a query, best first.

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
        with self.reader() as conn, conn.cursor() as cur:
            try:
                cur.execute(execute, params)
            except psycopg2.errors.InvalidSqlStatementName:  # this connection's first: prepared once (autocommit)
                cur.execute(f"PREPARE kb_locate ({LOCATE_TYPES}) AS {LOCATE_SQL}")
                cur.execute(execute, params)
            return [LocatedPage(*row) for row in cur.fetchall()]

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
    WITH asked (token, text_match, bit) AS (  -- each index token a term matches, with the term's bit
        SELECT DISTINCT v.token, true, l.bit
        FROM unnest($1::bigint[], $2::text[]) AS l(bit, pattern) JOIN locate_vocabulary v ON v.token LIKE l.pattern
        UNION ALL
        SELECT g.token, true, g.bit FROM unnest($3::bigint[], $4::text[]) AS g(bit, token)
        UNION ALL
        SELECT k.token, false, k.bit FROM unnest($5::bigint[], $6::text[]) AS k(bit, token)
    ),
    units AS (  -- a node's title and keywords, or a page's summary and keywords: the bits of the terms they hold
        SELECT t.document_id, t.source IN (0, 1) AS is_node, t.node_id, t.first_page, t.last_page,
               coalesce(bit_or(a.bit) FILTER (WHERE a.text_match), 0) AS text_bits,
               coalesce(bit_or(a.bit) FILTER (WHERE NOT a.text_match), 0) AS keyword_bits
        FROM asked a JOIN locate_terms t ON t.token = a.token AND (t.source IN (0, 2)) = a.text_match
            AND (cardinality($9::text[]) = 0 OR t.knowledge_base_id = ANY($9))
            AND ($10::text[] IS NULL OR t.document_id = ANY($10))
        GROUP BY 1, 2, 3, 4, 5
    ),
    counted AS (  -- how many terms each holds: a Latin term by its bit, a CJK term by all its pairs' bits
        SELECT u.document_id, u.is_node, u.node_id, u.first_page, u.last_page,
               bit_count((u.text_bits & $11)::bit(64)) + CASE WHEN cardinality($7::bigint[]) = 0 THEN 0 ELSE (
                   SELECT count(*) FROM unnest($7::bigint[], $8::text[]) AS c(mask, term)
                   WHERE u.text_bits & c.mask = c.mask AND (length(c.term) < 3 OR position(c.term IN CASE
                       WHEN u.is_node THEN (SELECT n.title FROM pageindex_nodes n
                           WHERE n.document_id = u.document_id AND n.node_id = u.node_id)
                       ELSE (SELECT p.summary FROM pages p
                           WHERE p.document_id = u.document_id AND p.page_index = u.first_page)
                       END) > 0)  -- a term of three or more characters: its pairs found, the term itself checked
               ) END AS in_text,
               bit_count(u.keyword_bits::bit(64)) AS in_keywords
        FROM units u
    ),
    scored AS (
        SELECT c.document_id, g.page_index,
               -- in double precision throughout: a node's score lent to its first pages at 1, 0.9 and 0.8
               max((c.in_text::float8 / $12
                 + CASE WHEN c.in_text = $12 AND (  -- the whole question in the title (only one holding every term)
                     SELECT n.title ILIKE $13 FROM pageindex_nodes n
                     WHERE n.document_id = c.document_id AND n.node_id = c.node_id
                   ) THEN 0.5::float8 ELSE 0::float8 END
                 + 0.3::float8 * c.in_keywords::float8 / $12)
                 * CASE g.page_index - c.first_page WHEN 0 THEN 1::float8 WHEN 1 THEN 0.9::float8 ELSE 0.8::float8 END
               ) FILTER (WHERE c.is_node AND c.in_text + c.in_keywords > 0) AS node_score,
               max(0.5::float8 * c.in_text::float8 / $12 + 0.3::float8 * c.in_keywords::float8 / $12)
                 FILTER (WHERE NOT c.is_node) AS page_score
        FROM counted c,
            generate_series(c.first_page, CASE WHEN c.is_node THEN least(c.last_page, c.first_page + 2)
                ELSE c.first_page END) AS g(page_index)
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
    LIMIT $14
"""
LOCATE_TYPES = (
    "bigint[], text[], bigint[], text[], bigint[], text[], bigint[], text[], text[], text[], bigint, int, text, int"
)
_CJK_TERM = re.compile(r"^[\u3400-\u9fff\uf900-\ufaff]+$")
MAX_TERMS = 20  # query_terms gives at most 20 (bits 0-19); the pairs of Chinese terms take the bits after them


def locate_parameters(
    terms: list[str], query: str, knowledge_base_ids: list[str] | None, limit: int, document_ids: list[str] | None
) -> tuple:
    """The parameters of ``LOCATE_SQL`` for these terms (``query_terms``) and the question.

    A term is in a title or summary as ``ILIKE '%term%'`` has it: a Latin term through the vocabulary's tokens that
    contain it, a Chinese one through its characters (one) or pairs of characters (all of them; a term of three or
    more characters is then checked in the text, since its pairs may stand apart). A keyword is matched whole.
    Each term has a bit (a Chinese term's pairs one each: at most ``64 - MAX_TERMS`` pairs in all; the terms
    past them are not looked for), the bits a title, summary or keyword set are counted.
    """
    terms = terms[:MAX_TERMS]
    latin: list[tuple[int, str]] = []
    grams: list[tuple[int, str]] = []
    cjk: list[tuple[int, str]] = []
    next_bit = MAX_TERMS
    for number, term in enumerate(terms):
        if not _CJK_TERM.match(term):
            latin.append((1 << number, like_pattern(term.lower())))
            continue
        parts = sorted({term} if len(term) == 1 else {term[i : i + 2] for i in range(len(term) - 1)})
        if next_bit + len(parts) > 63:
            continue
        mask = 0
        for part in parts:
            grams.append((1 << next_bit, part))
            mask |= 1 << next_bit
            next_bit += 1
        cjk.append((mask, term))
    return (
        [bit for bit, _ in latin],
        [pattern for _, pattern in latin],
        [bit for bit, _ in grams],
        [gram for _, gram in grams],
        [1 << number for number in range(len(terms))],
        list(terms),
        [mask for mask, _ in cjk],
        [term for _, term in cjk],
        list(knowledge_base_ids or []),
        None if document_ids is None else list(document_ids),
        sum(bit for bit, _ in latin),
        len(terms),
        like_pattern(" ".join(query.split())),
        limit,
    )
