"""A knowledge base's BM25 term counts (``knowledge_base_terms``, ``stores/catalog/terms.py``) kept right on real
Postgres while writers publish, replace and delete documents of one knowledge base at the same time: no
deadlock, and every count equals what the chunks left hold."""

from __future__ import annotations

import random
import threading
from collections import Counter

from kb_assets.lib.lexical import ChunkTerms

KB = "term-counts"
WORDS = [f"w{n}" for n in range(40)]


def register(catalog, document_id: str) -> None:
    with catalog.connect() as conn:
        catalog.register_document(
            conn,
            document_id=document_id,
            knowledge_base_id=KB,
            source_root="/term-counts",
            source_path=f"{document_id}.md",
            source_uri=f"file:///term-counts/{document_id}.md",
            version="v1",
            size_bytes=1,
        )


def chunks_of(document_id: str, rng: random.Random) -> list[ChunkTerms]:
    out = []
    for index in range(rng.randint(1, 4)):
        counts = Counter(rng.choices(WORDS, k=rng.randint(1, 12)))
        out.append(ChunkTerms(f"{document_id}-c{index}", counts, sum(counts.values()), (index, index)))
    return out


def test_writers_of_one_knowledge_base_keep_its_term_counts_those_of_its_chunks(catalog):
    documents = [f"tc-{n}" for n in range(12)]
    for document_id in documents:
        register(catalog, document_id)
    last: dict[str, list[ChunkTerms]] = {}
    errors: list[BaseException] = []

    def writer(number: int) -> None:
        rng = random.Random(number)
        mine = documents[number::4]
        try:
            for _ in range(15):
                document_id = rng.choice(mine)
                with catalog.connect() as conn:
                    if rng.random() < 0.25:
                        catalog.remove_chunk_terms(conn, document_id)
                        last[document_id] = []
                    else:
                        chunks = chunks_of(document_id, rng)
                        catalog.replace_chunk_terms(conn, document_id, chunks)
                        last[document_id] = chunks
        except BaseException as error:  # noqa: BLE001 - reported by the test thread
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors and not any(thread.is_alive() for thread in threads)

    assert KB not in catalog.term_drift()
    held: Counter[str] = Counter()
    for chunks in last.values():
        for chunk in chunks:
            held.update(chunk.counts.keys())
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT term, chunks FROM knowledge_base_terms WHERE knowledge_base_id = %s", (KB,))
        assert dict(cur.fetchall()) == dict(held)  # no row for a term nobody holds
        cur.execute("UPDATE knowledge_base_terms SET chunks = chunks + 1 WHERE knowledge_base_id = %s", (KB,))
    assert catalog.term_drift()[KB] == len(held)  # a damaged count is found ...
    catalog.rebuild_terms(KB)
    assert KB not in catalog.term_drift()  # ... and counted again from the chunks
    for document_id in documents:  # leave nothing for later tests' statistics
        with catalog.connect() as conn:
            catalog.remove_chunk_terms(conn, document_id)
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM knowledge_base_terms WHERE knowledge_base_id = %s", (KB,))
        assert cur.fetchone() == (0,)
        cur.execute("DELETE FROM documents WHERE knowledge_base_id = %s", (KB,))


def test_a_catalog_that_kept_counts_per_document_has_them_counted_per_knowledge_base_once(catalog):
    register(catalog, "tc-old")
    chunks = [ChunkTerms("tc-old-c0", Counter({"w1": 2, "w2": 1}), 3), ChunkTerms("tc-old-c1", Counter({"w1": 1}), 1)]
    with catalog.connect() as conn:
        catalog.replace_chunk_terms(conn, "tc-old", chunks)
    with catalog.connect() as conn, conn.cursor() as cur:  # the catalog as an earlier release left it
        cur.execute("DELETE FROM knowledge_base_terms WHERE knowledge_base_id = %s", (KB,))
        cur.execute("CREATE TABLE document_terms (document_id text, term text, chunks integer)")
    assert catalog.term_drift()[KB] == 2
    catalog._schema_applied = False
    catalog.ensure_schema()  # what the next process does first
    assert KB not in catalog.term_drift()
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT term, chunks FROM knowledge_base_terms WHERE knowledge_base_id = %s", (KB,))
        assert dict(cur.fetchall()) == {"w1": 2, "w2": 1}
        cur.execute("SELECT to_regclass('document_terms')")
        assert cur.fetchone() == (None,)
    with catalog.connect() as conn:
        catalog.remove_chunk_terms(conn, "tc-old")
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute("DELETE FROM documents WHERE knowledge_base_id = %s", (KB,))
