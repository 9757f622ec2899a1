"""Locating pages through the inverted index (``locate_terms``, issue 51): the same pages, in the same order and
with the same scores, as the substring scan it replaced (``ILIKE '%term%'`` over every title and summary, kept
below as the definition), for English, Chinese and short questions on the ingested sample corpus; the index
follows every write of pages and nodes (a summary changed, a document deleted leaves no entry behind) and is
built for a catalog made before it."""

from __future__ import annotations

import pytest

from kb_assets.retrieval.query import query_terms
from kb_assets.stores.catalog.search_reads import like_pattern

QUESTIONS = [
    "How long are backups kept?",
    "Retention Policy",
    "on-call rotation and escalation",
    "service catalog owners",
    "quarterly review revenue",
    "数据平台",  # a Chinese question: its words through their characters and pairs
    "数据平台的架构是什么",
    "io",  # too short for a word: the question is its own term, matched inside any word
    "Northwind Data Platform Handbook",  # a whole title: the exact-title bonus
    "laptop",
]


def scanned(catalog, terms: list[str], query: str, knowledge_base_ids: list[str] | None, limit: int) -> list:
    """The pages the substring scan located (the statement issue 51 replaced): the definition of the scores."""
    patterns = [like_pattern(t) for t in terms]
    kb_filter = "AND d.knowledge_base_id = ANY(%(kbs)s)" if knowledge_base_ids else ""
    sql = f"""
        WITH terms AS (SELECT unnest(%(patterns)s::text[]) AS pattern, unnest(%(terms)s::text[]) AS term),
        docs AS (SELECT document_id FROM documents d WHERE d.status = 'published' {kb_filter}),
        nodes AS (
            SELECT n.document_id, n.start_page, n.end_page,
                   (SELECT count(*) FROM terms WHERE n.title ILIKE terms.pattern)::float / %(n)s
                   + CASE WHEN n.title ILIKE %(exact)s THEN 0.5 ELSE 0 END
                   + 0.3 * (SELECT count(*) FROM terms WHERE terms.term = ANY(n.keywords))::float / %(n)s AS score
            FROM pageindex_nodes n JOIN docs USING (document_id) WHERE n.depth > 0
        ),
        node_pages AS (
            SELECT document_id, page_index, max(score * (1 - 0.1 * (page_index - start_page))) AS score
            FROM nodes, generate_series(start_page, least(end_page, start_page + 2)) AS page_index
            WHERE score > 0 GROUP BY document_id, page_index
        ),
        summary_pages AS (
            SELECT p.document_id, p.page_index,
                   0.5 * (SELECT count(*) FROM terms WHERE p.summary ILIKE terms.pattern)::float / %(n)s
                   + 0.3 * (SELECT count(*) FROM terms WHERE terms.term = ANY(p.keywords))::float / %(n)s AS score
            FROM pages p JOIN docs USING (document_id)
        ),
        scored AS (
            SELECT document_id, page_index, sum(score) AS score
            FROM (SELECT * FROM node_pages UNION ALL SELECT * FROM summary_pages) both_sources GROUP BY 1, 2
        )
        SELECT s.document_id, s.page_index, s.score FROM scored s JOIN pages p USING (document_id, page_index)
        WHERE s.score > 0 AND NOT p.is_toc ORDER BY s.score DESC, s.document_id, s.page_index LIMIT %(limit)s
    """
    params = {
        "patterns": patterns,
        "terms": terms,
        "n": len(terms),
        "exact": like_pattern(" ".join(query.split())),
        "kbs": list(knowledge_base_ids or []),
        "limit": limit,
    }
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute(sql, params)
        return [(d, p, round(s, 9)) for d, p, s in cur.fetchall()]


def indexed(catalog, terms, query, knowledge_base_ids, limit, documents=None) -> list:
    pages = catalog.locate_pages(terms, query, knowledge_base_ids, limit, documents)
    return [(p.document_id, p.page_index, round(p.score, 9)) for p in pages]


@pytest.mark.parametrize("question", QUESTIONS)
def test_the_index_locates_the_pages_a_substring_scan_locates(catalog, handbook, question):
    terms = query_terms(question)
    expected = scanned(catalog, terms, question, ["handbook"], 50)
    assert expected, f"the scan locates nothing for {question!r}: the comparison would check nothing"
    assert indexed(catalog, terms, question, ["handbook"], 50) == expected
    assert indexed(catalog, terms, question, None, 50) == scanned(catalog, terms, question, None, 50)


def test_a_scope_keeps_only_its_documents(catalog, handbook):
    terms = query_terms("data platform retention")
    everywhere = indexed(catalog, terms, "data platform retention", ["handbook"], 50)
    first = everywhere[0][0]
    assert {d for d, _, _ in everywhere} != {first}
    assert indexed(catalog, terms, "data platform retention", ["handbook"], 50, [first]) == [
        row for row in everywhere if row[0] == first
    ]


def entries(catalog, document_id: str) -> set[tuple]:
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT token, source, node_id, first_page, last_page FROM locate_terms WHERE document_id = %s",
            (document_id,),
        )
        return set(cur.fetchall())


def test_the_index_follows_writes_of_pages_and_nodes_and_a_deleted_document_leaves_no_entry(catalog):
    document_id = "locate-index-doc"
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute(
            "INSERT INTO documents (document_id, knowledge_base_id, source_path, source_uri, source_root, status) "
            "VALUES (%s, 'locate-kb', 'a.md', '/x/a.md', '/x', 'published') ON CONFLICT DO NOTHING",
            (document_id,),
        )
    page = {"text": "t", "blocks": [], "parser": "p", "mode": "m"}
    with catalog.connect() as conn:
        catalog.replace_pages(
            conn,
            document_id,
            "v1",
            [
                {**page, "page_index": 0, "summary": "Tape rotation schedule", "keywords": ["tape"]},
                {**page, "page_index": 1},
            ],
            "run",
        )
        catalog.replace_nodes(
            conn,
            document_id,
            "v1",
            [
                {
                    "node_id": "root",
                    "parent_id": None,
                    "ordinal": 0,
                    "title": "Doc",
                    "depth": 0,
                    "start_page": 0,
                    "end_page": 1,
                },
                {
                    "node_id": "n1",
                    "parent_id": "root",
                    "ordinal": 1,
                    "title": "Backups 备份策略",
                    "depth": 1,
                    "start_page": 1,
                    "end_page": 1,
                },
            ],
            "run",
        )
    made = entries(catalog, document_id)
    assert ("rotation", 2, None, 0, 0) in made and ("tape", 3, None, 0, 0) in made  # a summary's word, a keyword
    assert {("backups", 0, "n1", 1, 1), ("备份", 0, "n1", 1, 1), ("备", 0, "n1", 1, 1)} <= made  # a title's
    assert not any(node == "root" for _, _, node, _, _ in made)  # the root locates nothing
    # every term in the title (1) and the whole question in it (0.5)
    assert indexed(catalog, ["backups"], "backups", ["locate-kb"], 10) == [(document_id, 1, 1.5)]
    assert indexed(catalog, ["备份"], "备份", ["locate-kb"], 10) == [(document_id, 1, 1.5)]
    assert indexed(catalog, ["备份", "策略"], "策略 备份", ["locate-kb"], 10) == [(document_id, 1, 1.0)]

    with catalog.connect() as conn:  # pageindex_trees sets summaries again: the old words go, the new come
        catalog.update_page_structure(
            conn,
            document_id,
            [{"page_index": 0, "summary": "Disk snapshots", "keywords": [], "is_toc": False, "text_sha": "s"}],
        )
    changed = entries(catalog, document_id)
    assert ("snapshots", 2, None, 0, 0) in changed
    assert not {e for e in changed if e[0] in ("rotation", "tape")}
    assert indexed(catalog, ["rotation"], "rotation", ["locate-kb"], 10) == []

    catalog.mark_deleted(document_id, None)
    assert entries(catalog, document_id) == set()
    assert indexed(catalog, ["snapshots"], "snapshots", ["locate-kb"], 10) == []


def test_a_catalog_made_before_the_index_is_indexed_once(catalog, handbook):
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT token, document_id, source, node_id, first_page, last_page FROM locate_terms")
        before = sorted(cur.fetchall())
        cur.execute("DROP TABLE locate_terms")
    catalog._schema_applied = False
    catalog.ensure_schema()
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT token, document_id, source, node_id, first_page, last_page FROM locate_terms")
        assert sorted(cur.fetchall()) == before


def test_verify_finds_a_damaged_locating_index_and_repair_makes_it_again(
    catalog, lake, milvus_client, settings, handbook
):
    from kb_assets.pipeline.verify import verify

    document_id = indexed(catalog, query_terms("Retention Policy"), "Retention Policy", ["handbook"], 1)[0][0]
    before = entries(catalog, document_id)
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute("DELETE FROM locate_terms WHERE document_id = %s AND source = 0", (document_id,))
        cur.execute(
            "INSERT INTO locate_terms SELECT knowledge_base_id, 'stray', document_id, 2, NULL, 0, 0 FROM documents "
            "WHERE document_id = %s",
            (document_id,),
        )
    report = verify(catalog, lake, milvus_client, settings.alias)
    said = [p for p in report.problems if p.document_id == document_id and "locating index" in p.problem]
    assert said and not report.consistent, report.problems
    verify(catalog, lake, milvus_client, settings.alias, repair=True)
    assert entries(catalog, document_id) == before
    assert verify(catalog, lake, milvus_client, settings.alias).consistent
