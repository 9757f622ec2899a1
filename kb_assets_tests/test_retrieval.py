"""Contract tests of search (the README's search and API sections) on real Milvus Lite, Postgres and the model:
the hybrid formula, min score, limit, one global top-k over two knowledge bases, degraded modes,
page fallback, the language policy, the pageindex strategy, filter injection and the eval command."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import numpy as np
import psycopg2
import pytest
from click.testing import CliRunner
from pymilvus import DataType, Function, FunctionType

from kb_assets.retrieval.evaluation import answer_in, returned_text
from kb_assets.retrieval.overlap import units
from kb_assets.retrieval.query import dense_query_text, keyword_overlap, query_terms
from kb_assets.retrieval.search import Searcher, SearchRequest, SearchResponse
from kb_assets.settings import SearchConfig, Weights
from kb_assets.stores.catalog.locating import LOCATE_SQL, LOCATE_TYPES, locate_parameters
from kb_assets.stores.vectors import (
    BM25_ANALYZER,
    INT_FIELDS,
    OUTPUT_FIELDS,
    SCALAR_FIELDS,
    collection_spec,
)
from kb_assets_tests.conftest import FROZEN_CLIENT_TIMEOUT_S
from kb_assets_tests.corpora import INJECTIONS, ensure_retrieval_corpus


@pytest.fixture(scope="module")
def corpus(kb_home, settings):
    ensure_retrieval_corpus(kb_home, settings)


@pytest.fixture(scope="module")
def kb_searcher(settings, corpus):
    from kb_assets.service.api import make_searcher

    searcher = make_searcher(settings, SearchConfig(strategy="hybrid"))
    yield searcher
    searcher.close()


def _variant(searcher: Searcher, **changes) -> Searcher:
    """A searcher on the same client, catalog and alias with other settings (``collection``: searching that
    collection instead of the published one)."""
    collection = changes.pop("collection", None)
    return Searcher(
        searcher.client,
        searcher.catalog,
        searcher.alias,
        searcher.load_model,
        replace(searcher.config, **changes),
        collection=collection,
    )


def _formula(row: dict, weights: Weights, dense_share: float = 1.0) -> float:
    scores = row["scores"]
    dense_weight = weights.dense * dense_share
    lexical_weight = weights.lexical + weights.dense * (1 - dense_share)
    return dense_weight * (scores["dense"] or 0.0) + lexical_weight * (scores["lexical"] or 0.0) + scores["exactBoost"]


def test_hybrid_score_is_weighted_dense_plus_normalized_bm25_plus_exact_boost(kb_searcher):
    response = kb_searcher.search(SearchRequest("How long are backups kept?", ["alpha", "beta"], limit=50))
    rows = response.results
    assert rows and response.warnings == []
    for row in rows:
        assert row["retrievalSource"] == "hybrid"
        assert row["scores"]["dense"] is not None  # BM25-only hits get it from their vector
        assert row["scores"]["lexical"] is not None and 0.0 <= row["scores"]["lexical"] <= 1.0
        assert row["scores"]["exactBoost"] in (0.0, 0.05)
        assert row["score"] == pytest.approx(_formula(row, Weights()), abs=2e-6)
    assert max(r["scores"]["lexical"] for r in rows) == 1.0  # normalized by the best BM25 score
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)

    weights = Weights(dense=0.5, lexical=0.5, exact_boost=0.2)
    reweighted = _variant(kb_searcher, weights=weights).search(SearchRequest("kept for 35 days", ["alpha"], limit=50))
    for row in reweighted.results:
        assert row["score"] == pytest.approx(_formula(row, weights), abs=2e-6)
        assert (row["scores"]["exactBoost"] == 0.2) == ("kept for 35 days" in " ".join(row["content"].split()))
    assert any(r["scores"]["exactBoost"] == 0.2 for r in reweighted.results)


def test_a_candidate_found_by_one_search_only_gets_the_other_score_computed_or_says_so(kb_searcher, milvus_client):
    from kb_assets.embedding.model import EmbeddingModel  # noqa: F401  (the loader below returns one)

    query = "backups kept every quarter"
    collection, spec = kb_searcher.published()
    flt = 'knowledge_base_id == "alpha"'
    vector = kb_searcher.load_model(spec["model"]).encode([query])[0]

    # with Milvus's BM25 scores (the statistics kept in Postgres give every candidate one: test_lexical_statistics)
    narrow = _variant(kb_searcher, candidates=2, kept_bm25_statistics=False)
    rows = narrow.candidates(SearchRequest(query, ["alpha"], limit=2), SearchResponse())
    bm25_ids = {
        h.id
        for h in milvus_client.search(
            collection, data=[query], anns_field="sparse", limit=2, filter=flt, search_params={"metric_type": "BM25"}
        )[0]
    }
    dense_ids = {
        h.id
        for h in milvus_client.search(
            collection,
            data=[vector.tolist()],
            anns_field="dense",
            limit=2,
            filter=flt,
            search_params={"metric_type": "COSINE"},
        )[0]
    }
    assert len(bm25_ids) == 2 and {r["chunkId"] for r in rows} == bm25_ids | dense_ids
    stored = {
        r["chunk_id"]: np.asarray(r["dense"], dtype=np.float32)
        for r in milvus_client.get(collection, ids=list(bm25_ids | dense_ids), output_fields=["dense"])
    }
    for row in rows:
        if row["chunkId"] not in dense_ids:  # BM25 only: dense computed from the stored vector
            assert row["scores"]["dense"] == pytest.approx(float(stored[row["chunkId"]] @ vector), abs=1e-5)
        if row["chunkId"] not in bm25_ids:  # dense only, BM25 cut off at 2 hits: not computed
            assert row["scores"]["lexical"] is None

    kept = _variant(kb_searcher, candidates=2).candidates(SearchRequest(query, ["alpha"], limit=2), SearchResponse())
    assert {r["chunkId"] for r in kept} == {r["chunkId"] for r in rows}
    assert all(r["scores"]["lexical"] is not None for r in kept)

    milvus = _variant(kb_searcher, kept_bm25_statistics=False)
    wide = milvus.candidates(SearchRequest(query, ["alpha"], limit=10), SearchResponse())
    all_bm25 = {
        h.id
        for h in milvus_client.search(
            collection, data=[query], anns_field="sparse", limit=50, filter=flt, search_params={"metric_type": "BM25"}
        )[0]
    }
    assert len(all_bm25) < 50  # BM25 exhausted: every other chunk shares no word, lexical 0
    assert all(r["scores"]["lexical"] == 0.0 for r in wide if r["chunkId"] not in all_bm25)


def test_min_score_drops_lower_results_and_then_no_page_fallback(kb_searcher):
    everything = kb_searcher.search(SearchRequest("encryption key rotation", ["alpha"], limit=50)).results
    threshold = everything[len(everything) // 2]["score"]
    kept = kb_searcher.search(SearchRequest("encryption key rotation", ["alpha"], limit=50, min_score=threshold))
    assert [r["chunkId"] for r in kept.results] == [r["chunkId"] for r in everything if r["score"] >= threshold]

    none = kb_searcher.search(SearchRequest("encryption key rotation", ["alpha"], limit=50, min_score=10.0))
    assert none.results == [] and not any("fallback" in w for w in none.warnings)


def test_limit_is_one_global_top_k_over_knowledge_bases_searched_each_and_deduped(kb_searcher):
    query = "How long are backups kept?"
    merged = kb_searcher.search(SearchRequest(query, ["alpha", "beta"], limit=50)).results
    assert {r["knowledgeBaseId"] for r in merged} == {"alpha", "beta"}
    assert len({r["chunkId"] for r in merged}) == len(merged)
    for kb in ("alpha", "beta"):  # each knowledge base searched on its own, then merged
        alone = kb_searcher.search(SearchRequest(query, [kb], limit=50)).results
        assert {r["chunkId"] for r in merged if r["knowledgeBaseId"] == kb} == {r["chunkId"] for r in alone}

    top3 = kb_searcher.search(SearchRequest(query, ["alpha", "beta"], limit=3)).results
    assert [r["chunkId"] for r in top3] == [r["chunkId"] for r in merged[:3]]
    twice = kb_searcher.search(SearchRequest(query, ["alpha", "beta", "alpha"], limit=3)).results
    assert [r["chunkId"] for r in twice] == [r["chunkId"] for r in top3]
    every = kb_searcher.search(SearchRequest(query, None, limit=50)).results
    assert {"alpha", "beta"} <= {r["knowledgeBaseId"] for r in every}


@pytest.mark.parametrize("strategy", ["hybrid", "pageindex"])
def test_injection_attempts_in_knowledge_base_ids_do_not_widen_results(kb_searcher, strategy):
    for injected in INJECTIONS:
        alone = kb_searcher.search(SearchRequest("backups kept", [injected], limit=20, strategy=strategy))
        assert alone.results == [], (injected, alone.results[:1])
        mixed = kb_searcher.search(SearchRequest("backups kept", ["alpha", injected], limit=20, strategy=strategy))
        assert mixed.results and {r["knowledgeBaseId"] for r in mixed.results} == {"alpha"}, injected


def test_milvus_timeouts_fall_back_to_pages_marked_and_unscored(kb_searcher, frozen_searcher):
    # a Milvus server that stopped answering: every call hits its deadline
    down = frozen_searcher(kb_searcher)
    for query, kb, needle in [
        ("数据备份保留多少天", "beta", "备份保留三十五天"),
        ("How long are backups kept?", "alpha", "35 days"),
    ]:
        started = time.perf_counter()
        response = down.search(SearchRequest(query, [kb], limit=5))
        # the searcher's deadline (0.5 s), not the client's own timeout, ended the wait: ~0.5 s on a quiet machine;
        # bounded by the client's timeout, so that a loaded machine's stall does not read as a deadline not kept
        assert time.perf_counter() - started < FROZEN_CLIENT_TIMEOUT_S
        assert response.results, response.warnings
        assert any(w.startswith("chunk search failed") for w in response.warnings)
        for row in response.results:
            assert row["retrievalSource"] == "fallback_pages" and row["score"] is None
            assert row["scores"] == {"dense": None, "lexical": None, "exactBoost": None}
            assert row["knowledgeBaseId"] == kb and row["chunkId"] is None
        assert needle in response.results[0]["content"]


def test_chunk_search_that_finds_nothing_falls_back_to_pages_unless_min_score_is_set(kb_searcher):
    # "份保" spans two words (备份|保留): no BM25 token matches, no dense score for Chinese; the page holds it
    response = kb_searcher.search(SearchRequest("份保", ["beta"], limit=5))
    assert response.results and response.results[0]["retrievalSource"] == "fallback_pages"
    assert "备份保留" in response.results[0]["content"] and response.results[0]["score"] is None
    assert "no chunk matched; answered from pages (fallback)" in response.warnings

    explicit = kb_searcher.search(SearchRequest("份保", ["beta"], limit=5, min_score=0.0))
    assert explicit.results == []


def _clone_collection(client, source: str, name: str, *, dense_dim: int, bm25: bool, spec: dict | None = None) -> None:
    """A copy of alpha's chunks in a collection whose dense or BM25 search really fails (``spec``: the
    embedding spec it records, default the source's)."""
    rows = client.query(
        source, filter='knowledge_base_id == "alpha"', output_fields=[*OUTPUT_FIELDS, "dense"], limit=16384
    )
    if client.has_collection(name):
        client.drop_collection(name)
    schema = client.create_schema(auto_id=False, description=json.dumps(spec or collection_spec(client, source)))
    schema.add_field("chunk_id", DataType.VARCHAR, is_primary=True, max_length=64)
    for field, length in SCALAR_FIELDS.items():
        schema.add_field(field, DataType.VARCHAR, max_length=length)
    for field in INT_FIELDS:
        schema.add_field(field, DataType.INT32)
    schema.add_field(
        "content",
        DataType.VARCHAR,
        max_length=32768,
        enable_analyzer=bm25,
        **({"analyzer_params": BM25_ANALYZER} if bm25 else {}),
    )
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=dense_dim)
    index = client.prepare_index_params()
    index.add_index("dense", index_type="FLAT", metric_type="COSINE")
    if bm25:
        schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        schema.add_function(
            Function(
                name="bm25",
                function_type=FunctionType.BM25,
                input_field_names=["content"],
                output_field_names=["sparse"],
            )
        )
        index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    client.create_collection(name, schema=schema, index_params=index)
    if dense_dim != len(rows[0]["dense"]):
        rows = [{**r, "dense": [0.5] * dense_dim} for r in rows]
    client.insert(name, rows)
    client.flush(name)
    client.load_collection(name)


def test_dense_search_failure_degrades_to_bm25_only_with_a_warning(kb_searcher, milvus_client):
    collection, _ = kb_searcher.published()
    _clone_collection(milvus_client, collection, "test_broken_dense", dense_dim=8, bm25=True)
    response = _variant(kb_searcher, collection="test_broken_dense").search(
        SearchRequest("How long are backups kept?", ["alpha"], limit=5, strategy="hybrid")
    )
    assert response.results and any(w.startswith("dense search unavailable") for w in response.warnings)
    for row in response.results:
        assert row["retrievalSource"] == "hybrid" and row["scores"]["dense"] is None
        assert row["score"] == pytest.approx(_formula(row, Weights(), dense_share=0.0), abs=2e-6)
    assert "35 days" in response.results[0]["content"]


def test_bm25_failure_makes_keyword_overlap_the_lexical_signal_with_a_warning(kb_searcher, milvus_client):
    collection, _ = kb_searcher.published()
    _clone_collection(milvus_client, collection, "test_no_bm25", dense_dim=384, bm25=False)
    query = "How long are backups kept?"
    response = _variant(kb_searcher, collection="test_no_bm25").search(SearchRequest(query, ["alpha"], limit=5))
    assert response.results
    assert any(w.startswith("BM25 search unavailable") and "keyword overlap" in w for w in response.warnings)
    for row in response.results:
        assert row["scores"]["dense"] is not None
        assert row["scores"]["lexical"] == pytest.approx(keyword_overlap(query_terms(query), row["content"]), abs=1e-6)
        assert row["score"] == pytest.approx(_formula(row, Weights()), abs=2e-6)
    assert "35 days" in response.results[0]["content"]


def test_a_released_collection_is_loaded_again_before_searching(kb_searcher, milvus_client):
    collection, _ = kb_searcher.published()
    _clone_collection(milvus_client, collection, "test_released", dense_dim=384, bm25=True)
    milvus_client.release_collection("test_released")  # as after a Milvus restart
    searcher = _variant(kb_searcher, collection="test_released")
    request = SearchRequest("How long are backups kept?", ["alpha"], limit=3, strategy="hybrid")
    response = searcher.search(request)
    assert response.results[0]["retrievalSource"] == "hybrid", response.warnings
    assert "35 days" in response.results[0]["content"]
    # released behind the back of the searcher that loaded it: that search loads it again, no page fallback
    milvus_client.release_collection("test_released")
    again = searcher.search(request)
    assert again.results[0]["retrievalSource"] == "hybrid", again.warnings
    assert not any("fallback" in warning for warning in again.warnings), again.warnings
    assert "35 days" in again.results[0]["content"]


def test_chinese_query_is_not_ranked_by_dense_noise_and_mixed_queries_keep_their_latin_words(kb_searcher):
    chinese = _variant(kb_searcher, language_policy="share").search(
        SearchRequest("数据备份保留多少天", ["beta"], limit=5)
    )
    assert any("dense score not used" in w for w in chinese.warnings)
    assert all(r["scores"]["dense"] is None for r in chinese.results)
    assert "备份保留三十五天" in chinese.results[0]["content"]
    for row in chinese.results:
        assert row["score"] == pytest.approx(_formula(row, Weights(), dense_share=0.0), abs=2e-6)

    mixed_query = "analytics warehouse 备份保留"
    text, share, warning = dense_query_text(mixed_query, ("en",))
    assert text == "analytics warehouse" and 0 < share < 1 and warning
    mixed = _variant(kb_searcher, language_policy="share").search(SearchRequest(mixed_query, ["beta"], limit=5))
    assert warning in mixed.warnings
    assert all(r["scores"]["dense"] is not None for r in mixed.results)
    for row in mixed.results:
        assert row["score"] == pytest.approx(_formula(row, Weights(), dense_share=share), abs=2e-6)
    assert dense_query_text("How long are backups kept?", ("en",)) == ("How long are backups kept?", 1.0, None)
    assert dense_query_text("数据备份", ("en", "zh"))[1] == 1.0  # a model that reads Chinese keeps it all


def test_by_default_a_chinese_query_is_read_through_dictionary_words_and_finds_both_languages(kb_searcher):
    response = kb_searcher.search(SearchRequest("数据备份保留多少天", ["beta"], limit=5))
    assert any("dictionary words" in w and "backup" in w for w in response.warnings), response.warnings
    # the Chinese backup-retention passage first; the English one, which holds none of the dictionary words
    # as written ("Backups", "days"), is reached by their dense score: the best of all, in the top 3
    assert "备份保留三十五天" in response.results[0]["content"]
    english = next(
        r for r in response.results[:3] if "Backups of the analytics warehouse are kept for 90 days" in r["content"]
    )
    assert english["scores"]["dense"] == max(r["scores"]["dense"] for r in response.results)
    for row in response.results:  # the model reads the English words, each at half a word's dense weight
        assert row["scores"]["dense"] is not None
        assert row["score"] == pytest.approx(_formula(row, Weights(), dense_share=0.5), abs=2e-6)


def test_a_model_that_reads_chinese_gets_the_whole_query_and_bm25_still_gets_the_dictionary_words(
    kb_searcher, milvus_client
):
    collection, spec = kb_searcher.published()
    spec = {**spec, "languages": ["en", "zh"]}
    _clone_collection(milvus_client, collection, "test_reads_zh", dense_dim=384, bm25=True, spec=spec)
    searcher = _variant(kb_searcher, collection="test_reads_zh")
    response = SearchResponse(strategy="hybrid")
    query = searcher.prepare(SearchRequest("数据备份保留多少天", ["alpha"], limit=5), response)
    assert (query.dense_text, query.share) == ("数据备份保留多少天", 1.0) and not response.warnings
    assert "backup" in query.translations["备份"] and "backup" in query.bm25_text.split()  # English passages
    found = searcher.search(SearchRequest("数据备份保留多少天", ["alpha"], limit=5, strategy="hybrid"))
    english = next(r for r in found.results if "35 days" in r["content"])  # alpha's English backup passage
    assert english["scores"]["lexical"] > 0  # reached by BM25 through the dictionary words
    searcher.close()


def test_pageindex_locates_pages_then_gives_each_page_at_most_two_separate_chunks(kb_searcher, catalog):
    located = kb_searcher.catalog.locate_pages(query_terms("Encryption"), "Encryption", ["alpha"], 12)
    backups = next(d for d in catalog.list_documents(["alpha"]) if d.source_path == "backups.md")
    encryption_page = next(
        p["page_index"]
        for p in catalog.read_pages(backups.document_id)
        if "## Encryption" in p["text"] or p["text"].lstrip().startswith("Encryption")
    )
    assert (located[0].document_id, located[0].page_index) == (backups.document_id, encryption_page)

    response = kb_searcher.search(SearchRequest("Encryption", ["alpha"], limit=5, strategy="pageindex"))
    rows = response.results
    assert rows[0]["documentId"] == backups.document_id and rows[0]["pageIndex"] == encryption_page
    by_page: dict = {}
    for row in rows:
        by_page.setdefault((row["documentId"], row["pageIndex"]), []).append(row["chunkIndex"])
    for chunks in by_page.values():  # at most two, never neighbours
        assert len(chunks) <= kb_searcher.config.chunks_per_page == 2
        assert len(chunks) == 1 or abs(chunks[0] - chunks[1]) > 1
    for row in rows:
        assert row["retrievalSource"] == "hybrid" and row["score"] == pytest.approx(_formula(row, Weights()), abs=2e-6)
        # the reader's passage: the page around the chunk, holding all of it (what an earlier result of its page
        # hands over already taken out: overlap.py), at most 800 characters
        assert len(row["context"]) <= 800
        shown = " ".join(
            " ".join(r["context"].split())
            for r in rows
            if r["pageIndex"] == row["pageIndex"] and r["documentId"] == row["documentId"]
        )
        assert all(" ".join(unit.split()) in shown for unit, _ in units(row["content"]))


def test_locating_pages_reads_the_locating_index_not_every_page(kb_searcher):
    # a scan of every page and node cost 978 ms at 404k chunks (docs/retrieval-log.md, section 7). A knowledge
    # base of 40 documents of 100 pages (rows written directly: the triggers index them as any write)
    catalog, kb = kb_searcher.catalog, "locate-scale"
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute(
            "INSERT INTO documents (document_id, knowledge_base_id, source_root, source_path, source_uri, status, "
            "version) SELECT 'locate-' || d, %s, 'locate', d || '.txt', d || '.txt', 'published', 'v1' "
            "FROM generate_series(0, 39) d",
            (kb,),
        )
        cur.execute(
            "INSERT INTO pages (document_id, version, page_index, text, blocks, summary, keywords, parser, mode) "
            "SELECT 'locate-' || d, 'v1', i, repeat('page text ', 150) || i, '[]', "
            "'ledger ' || i || ' of account ' || mod(i, 97), "
            "ARRAY['ledger', 'account' || mod(i, 97)], 'test', 'text' "
            "FROM generate_series(0, 39) d, generate_series(0, 99) i"
        )
        cur.execute(
            "UPDATE pages SET summary = 'zebra crossings are encrypted', keywords = ARRAY['zebra'] "
            "WHERE (document_id, page_index) IN (('locate-3', 17), ('locate-25', 50))"
        )
    vacuum = psycopg2.connect(catalog.dsn)
    vacuum.autocommit = True  # as autovacuum would: the GIN indexes' pending entries merged, statistics taken
    with vacuum.cursor() as cur:
        cur.execute("VACUUM ANALYZE documents")
        cur.execute("VACUUM ANALYZE pages")
    vacuum.close()
    try:
        query = "encrypted zebra"
        params = locate_parameters(query_terms(query), query, [kb], 12, None)
        with catalog.reader() as conn, conn.cursor() as cur:
            cur.execute(f"PREPARE locate_plan ({LOCATE_TYPES}) AS {LOCATE_SQL}")
            cur.execute("EXPLAIN EXECUTE locate_plan (" + ", ".join(["%s"] * len(params)) + ")", params)
            plan = "\n".join(row[0] for row in cur.fetchall())
            cur.execute("DEALLOCATE locate_plan")
        assert "locate_terms_token" in plan and "Seq Scan on pages" not in plan, plan
        located = catalog.locate_pages(query_terms(query), query, [kb], 12, None)
        assert [(p.document_id, p.page_index) for p in located] == [("locate-25", 50), ("locate-3", 17)]
    finally:
        with catalog.connect() as conn, conn.cursor() as cur:
            cur.execute("DELETE FROM documents WHERE knowledge_base_id = %s", (kb,))


def test_a_detail_question_gets_the_paragraph_holding_the_detail_first_and_its_answer_in_the_returned_text(kb_searcher):
    english = kb_searcher.search(
        SearchRequest(
            "Which weekday does the pager pass to the next engineer?", ["alpha"], limit=5, strategy="pageindex"
        )
    ).results
    assert "every Monday at 09:00" in english[0]["content"]
    assert answer_in("Monday at 09:00", returned_text(english[0]))
    # the second stage's parts beside the hybrid score, which every row keeps
    assert {"coverage", "proximity", "rerank"} <= set(english[0]["scores"])
    assert english[0]["scores"]["rerank"] >= english[0]["score"]
    assert "pageCoverage" not in english[0]["scores"]  # a short question: no page-coverage stage
    # a long question: its best pages get the share of its terms their best context window holds
    long = kb_searcher.search(
        SearchRequest(
            "How many days are the nightly backups of the orders database kept in the cold tier before they expire?",
            ["alpha"],
            limit=5,
            strategy="pageindex",
        )
    ).results
    assert answer_in("kept for 35 days", returned_text(long[0]))
    shares = [row["scores"]["pageCoverage"] for row in long]
    assert all(0.0 <= share <= 1.0 for share in shares) and shares[0] == max(shares) > 0.5
    # a Chinese question about an English passage: its dictionary words reach the model and BM25
    chinese = kb_searcher.search(SearchRequest("加密密钥多久轮换一次？", ["alpha"], limit=5, strategy="pageindex"))
    assert any("dictionary words" in w for w in chinese.warnings), chinese.warnings
    assert answer_in("rotates every 90 days", returned_text(chinese.results[0]))


def test_search_embeds_the_query_with_the_model_recorded_for_the_published_collection(
    kb_searcher, milvus_client, settings
):
    asked = []

    def loader(model_id):
        asked.append(model_id)
        return kb_searcher.load_model(model_id)

    searcher = Searcher(kb_searcher.client, kb_searcher.catalog, settings.alias, loader, kb_searcher.config)
    searcher.search(SearchRequest("on-call rotation", ["alpha"]))
    collection, _ = searcher.published()
    assert asked == [collection_spec(milvus_client, collection)["model"]]


def test_service_reads_postgres_under_a_statement_timeout(kb_searcher):
    with kb_searcher.catalog.reader() as conn, conn.cursor() as cur:
        cur.execute("SHOW statement_timeout")
        assert cur.fetchone()[0] == "3s"


def test_search_and_eval_commands_report_results_hits_mrr_latency_and_baseline(corpus, tmp_path):
    import torch

    from kb_assets.cli import main

    runner = CliRunner()
    threads = torch.get_num_threads()
    out = runner.invoke(main, ["search", "When does the on-call rotation change?", "--kb", "alpha", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert "Monday" in data["results"][0]["content"] and set(data) == {"results", "warnings", "timingsMs"}
    torch.set_num_threads(threads)

    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        "\n".join(
            json.dumps(q)
            for q in [
                {
                    "kb": "alpha",
                    "file": "oncall.md",
                    "query": "When does the on-call rotation change?",
                    "pages": [0, 1],
                },
                {
                    "kb": "alpha",
                    "file": "backups.md",
                    "query": "How often is the encryption key rotated?",
                    "pages": [0, 3],
                },
            ]
        )
        + "\n"
    )
    threads = torch.get_num_threads()
    try:
        out = runner.invoke(main, ["eval", str(questions), "--baseline", "--json"])
    finally:
        torch.set_num_threads(threads)  # eval sets one thread a query for its process
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["strategy"] == "pageindex"
    for name in ("scores", "baseline"):
        overall = data[name]["overall"]
        assert overall["questions"] == 2
        assert {"hit@1", "hit@5", "mrr", "latencyP50Ms", "latencyP95Ms"} <= set(overall)
    assert data["scores"]["overall"]["hit@5"] == 1.0
