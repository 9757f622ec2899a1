"""The retrieval service's reads of the catalog: on the pooled read-only connections of ``reader()``, every
statement bounded by the statement timeout (pages by their words, page facts, published versions, BM25
statistics)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from kb_assets.stores.catalog.connection import CatalogConnection, one_row

if TYPE_CHECKING:
    from kb_assets.structure.metadata import DocumentMetadata

Statistics = dict[str, tuple[int, int, dict[str, int]]]  # kb -> (chunks, total length, term -> chunks holding it)
# BM25 statistics of what serves in knowledge bases ``{kbs}`` (an array or a subquery) for the terms %(terms)s, as
# JSON: the chunks and their total length in terms, and how many chunks hold each term
_TOTALS = (
    "SELECT json_agg(json_build_array(knowledge_base_id, chunks, length)) FROM (SELECT knowledge_base_id, "
    "sum(chunk_count) AS chunks, sum(term_count) AS length FROM documents WHERE knowledge_base_id = ANY({kbs}) "
    "AND published_version IS NOT NULL AND term_count IS NOT NULL AND status <> 'deleted' GROUP BY 1) totals"
)
_FREQUENCIES = (
    "SELECT json_agg(json_build_array(knowledge_base_id, term, chunks)) FROM knowledge_base_terms "
    "WHERE knowledge_base_id = ANY({kbs}) AND term = ANY(%(terms)s) AND chunks > 0"
)


def _statistics(totals: list | None, frequencies: list | None) -> Statistics:
    out: Statistics = {kb: (int(chunks or 0), int(length or 0), {}) for kb, chunks, length in totals or []}
    for kb, term, chunks in frequencies or []:
        if kb in out:
            out[kb][2][term] = int(chunks)
    return out


class ServingVersion(NamedTuple):
    """What search may serve of a document (its ``documents`` row): ``published_version`` (None: nothing), the
    current ``version``, ``status`` and ``error`` (a failed newer version: the last good one serves), ``term_count``
    (None: no BM25 statistics kept for what serves)."""

    published_version: str | None
    version: str | None
    status: str
    error: str | None
    term_count: int | None
    metadata: DocumentMetadata | None = None  # read from content (``published_versions``; not ``candidate_rows``)


@dataclass(frozen=True)
class PageFacts:
    """What search results need of a page (``page_facts``): its table-of-contents mark, its image's key, and its
    text where it was read (None: not read; a page always has one)."""

    is_toc: bool
    image_key: str | None
    text: str | None = None


@dataclass(frozen=True)
class MatchedPage:
    """A published page that holds some of a question's terms (``search_pages``: the page fallback)."""

    document_id: str
    knowledge_base_id: str
    document_title: str | None
    source_uri: str
    page_index: int
    page_label: str | None
    summary: str | None
    text: str
    image_key: str | None


@dataclass(frozen=True)
class LocatedRows:
    """The chunks of located pages (``located_chunk_terms``)."""

    counts: dict[str, tuple[str, str, int, dict[str, int]]]  # chunk id -> (document, kb, length, term -> occurrences)
    touching: int  # the chunks touching the pages, those holding no term too
    lacking: set[str]  # documents whose kept rows have no page ranges
    statistics: Statistics  # of the documents' knowledge bases, for the terms asked


@dataclass(frozen=True)
class CandidateRows:
    """What one search read of the catalog for its candidates (``candidate_rows``)."""

    versions: dict[str, ServingVersion]  # by document id
    term_counts: dict[str, tuple[int, dict[str, int]]]  # chunk id -> (length in terms, term -> occurrences)
    statistics: Statistics
    pages: dict[tuple[str, int], PageFacts]  # (document id, page index) -> its facts, without its text


class CatalogSearchReads(CatalogConnection):
    # retrieval (read-only, pooled connections) -------------------------------------------------
    def search_pages(self, terms: list[str], knowledge_base_ids: list[str] | None, limit: int) -> list[MatchedPage]:
        """Published pages ranked by how many of the terms they contain (substring match: works for Chinese).

        Ties go to pages whose summary holds more of the terms, then document order; table-of-contents
        pages (``pages.is_toc``) come after the others. Postgres full-text search has no
        Chinese parser and pg_trgm ignores CJK characters under the C locale, so this is a scan with
        ILIKE: fine for a fallback (~554 pages, a few ms), not for a primary search path.
        """
        if not terms:
            return []
        kb_filter = "AND d.knowledge_base_id = ANY(%(kbs)s)" if knowledge_base_ids else ""
        with self.reader() as conn, conn.cursor() as cur:
            cur.execute(
                f"""
                WITH terms AS (SELECT unnest(%(patterns)s::text[]) AS pattern)
                SELECT document_id, knowledge_base_id, document_title, source_uri, page_index, page_label, summary,
                       text, image_key
                FROM (
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
            return [MatchedPage(*row) for row in cur.fetchall()]

    def published_versions(self, document_ids: list[str]) -> dict[str, ServingVersion]:
        """What search may serve of these documents: ``published_version`` (None: nothing), and the
        current ``version``, ``status`` and ``error`` (a failed newer version means the last good one serves),
        ``term_count`` (None: no BM25 statistics kept for what serves) and ``metadata`` (read from content)."""
        if not document_ids:
            return {}
        with self.reader() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT document_id, published_version, version, status, error, term_count, metadata FROM documents "
                "WHERE document_id = ANY(%s)",
                (list(set(document_ids)),),
            )
            return {row[0]: ServingVersion(*row[1:]) for row in cur.fetchall()}

    def candidate_rows(
        self,
        document_ids: list[str],
        chunk_ids: list[str],
        terms: list[str],
        knowledge_base_ids: list[str],
        pages: list[tuple[str, int]],
    ) -> CandidateRows:
        """What a search's candidates need of the catalog, in one statement: the documents' rows (what may serve,
        ``published_versions``), the chunks' kept term counts for ``terms`` (``chunk_term_counts``), the knowledge
        bases' BM25 statistics for them (``term_statistics``) and the pages' table-of-contents marks and image
        keys (``page_facts`` without text)."""
        with self.reader() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT "
                "(SELECT json_agg(json_build_array(document_id, published_version, version, status, error, "
                "term_count)) FROM documents WHERE document_id = ANY(%(documents)s)), "
                "(SELECT json_agg(json_build_array(c.chunk_id, c.chunk_length, t.term, t.tf)) FROM chunk_terms c, "
                "unnest(c.terms, c.counts) AS t(term, tf) WHERE c.chunk_id = ANY(%(chunks)s) "
                "AND t.term = ANY(%(terms)s)), "
                f"({_TOTALS.format(kbs='%(kbs)s')}), ({_FREQUENCIES.format(kbs='%(kbs)s')}), "
                "(SELECT json_agg(json_build_array(p.document_id, p.page_index, p.is_toc, p.image_key)) FROM pages p "
                "JOIN unnest(%(page_documents)s::text[], %(page_indexes)s::int[]) AS w(document_id, page_index) "
                "USING (document_id, page_index))",
                {
                    "documents": sorted(set(document_ids)),
                    "chunks": list(chunk_ids),
                    "terms": list(terms),
                    "kbs": sorted(set(knowledge_base_ids)),
                    "page_documents": [d for d, _ in pages],
                    "page_indexes": [p for _, p in pages],
                },
            )
            documents, counts, totals, frequencies, facts = one_row(cur)
        term_counts: dict[str, tuple[int, dict[str, int]]] = {}
        for chunk_id, length, term, tf in counts or []:
            term_counts.setdefault(chunk_id, (length, {}))[1][term] = tf
        return CandidateRows(
            versions={row[0]: ServingVersion(*row[1:]) for row in documents or []},
            term_counts=term_counts,
            statistics=_statistics(totals, frequencies),
            pages={(d, i): PageFacts(toc, key) for d, i, toc, key in facts or []},
        )

    def knowledge_base_chunks(self) -> dict[str, int]:
        """Knowledge base -> chunks of its published documents."""
        with self.reader() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT knowledge_base_id, sum(chunk_count) FROM documents WHERE published_version IS NOT NULL "
                "AND status <> 'deleted' GROUP BY knowledge_base_id"
            )
            return {kb: int(chunks or 0) for kb, chunks in cur.fetchall()}

    def document_metadata(self, knowledge_base_ids: list[str] | None) -> dict[str, DocumentMetadata]:
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

    def located_chunk_terms(self, pages: list[tuple[str, int]], terms: list[str]) -> LocatedRows:
        """The chunks touching these (document_id, page_index) pages that hold any of ``terms``, the pages'
        documents whose kept rows have no page ranges (kept before they were, or none kept: this cannot answer for
        them), and the BM25 statistics of those documents' knowledge bases for ``terms``: one statement.

        A page's chunks are one range of ``chunk_terms_pages``: those starting at most the document's
        ``chunk_span`` pages before it (not every chunk of the document before the page)."""
        if not pages:
            return LocatedRows({}, 0, set(), {})
        with self.reader() as conn, conn.cursor() as cur:
            cur.execute(
                "WITH wanted AS (SELECT DISTINCT * FROM unnest(%(documents)s::text[], %(pages)s::int[]) "
                "AS w(document_id, page_index)), "
                "docs AS (SELECT document_id, knowledge_base_id, chunk_span FROM documents "
                "WHERE document_id = ANY(%(documents)s)), "
                "touching AS (SELECT DISTINCT ON (c.chunk_id) c.chunk_id, c.document_id, d.knowledge_base_id, "
                "c.chunk_length, c.terms, c.counts FROM wanted w JOIN docs d USING (document_id) "
                "JOIN chunk_terms c ON c.document_id = w.document_id AND c.page_index "
                "BETWEEN w.page_index - d.chunk_span AND w.page_index AND c.page_end >= w.page_index), "
                "found AS (SELECT c.chunk_id, c.document_id, c.knowledge_base_id, c.chunk_length, t.term, t.tf "
                "FROM touching c, unnest(c.terms, c.counts) AS t(term, tf) WHERE t.term = ANY(%(terms)s)) "
                "SELECT (SELECT json_agg(json_build_array(chunk_id, document_id, knowledge_base_id, chunk_length, "
                "term, tf)) FROM found), (SELECT count(*) FROM touching), "
                "(SELECT json_agg(document_id) FROM docs WHERE chunk_span IS NULL), "
                f"({_TOTALS.format(kbs='SELECT knowledge_base_id FROM docs')}), "
                f"({_FREQUENCIES.format(kbs='SELECT knowledge_base_id FROM docs')})",
                {"documents": [d for d, _ in pages], "pages": [p for _, p in pages], "terms": list(terms)},
            )
            found, touching, lacking, totals, frequencies = one_row(cur)
        counts: dict[str, tuple[str, str, int, dict[str, int]]] = {}
        for chunk_id, document_id, kb, length, term, tf in found or []:
            counts.setdefault(chunk_id, (document_id, kb, length, {}))[3][term] = tf
        return LocatedRows(counts, int(touching), set(lacking or []), _statistics(totals, frequencies))

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

    def page_facts(self, pages: list[tuple[str, int]], with_text: bool = False) -> dict[tuple[str, int], PageFacts]:
        """The facts of (document_id, page_index) pairs for search results (their ``text`` when asked)."""
        if not pages:
            return {}
        with self.reader() as conn, conn.cursor() as cur:
            cur.execute(
                f"SELECT p.document_id, p.page_index, p.is_toc, p.image_key, {'p.text' if with_text else 'NULL'} "
                "FROM pages p JOIN unnest(%s::text[], %s::int[]) AS wanted(document_id, page_index) "
                "USING (document_id, page_index)",
                ([d for d, _ in pages], [i for _, i in pages]),
            )
            return {(d, i): PageFacts(toc, key, text) for d, i, toc, key, text in cur.fetchall()}

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


def like_pattern(term: str) -> str:
    """An ILIKE pattern matching the term anywhere (its own % _ \\ taken literally)."""
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
