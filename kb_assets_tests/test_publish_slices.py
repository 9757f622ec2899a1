"""A slice's small documents share their Milvus calls when published, and one document's bad entity still
fails only that document (real Milvus Lite, real lake, real model)."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

pytestmark = pytest.mark.services


class CountingClient:
    """The real Milvus client, counting the calls made through it (not the one that asks which engine
    answers: ``stores.vectors.engine`` asks each client once)."""

    def __init__(self, client):
        self.client, self.calls = client, {}

    def __getattr__(self, name):
        method = getattr(self.client, name)
        if name == "get_server_version":
            return method

        def counted(*args, **kwargs):
            self.calls[name] = self.calls.get(name, 0) + 1
            return method(*args, **kwargs)

        return counted


def ingested_notes(tmp_path, knowledge_base: str, title: str, sentences: list[str], settings, catalog) -> list:
    """One note a sentence (``# title n``, the sentence 20 times) ingested into the knowledge base: its
    documents by file."""
    from kb_assets.launch.ingest import ingest

    folder = tmp_path / knowledge_base
    folder.mkdir()
    for n, sentence in enumerate(sentences):
        (folder / f"note-{n}.md").write_text(f"# {title} {n}\n\n" + sentence * 20)
    assert not ingest([folder], knowledge_base, settings).failures
    return sorted(catalog.list_documents([knowledge_base]), key=lambda d: d.source_path)


def test_a_slice_of_notes_shares_its_milvus_calls_and_a_bad_entity_fails_only_its_document(
    tmp_path, settings, catalog, lake, milvus_client
):
    from kb_assets.pipeline.steps.publish import write_slice_entities
    from kb_assets.stores.entities import count_entities, document_filter
    from kb_assets.stores.vectors import published_collection

    sentences = [f"Valve {n} is checked every {n + 2} days. " for n in range(4)]
    docs = ingested_notes(tmp_path, "slices", "Note", sentences, settings, catalog)
    collection = published_collection(milvus_client, catalog, settings.alias)
    # written again as a publish after new vectors does: not current at milvus_collection
    stale = [dataclasses.replace(d, step_versions={**d.step_versions, "milvus_collection": ""}) for d in docs]
    original = {d.document_id: lake.read("chunks", d.document_id) for d in docs}
    original_vectors = {d.document_id: lake.read("embeddings", d.document_id) for d in docs}

    def with_content(doc, content):
        frame = original[doc.document_id]
        first = pl.int_range(pl.len()) == 0
        lake.write(
            "chunks",
            doc.document_id,
            frame.with_columns(pl.when(first).then(pl.lit(content)).otherwise("content").alias("content")),
        )

    try:
        changed, bad = docs[1], docs[2]
        with_content(changed, "Valve 1 is now checked every day.")
        counting = CountingClient(milvus_client)

        wrote = write_slice_entities([d for d in stale if d is not stale[2]], lake, counting, collection)

        assert {d: w["counts"]["written"] for d, w in wrote.items()} == {
            docs[0].document_id: 0,
            changed.document_id: 1,
            docs[3].document_id: 0,
        }
        # three documents: one read of what is stored, one upsert, one count (not three or four each)
        assert counting.calls == {"query": 2, "upsert": 1}

        vectors = lake.read("embeddings", bad.document_id)
        short = [v[:3] if i == 0 else v for i, v in enumerate(vectors["vector"].to_list())]
        # a vector of the wrong dimension: refused before Milvus sees it (the embedded engine applies a
        # refused upsert's delete half: the whole batch's stored entities would be gone)
        lake.write(
            "embeddings", bad.document_id, vectors.with_columns(pl.Series("vector", short, dtype=pl.List(pl.Float32)))
        )
        wrote = write_slice_entities(stale, lake, counting, collection, dimension=384)

        assert isinstance(wrote[bad.document_id], Exception)
        assert str(wrote[bad.document_id]).startswith(f"{bad.source_path}: 1 chunks have vectors of 3 dimensions")
        good = [d for d in docs if d is not bad]
        assert all(not wrote[d.document_id]["skipped"] for d in good)
        for doc in docs:  # the bad document keeps what it had; the others hold their chunks
            held = count_entities(milvus_client, collection, document_filter(doc.document_id))
            assert held == doc.chunk_count
    finally:
        for doc in docs:
            lake.write("chunks", doc.document_id, original[doc.document_id])
            lake.write("embeddings", doc.document_id, original_vectors[doc.document_id])
        write_slice_entities(stale, lake, milvus_client, collection)


def test_entities_of_many_documents_are_counted_a_query_a_group_and_a_surplus_still_shows(
    tmp_path, settings, catalog, lake, milvus_client
):
    """The ``entities_match_chunks`` check counts a run's documents in shared queries, not one pass over the
    collection a document; a document holding more entities than expected is still counted exactly."""
    from kb_assets.stores.entities import chunk_entities, grouped_entity_counts, insert, query_loaded
    from kb_assets.stores.vectors import flush, in_filter, published_collection

    sentences = [f"Gauge {n} is read every {n + 3} hours. " for n in range(6)]
    docs = ingested_notes(tmp_path, "counted", "Gauge", sentences, settings, catalog)
    collection = published_collection(milvus_client, catalog, settings.alias)
    expected = {d.document_id: d.chunk_count for d in docs}
    counting = CountingClient(milvus_client)

    assert grouped_entity_counts(counting, collection, expected) == expected
    assert counting.calls == {"query": 1}  # six documents, one query
    counting.calls.clear()
    assert grouped_entity_counts(counting, collection, expected, group_entities=2) == expected
    assert counting.calls["query"] == len(docs)  # groups of two entities: a document each

    extra = docs[0]
    rows = chunk_entities(lake.read("chunks", extra.document_id), lake.read("embeddings", extra.document_id))
    copies = [{**row, "chunk_id": f"{row['chunk_id']}-copy{i}"} for i in range(3) for row in rows]
    try:
        insert(milvus_client, collection, copies)  # more entities than expected: past the group's limit
        flush(milvus_client, collection)
        counted = grouped_entity_counts(milvus_client, collection, expected)
        assert counted[extra.document_id] == 4 * extra.chunk_count
        assert {d: n for d, n in counted.items() if d != extra.document_id} == {
            d: n for d, n in expected.items() if d != extra.document_id
        }
    finally:
        ids = [c["chunk_id"] for c in copies]
        milvus_client.delete(collection, ids=ids)
        flush(milvus_client, collection)
        assert not query_loaded(
            milvus_client, collection, filter=in_filter("chunk_id", ids), output_fields=["chunk_id"]
        )
