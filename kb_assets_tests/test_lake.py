"""The lake's files: many documents a file, read by document through the files' footers, superseded and
deleted rows removed by compaction, lakes of one file per document (written before) still read."""

from __future__ import annotations

import polars as pl
from polars.testing import assert_frame_equal

import kb_assets.stores.lake as lake_module
from kb_assets.chunking.schema import CHUNKS_SCHEMA
from kb_assets.stores.lake import Lake


def chunks(document_id: str, n: int = 2) -> pl.DataFrame:
    rows: dict[str, list] = {name: [None] * n for name in CHUNKS_SCHEMA.names()}
    rows.update(
        chunk_id=[f"{document_id}-c{i}" for i in range(n)],
        document_id=[document_id] * n,
        content=[f"text {i} of {document_id}" for i in range(n)],
        regions=[[] for _ in range(n)],
    )
    return pl.DataFrame(rows, schema=CHUNKS_SCHEMA)


def test_a_batch_of_documents_is_one_file_read_back_by_document(tmp_path):
    lake = Lake(str(tmp_path))
    with lake.batch():
        for number in range(40):
            lake.write("chunks", f"doc-{number}", chunks(f"doc-{number}", n=1 + number % 3))
        assert lake.read("chunks", "doc-5").height == 3  # the batch's own rows, before its file is written
        assert not list(tmp_path.rglob("*.parquet"))
    assert len(list((tmp_path / "chunks").iterdir())) == 1
    other = Lake(str(tmp_path))  # another process
    assert other.document_ids("chunks") == sorted(f"doc-{n}" for n in range(40))
    assert_frame_equal(other.read("chunks", "doc-7"), chunks("doc-7", n=2))
    assert other.read("chunks", "doc-40").height == 0 and not other.exists("chunks", "doc-40")


def test_rewrites_and_deletes_leave_dead_rows_that_compaction_removes_but_not_from_young_files(tmp_path, monkeypatch):
    lake = Lake(str(tmp_path))
    with lake.batch():
        for number in range(4):
            lake.write("chunks", f"doc-{number}", chunks(f"doc-{number}"))
    lake.write("chunks", "doc-0", chunks("doc-0", n=1))  # outside a batch: a file of its own
    lake.delete("chunks", "doc-1")
    assert lake.document_ids("chunks") == ["doc-0", "doc-2", "doc-3"]
    assert lake.dead_rows("chunks") == (4, 9)
    assert lake.compact("chunks", force=True) == 0  # every file is younger than COMPACT_AFTER_S: kept

    monkeypatch.setattr(lake_module, "COMPACT_AFTER_S", 0.0)
    assert lake.compact("chunks", force=True) == 3
    [only] = (tmp_path / "chunks").iterdir()
    assert sorted(pl.read_parquet(only)["chunk_id"]) == ["doc-0-c0", "doc-2-c0", "doc-2-c1", "doc-3-c0", "doc-3-c1"]
    assert Lake(str(tmp_path)).dead_rows("chunks") == (0, 5)
    assert_frame_equal(Lake(str(tmp_path)).read("chunks", "doc-0"), chunks("doc-0", n=1))


def test_a_lake_of_one_file_per_document_written_before_is_read_and_superseded(tmp_path):
    (tmp_path / "chunks").mkdir()
    chunks("old-doc", n=3).drop("pipeline_version").write_parquet(tmp_path / "chunks" / "old-doc.parquet")
    lake = Lake(str(tmp_path))
    before = lake.read("chunks", "old-doc")
    assert before.height == 3 and before["pipeline_version"].to_list() == ["1"] * 3  # the added column's default
    with lake.batch():
        lake.write("chunks", "old-doc", chunks("old-doc", n=1))
    assert Lake(str(tmp_path)).read("chunks", "old-doc").height == 1
    lake.delete("chunks", "old-doc")
    assert Lake(str(tmp_path)).document_ids("chunks") == []


def test_compacting_a_lake_of_one_file_per_document_keeps_each_document_its_own_rows(tmp_path, monkeypatch):
    (tmp_path / "chunks").mkdir()
    for name in ("old-a", "old-b", "old-c"):
        chunks(name).write_parquet(tmp_path / "chunks" / f"{name}.parquet")
    monkeypatch.setattr(lake_module, "COMPACT_AFTER_S", 0.0)
    assert Lake(str(tmp_path)).compact("chunks", force=True) == 0  # nothing dead, few files: not due
    monkeypatch.setattr(lake_module, "MAX_FILES", 2)
    assert Lake(str(tmp_path)).compact("chunks") == 3
    [merged] = (tmp_path / "chunks").iterdir()
    assert merged.name != "old-a.parquet"
    after = Lake(str(tmp_path))  # another process reads the merged file by document, not as one document's file
    assert after.document_ids("chunks") == ["old-a", "old-b", "old-c"]
    for name in ("old-a", "old-b", "old-c"):
        assert_frame_equal(after.read("chunks", name), chunks(name))
    with after.batch():  # and a newer write still supersedes the merged rows
        after.write("chunks", "old-b", chunks("old-b", n=1))
    assert Lake(str(tmp_path)).read("chunks", "old-b").height == 1


def test_a_merged_file_written_with_sequence_0_is_still_read_by_document(tmp_path):
    """Compaction once named its merged file with sequence 0 (a legacy file's): such lakes read right."""
    lake = Lake(str(tmp_path))
    lake._put("chunks", 0, pl.concat([chunks("a"), chunks("b", n=3)]), {"a": 2, "b": 3}, [])
    again = Lake(str(tmp_path))
    assert again.read("chunks", "a").height == 2 and again.read("chunks", "b").height == 3


def lake_with_a_large_file(tmp_path, monkeypatch) -> tuple[Lake, lake_module.LakeFile]:
    """A lake of one file of 300 documents, in a size tier of its own; compaction of any file's age."""
    monkeypatch.setattr(lake_module, "COMPACT_AFTER_S", 0.0)
    lake = Lake(str(tmp_path))
    with lake.batch():
        for number in range(300):
            lake.write("chunks", f"big-{number}", chunks(f"big-{number}", n=20))
    [large] = lake.files("chunks")
    monkeypatch.setattr(lake_module, "TIER_BYTES", large.size // 8)
    return lake, large


def test_compaction_merges_files_of_like_size_and_leaves_a_large_file_alone(tmp_path, monkeypatch):
    """Size tiers: small files are merged among themselves, a large file is not rewritten with them, so
    that a row is rewritten a few times over a table's life, not once every few runs."""
    lake, large = lake_with_a_large_file(tmp_path, monkeypatch)
    for number in range(12):  # twelve runs of one small document each
        with lake.batch():
            lake.write("chunks", f"small-{number}", chunks(f"small-{number}"))
        names = [f.name for f in lake.files("chunks")]
        assert large.name in names  # never rewritten: its rows are all alive
        assert len(names) <= 1 + lake_module.MAX_FILES  # the small ones merged
    again = Lake(str(tmp_path))
    assert len(again.document_ids("chunks")) == 312
    assert_frame_equal(again.read("chunks", "small-3"), chunks("small-3"))
    assert_frame_equal(again.read("chunks", "big-299"), chunks("big-299", n=20))


def test_a_merge_that_leaves_an_older_file_out_keeps_the_deletions_that_hide_its_rows(tmp_path, monkeypatch):
    lake, large = lake_with_a_large_file(tmp_path, monkeypatch)
    lake.delete("chunks", "big-7")  # a small file that deletes rows of the large one (1 of 300: not due)
    lake.write("chunks", "big-8", chunks("big-8", n=1))  # and one that supersedes them
    for number in range(4):
        lake.write("chunks", f"small-{number}", chunks(f"small-{number}"))
    assert lake.compact("chunks") == 6  # files written outside a batch: merged when compaction is asked
    assert large.name in [f.name for f in lake.files("chunks")]  # the small files merged, the large kept
    assert len(lake.files("chunks")) == 2
    again = Lake(str(tmp_path))
    assert "big-7" not in again.document_ids("chunks") and again.read("chunks", "big-7").height == 0
    assert again.read("chunks", "big-8").height == 1
    assert again.dead_rows("chunks") == (40, 6000 + 1 + 8)
    assert again.compact("chunks", force=True) == 2  # a purge's compaction: the dead rows go, and the deletion
    assert again.dead_rows("chunks") == (0, 5969)
    assert [f.deleted for f in again.files("chunks")] == [()]
    assert "big-7" not in Lake(str(tmp_path)).document_ids("chunks")
