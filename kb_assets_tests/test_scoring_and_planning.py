"""Fast tier: the hybrid formula and its degraded modes, the language policy, and run planning, as pure
functions (no service, no model)."""

from __future__ import annotations

import numpy as np
import pytest

from kb_assets.pipeline.identity import document_id_for
from kb_assets.pipeline.planning import Scope, scan
from kb_assets.pipeline.ranges import contiguous_ranges, spanning_ranges
from kb_assets.retrieval.fanout import Found
from kb_assets.retrieval.query import Query, dense_query_text, keyword_overlap, query_terms
from kb_assets.retrieval.scoring import rank_key, score
from kb_assets.settings import Weights


class UnitEncoder:
    """Encodes every text as the same unit vector: the dense score of a chunk is then its stored
    vector's first component, which the test chooses."""

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.array([[1.0, 0.0]] * len(texts), dtype=np.float32)

    encode_queries = encode


def entity(chunk_id: str, content: str) -> dict:
    return {
        "chunk_id": chunk_id,
        "document_id": "doc-1",
        "knowledge_base_id": "kb",
        "page_index": 0,
        "page_end": 0,
        "chunk_index": int(chunk_id[-1]),
        "content": content,
    }


def query(text: str, share: float = 1.0) -> Query:
    return Query(text=text, collection="c", model=UnitEncoder(), dense_text=text, share=share, limit=10)


def test_hybrid_score_is_weighted_dense_plus_normalized_bm25_plus_exact_boost():
    found = Found(
        hits={"c1": entity("c1", "Backups are kept for 35 days."), "c2": entity("c2", "Other text.")},
        dense={"c1": 0.5, "c2": 0.9},
        bm25={"c1": 4.0, "c2": 1.0},
    )
    rows = {r["chunkId"]: r for r in score(query("backups are kept"), found, Weights(), [], lambda ids: {})}
    assert rows["c1"]["score"] == pytest.approx(0.82 * 0.5 + 0.18 * 1.0 + 0.05)  # whole query in the content
    assert rows["c2"]["score"] == pytest.approx(0.82 * 0.9 + 0.18 * 0.25)
    assert rows["c1"]["scores"] == {"dense": 0.5, "lexical": 1.0, "exactBoost": 0.05}


def test_one_sided_candidates_get_the_other_score_from_stored_vectors_or_bm25_exhaustion():
    found = Found(
        hits={"c1": entity("c1", "a"), "c2": entity("c2", "b"), "c3": entity("c3", "c")},
        dense={"c1": 0.4},
        bm25={"c2": 2.0},
        vectors={"c2": [0.7, 0.0]},
        no_bm25={"c1"},
    )
    rows = {r["chunkId"]: r for r in score(query("q"), found, Weights(), [], lambda ids: {"c3": [0.2, 0.0]})}
    assert rows["c1"]["scores"]["lexical"] == 0.0  # BM25 exhausted without it: no shared word
    assert rows["c2"]["scores"]["dense"] == pytest.approx(0.7)  # cosine with the vector the BM25 hit carried
    assert rows["c3"]["scores"] == {"dense": pytest.approx(0.2), "lexical": None, "exactBoost": 0.0}


def test_degraded_modes_warn_and_rank_with_what_is_left():
    hits = {"c1": entity("c1", "backups kept long"), "c2": entity("c2", "nothing")}
    warnings: list[str] = []
    no_bm25 = score(
        query("backups kept"),
        Found(hits=hits, dense={"c1": 0.3, "c2": 0.6}, bm25_error=TimeoutError("slow")),
        Weights(),
        warnings,
        dict,
    )
    assert {r["chunkId"]: r["scores"]["lexical"] for r in no_bm25} == {"c1": 1.0, "c2": 0.0}  # keyword overlap
    assert any("BM25 search unavailable" in w for w in warnings)
    no_dense = score(
        query("backups"),
        Found(hits=hits, bm25={"c1": 3.0}, dense_error=TimeoutError("slow")),
        Weights(),
        warnings,
        dict,
    )
    assert {r["chunkId"]: r["score"] for r in no_dense}["c1"] == pytest.approx(1.0 + 0.05)  # all weight on BM25
    with pytest.raises(RuntimeError, match="both failed"):
        score(query("x"), Found(hits=hits, dense_error=OSError("a"), bm25_error=OSError("b")), Weights(), [], dict)


def test_results_order_by_score_then_document_page_and_chunk():
    rows = [
        {"score": 0.5, "documentId": "b", "pageIndex": 0, "chunkIndex": 0, "chunkId": "x"},
        {"score": 0.9, "documentId": "z", "pageIndex": 3, "chunkIndex": 1, "chunkId": "y"},
        {"score": 0.5, "documentId": "a", "pageIndex": 2, "chunkIndex": 0, "chunkId": "z"},
    ]
    assert [r["chunkId"] for r in sorted(rows, key=rank_key)] == ["y", "z", "x"]


def test_a_chinese_query_is_not_ranked_by_a_model_that_does_not_read_chinese():
    assert dense_query_text("How long are backups kept?", ("en",)) == ("How long are backups kept?", 1.0, None)
    text, share, warning = dense_query_text("数据备份保留多少天", ("en",))
    assert (text, share) == ("", 0.0) and "ranked by BM25" in warning
    text, share, _ = dense_query_text("使用 backports 安装较新的软件", ("en",))
    assert text == "backports" and 0 < share < 0.5
    assert dense_query_text("数据备份", ("en", "zh"))[1] == 1.0
    assert keyword_overlap(query_terms("backups kept"), "Backups are KEPT") == 1.0


def test_run_ranges_follow_partition_order_and_cut_at_the_batch_size():
    order = ["a", "b", "c", "d", "e", "f"]
    assert contiguous_ranges(order, {"a", "b", "c", "e"}, 2) == [("a", "b", 2), ("c", "c", 1), ("e", "e", 1)]
    assert contiguous_ranges(order, set(), 5) == []
    # hash buckets: a range passes over the buckets between (their runs work only on claimed documents)
    assert spanning_ranges(order, {"a", "c", "f"}, 2) == [("a", "c", 2), ("f", "f", 1)]
    assert spanning_ranges(order, set(), 5) == []
    # and at most so many documents a run (whole buckets: one heavier than that is a run of its own)
    weights = {"a": 400, "c": 700, "d": 1500, "e": 100, "f": 200}
    assert spanning_ranges(order, set(weights), 50, weights, 1000) == [
        ("a", "a", 1),
        ("c", "c", 1),
        ("d", "d", 1),
        ("e", "f", 2),
    ]


def test_scan_ids_are_stable_per_knowledge_base_and_path_and_hidden_files_are_skipped(tmp_path):
    (tmp_path / "docs" / ".git").mkdir(parents=True)
    (tmp_path / "docs" / "a.md").write_text("# A\n")
    (tmp_path / "docs" / ".git" / "config").write_text("x")
    (tmp_path / "docs" / ".DS_Store").write_text("x")
    found = scan([tmp_path / "docs"], "kb")
    files = found.files
    root = str((tmp_path / "docs").resolve())
    assert [f.source_path for f in files] == ["a.md"] and found.scopes == [Scope(root, "")]
    assert found.failures == []
    assert files[0].document_id == document_id_for("kb", root, "a.md") != document_id_for("other", root, "a.md")
    assert files[0].source_root == root
