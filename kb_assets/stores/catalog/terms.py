"""BM25 statistics kept in the catalog (``kb_assets/lib/lexical.py``): each serving chunk's term counts
(``chunk_terms``) and, per knowledge base, how many of its chunks hold each term
(``knowledge_base_terms``). A document's publish or deletion changes both in its own transaction: its old
chunks' terms are subtracted, its new ones added, under a per-knowledge-base advisory lock (so that two
writers never wait on each other's term rows in opposite orders). One row per knowledge base and term,
not per document and term: 17 KB a one-page note before (issue 33). ``term_drift`` / ``rebuild_terms``
compare and rebuild the per-knowledge-base counts from ``chunk_terms`` (``kb-assets verify``)."""

from __future__ import annotations

from collections import Counter

import psycopg2.extras

from kb_assets.stores.catalog.connection import CatalogConnection, one_row

MAX_TERM_CHARS = 200  # longer terms are not kept (a btree key holds at most ~2,700 bytes)
# how many chunks of each knowledge base hold each term, from ``chunk_terms`` (``{where}``: which knowledge bases)
_HELD_TERMS = (
    "SELECT d.knowledge_base_id, t.term, count(*) AS chunks FROM chunk_terms c JOIN documents d USING (document_id), "
    "unnest(c.terms) AS t(term) {where} GROUP BY 1, 2"
)
_LOCK_TERMS = "SELECT pg_advisory_xact_lock(hashtext('knowledge_base_terms'), hashtext(%s))"  # a knowledge base's


class CatalogTerms(CatalogConnection):
    def replace_chunk_terms(self, conn, document_id: str, chunks: list) -> None:
        """Replace a document's BM25 statistics, in the caller's transaction: its chunks' term counts
        (``lexical.ChunkTerms``), its knowledge base's chunks holding each term, and the chunks' total
        length as its ``term_count``. Terms longer than ``MAX_TERM_CHARS`` (a run of symbols, a long URL)
        count towards a chunk's length but are not kept."""
        rows: list[tuple] = []
        holding: Counter[str] = Counter()
        for chunk in chunks:
            kept = {term: tf for term, tf in chunk.counts.items() if len(term) <= MAX_TERM_CHARS and "\x00" not in term}
            first, last = chunk.pages or (None, None)
            rows.append((chunk.chunk_id, document_id, chunk.length, list(kept), list(kept.values()), first, last))
            holding.update(kept.keys())
        with conn.cursor() as cur:
            knowledge_base_id = self._lock_terms(cur, document_id)
            change = holding.copy()
            change.subtract(self._drop_chunk_terms(cur, document_id))
            psycopg2.extras.execute_values(
                cur,
                "INSERT INTO chunk_terms (chunk_id, document_id, chunk_length, terms, counts, page_index, page_end) "
                "VALUES %s",
                rows,
                template="(%s, %s, %s, %s::text[], %s::integer[], %s, %s)",
                page_size=500,
            )
            self._count_terms(cur, knowledge_base_id, change)
            spans = [chunk.pages[1] - chunk.pages[0] for chunk in chunks if chunk.pages]
            cur.execute(
                "UPDATE documents SET term_count = %s, chunk_span = %s, updated_at = now() WHERE document_id = %s",
                (sum(chunk.length for chunk in chunks), max(spans) if spans else None, document_id),
            )

    def remove_chunk_terms(self, conn, document_id: str) -> None:
        """Remove a document's BM25 statistics (a deleted document), in the caller's transaction."""
        with conn.cursor() as cur:
            knowledge_base_id = self._lock_terms(cur, document_id)
            gone = self._drop_chunk_terms(cur, document_id)
            self._count_terms(cur, knowledge_base_id, Counter({term: -n for term, n in gone.items()}))

    @staticmethod
    def _lock_terms(cur, document_id: str) -> str:
        """The document's knowledge base, its term counts locked until the transaction ends."""
        cur.execute("SELECT knowledge_base_id FROM documents WHERE document_id = %s", (document_id,))
        knowledge_base_id = one_row(cur)[0]
        cur.execute(_LOCK_TERMS, (knowledge_base_id,))
        return knowledge_base_id

    @staticmethod
    def _drop_chunk_terms(cur, document_id: str) -> Counter[str]:
        """Delete a document's ``chunk_terms``: how many of its chunks held each term."""
        cur.execute(
            "SELECT t.term, count(*) FROM chunk_terms c, unnest(c.terms) AS t(term) WHERE c.document_id = %s "
            "GROUP BY t.term",
            (document_id,),
        )
        held = Counter(dict(cur.fetchall()))
        cur.execute("DELETE FROM chunk_terms WHERE document_id = %s", (document_id,))
        return held

    @staticmethod
    def _count_terms(cur, knowledge_base_id: str, change: Counter[str]) -> None:
        """Add ``change`` (chunks holding each term, more or fewer) to the knowledge base's counts; terms no
        chunk holds any more are removed."""
        changed = sorted((term, n) for term, n in change.items() if n)
        if not changed:
            return
        cur.execute(
            "INSERT INTO knowledge_base_terms (knowledge_base_id, term, chunks) "
            "SELECT %s, t.term, t.chunks FROM unnest(%s::text[], %s::integer[]) AS t(term, chunks) "
            "ON CONFLICT (knowledge_base_id, term) DO UPDATE "
            "SET chunks = knowledge_base_terms.chunks + EXCLUDED.chunks",
            (knowledge_base_id, [t for t, _ in changed], [n for _, n in changed]),
        )
        fewer = [term for term, n in changed if n < 0]
        if fewer:
            cur.execute(
                "DELETE FROM knowledge_base_terms WHERE knowledge_base_id = %s AND term = ANY(%s) AND chunks <= 0",
                (knowledge_base_id, fewer),
            )

    # reading and checking ------------------------------------------------------------------------
    def term_statistics(
        self, terms: list[str], knowledge_base_ids: list[str]
    ) -> dict[str, tuple[int, int, dict[str, int]]]:
        """BM25 statistics of what serves in each knowledge base: (chunks, their total length in terms,
        term -> chunks holding it) for the asked ``terms`` (a term held by none is left out)."""
        if not knowledge_base_ids:
            return {}
        with self.reader() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT knowledge_base_id, sum(chunk_count), sum(term_count) FROM documents "
                "WHERE knowledge_base_id = ANY(%s) AND published_version IS NOT NULL "
                "AND term_count IS NOT NULL AND status <> 'deleted' GROUP BY knowledge_base_id",
                (list(knowledge_base_ids),),
            )
            out: dict[str, tuple[int, int, dict[str, int]]] = {
                kb: (int(chunks or 0), int(length or 0), {}) for kb, chunks, length in cur.fetchall()
            }
            if terms:
                cur.execute(
                    "SELECT knowledge_base_id, term, chunks FROM knowledge_base_terms "
                    "WHERE knowledge_base_id = ANY(%s) AND term = ANY(%s) AND chunks > 0",
                    (list(knowledge_base_ids), list(terms)),
                )
                for kb, term, chunks in cur.fetchall():
                    if kb in out:
                        out[kb][2][term] = int(chunks)
            return out

    def term_drift(self) -> dict[str, int]:
        """Knowledge base -> how many of its terms' counts differ from what its ``chunk_terms`` hold (none
        listed when they agree)."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                f"WITH held AS ({_HELD_TERMS.format(where='')}) "
                "SELECT coalesce(h.knowledge_base_id, k.knowledge_base_id), count(*) FROM held h "
                "FULL JOIN knowledge_base_terms k USING (knowledge_base_id, term) "
                "WHERE h.chunks IS DISTINCT FROM k.chunks GROUP BY 1"
            )
            return {kb: int(n) for kb, n in cur.fetchall()}

    def rebuild_terms(self, knowledge_base_id: str) -> None:
        """Count a knowledge base's terms again from its ``chunk_terms``."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(_LOCK_TERMS, (knowledge_base_id,))
            cur.execute("DELETE FROM knowledge_base_terms WHERE knowledge_base_id = %s", (knowledge_base_id,))
            cur.execute(
                "INSERT INTO knowledge_base_terms (knowledge_base_id, term, chunks) "
                + _HELD_TERMS.format(where="WHERE d.knowledge_base_id = %s"),
                (knowledge_base_id,),
            )
