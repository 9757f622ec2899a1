"""A chunk's lineage finds its document through an index (the catalog's ``chunk_terms``), then reads only
that document's lake rows; an unknown id is not found without any lake file being read.

How that is shown without a mock: the lineage reads a lake in which every other document's files are
unreadable (not Parquet). Any read of them raises; the old lake scan did exactly that."""

from __future__ import annotations

import pytest

from kb_assets.pipeline.lineage import ChunkNotFound, chunk_lineage
from kb_assets.stores.lake import Lake

pytestmark = pytest.mark.slow

FILES = {
    "boilers.md": "# Boilers\n\nThe boiler room key hangs in the janitor's office behind the blue cabinet.\n",
    "pumps.md": "# Pumps\n\nPump 3 is primed with two litres of water before the valve opens.\n",
}


@pytest.fixture(scope="module")
def published(tmp_path_factory, settings, catalog):
    from kb_assets.launch.ingest import ingest

    folder = tmp_path_factory.mktemp("lineage") / "docs"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text)
    assert not ingest([folder], "lineage-index", settings).failures
    return {d.source_path: d for d in catalog.list_documents(["lineage-index"])}


def trap_lake(root, catalog, lake: Lake, keep: str | None = None) -> Lake:
    """A lake where the files of every document in the catalog are garbage, but those of ``keep`` (copied)."""
    trap = Lake(str(root))
    for doc in catalog.list_documents():
        for table in ("chunks", "embeddings"):
            if doc.document_id == keep:
                trap.write(table, keep, lake.read(table, keep))
            else:
                path = root / table / f"{doc.document_id}.parquet"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(b"not a parquet file")
    return trap


def test_unknown_chunk_id_is_not_found_without_reading_the_lake(
    tmp_path, published, catalog, lake, milvus_client, settings
):
    trap = trap_lake(tmp_path / "lake", catalog, lake)
    with pytest.raises(Exception, match="Parquet|parquet"):  # the trap is armed: reading any file raises
        trap.read("chunks", published["pumps.md"].document_id)
    for client in (milvus_client, None):
        with pytest.raises(ChunkNotFound, match="is in no document you may read"):
            chunk_lineage("0123456789abcdef0123456789abcdef", catalog, trap, client, settings.alias)


def test_known_chunk_reads_only_its_own_document_from_the_lake(tmp_path, published, catalog, lake, settings):
    doc = published["pumps.md"]
    chunk_id = lake.read("chunks", doc.document_id)["chunk_id"][0]
    trap = trap_lake(tmp_path / "lake", catalog, lake, keep=doc.document_id)
    found = chunk_lineage(chunk_id, catalog, trap, None, settings.alias)  # Milvus not asked: the catalog knows
    assert found["document"]["documentId"] == doc.document_id and found["verified"] is True
    with pytest.raises(ChunkNotFound):  # a chunk of another knowledge base is not found, nothing read
        chunk_lineage(chunk_id, catalog, trap, None, settings.alias, scope={"handbook"})
