"""Cost that stays flat as a knowledge base grows, counted on a real ingest of 300 small documents (the
real services and model): the lake holds a few files per table however many documents were written,
Dagster's event log holds a bounded number of events per document and asset, and a bad document in a
batch still fails alone."""

from __future__ import annotations

import random
from collections import Counter

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.services]

DOCUMENTS = 300
WORDS = "backup restore archive index ledger invoice ticket schedule policy quota replica snapshot".split()


def note(number: int) -> str:
    rng = random.Random(number)
    sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 12))).capitalize() + "." for _ in range(5)]
    return f"# Note {number}: {rng.choice(WORDS)} {rng.choice(WORDS)}\n\n" + " ".join(sentences) + "\n"


@pytest.fixture(scope="module")
def many_notes(tmp_path_factory, settings):
    """300 one-paragraph notes and one empty file, ingested into a knowledge base of their own; purged at
    the end (the session's later tests, a migration's backfill, do not carry them)."""
    from kb_assets.launch.ingest import ingest

    folder = tmp_path_factory.mktemp("many") / "notes"
    folder.mkdir()
    for number in range(DOCUMENTS):
        (folder / f"note-{number:04d}.md").write_text(note(number), encoding="utf-8")
    (folder / "note-0150-empty.md").write_bytes(b"")  # in the middle of a batch run
    yield ingest([folder], "many-notes", settings)
    for path in folder.iterdir():
        path.unlink()
    assert len(ingest([folder], "many-notes", settings).deleted) == DOCUMENTS + 1


def test_a_bad_document_in_a_batch_fails_alone(many_notes, catalog):
    report = many_notes
    docs = {d.source_path: d for d in catalog.list_documents(["many-notes"])}
    failed = {path for path, d in docs.items() if d.status != "published"}
    assert failed == {"note-0150-empty.md"}, failed
    assert [f.source_uri.rsplit("/", 1)[-1] for f in report.failures] == ["note-0150-empty.md"]
    assert "empty file" in docs["note-0150-empty.md"].error
    assert len(report.new) == DOCUMENTS + 1


def test_the_lake_holds_a_few_files_for_hundreds_of_documents(many_notes, catalog, lake):
    published = {d.document_id for d in catalog.list_documents(["many-notes"]) if d.status == "published"}
    holding = set()
    for table in ("chunks", "embeddings"):
        manifest = lake.manifest(table)
        assert published <= set(manifest), f"{table}: {len(published - set(manifest))} documents without rows"
        holding |= {(table, manifest[d].name) for d in published}
    assert 2 <= len(holding) <= 10, sorted(holding)  # the session's lake: the files holding these documents
    one = sorted(published)[7]
    chunks, vectors = lake.read("chunks", one), lake.read("embeddings", one)
    assert chunks.height >= 1 and set(chunks["document_id"]) == {one}
    assert set(vectors["chunk_id"]) == set(chunks["chunk_id"])


def test_dagster_stores_at_most_five_events_a_document_and_asset(many_notes, settings):
    from kb_assets.launch.instance import dagster_instance

    report = many_notes
    instance = dagster_instance(settings)
    by_asset: Counter = Counter()
    total = 0
    for run_id in report.run_ids:
        for record in instance.all_logs(run_id):
            total += 1
            event = record.dagster_event
            if event is not None and event.asset_key is not None:
                by_asset[event.asset_key.to_user_string()] += 1
    documents = DOCUMENTS + 1
    assert set(by_asset) >= {"raw_files", "parsed_pages", "pageindex_trees", "chunks", "embeddings"}
    worst = max(by_asset.values()) / documents
    assert worst <= 5, by_asset
    assert total / (documents * len(by_asset)) <= 5, (total, by_asset)
