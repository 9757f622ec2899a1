"""Pipeline versions: a bumped step version makes documents stale from that step, and ingest re-runs them
from there; outputs that come out the same are not rewritten, so nothing downstream re-runs or re-encodes.
A "new" step is simulated by patching what the step calls; the version is bumped through Settings."""

from __future__ import annotations

from dataclasses import replace

import dagster as dg
import polars as pl
import pytest

from kb_assets.lib.text import sha256_text
from kb_assets.pipeline import steps
from kb_assets.pipeline.versions import step_versions

pytestmark = pytest.mark.slow

FILES = {
    "alpha.md": "# Deploys\n\nDeploys happen on weekdays between 10:00 and 16:00. A deploy needs one approval "
    "from the owning team.\n\n## Freezes\n\nNo deploys run during the December freeze.\n",
    "beta.md": "# Incidents\n\nEvery incident gets a commander within five minutes. The commander opens a "
    "channel and posts updates every thirty minutes.\n",
}


@pytest.fixture
def corpus(tmp_path, request, settings, catalog):
    """Two small documents ingested into a knowledge base of their own."""
    from kb_assets.launch.ingest import ingest

    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text)
    kb = request.node.name[5:40]
    report = ingest([folder], kb, settings)
    assert not report.failures, report.failures
    return folder, kb, {d.source_path: d for d in catalog.list_documents([kb])}


def bumped(settings, **versions):
    return replace(settings, versions=replace(settings.versions, **versions))


def run_selection(instance, run_id: str) -> set[str]:
    return {key.to_user_string() for key in instance.get_run_by_id(run_id).asset_selection}


def materialization_total(instance, run_id: str, asset: str, figure: str) -> int:
    """A figure summed over the run's materializations of an asset (one per document partition)."""
    events = [
        r.event_log_entry.dagster_event
        for r in instance.get_records_for_run(run_id).records
        if r.event_log_entry.dagster_event
        and r.event_log_entry.dagster_event.is_step_materialization
        and r.event_log_entry.dagster_event.asset_key.to_user_string() == asset
    ]
    assert events
    return sum(getattr(e.event_specific_data.materialization.metadata.get(figure), "value", 0) for e in events)


def test_chunker_version_bump_reruns_only_chunks_onward_and_reencodes_only_changed_inputs(
    corpus, settings, catalog, lake, milvus_client, monkeypatch
):
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.pipeline.planning import stale_documents
    from kb_assets.stores.entities import stored_vectors

    folder, kb, docs = corpus
    alpha, beta = docs["alpha.md"], docs["beta.md"]
    pages_run = {d.document_id: catalog.read_pages(d.document_id)[0]["run_id"] for d in docs.values()}
    vectors_before = {d.document_id: lake.read("embeddings", d.document_id) for d in docs.values()}
    new = bumped(settings, chunks="test-2")
    stale = stale_documents(list(docs.values()), step_versions(new))
    assert {k: (v.step, v.reason) for k, v in stale.items()} == {
        d.document_id: ("chunks", "chunker 1 -> test-2") for d in docs.values()
    }

    original = steps.chunks.chunk_with_fallback

    def revised_chunker(pages, context, *args):  # the "new chunker" changes one embedding input of beta
        frame, fallback = original(pages, context, *args)
        if context.source_uri.endswith("beta.md"):
            revised = frame["embedding_input"][-1] + " (revised)"
            last = pl.arange(0, frame.height, eager=True) == frame.height - 1
            frame = frame.with_columns(
                embedding_input=pl.when(last).then(pl.lit(revised)).otherwise(pl.col("embedding_input")),
                embedding_input_sha=pl.when(last)
                .then(pl.lit(sha256_text(revised)))
                .otherwise(pl.col("embedding_input_sha")),
            )
        return frame, fallback

    monkeypatch.setattr(steps.chunks, "chunk_with_fallback", revised_chunker)
    report = ingest([folder], kb, new)

    assert not report.failures
    assert {(s.document_id, s.step) for s in report.stale} == {(d.document_id, "chunks") for d in docs.values()}
    instance = dagster_instance(settings)
    (run_id,) = report.run_ids
    assert run_selection(instance, run_id) == {"chunks", "embeddings", "milvus_collection"}
    assert {d: catalog.read_pages(d)[0]["run_id"] for d in pages_run} == pages_run  # no re-parse
    assert lake.read("embeddings", alpha.document_id).equals(vectors_before[alpha.document_id])  # alpha: nothing
    after = lake.read("embeddings", beta.document_id)
    changed = after.filter(pl.col("run_id") == run_id)
    assert changed.height == 1 and after.height == vectors_before[beta.document_id].height  # one re-encoded
    assert materialization_total(instance, run_id, "milvus_collection", "written") == 1
    chunk_id, vector = changed["chunk_id"][0], changed["vector"][0].to_list()
    stored = stored_vectors(milvus_client, report.published.collection, [chunk_id])[chunk_id]
    assert max(abs(a - b) for a, b in zip(stored, vector, strict=False)) < 1e-6  # upserted in place
    refreshed = catalog.get_documents([alpha.document_id, beta.document_id])
    assert {d.step_versions["chunks"] for d in refreshed.values()} == {"test-2"}
    assert stale_documents(list(refreshed.values()), step_versions(new)) == {}
    assert ingest([folder], kb, new).run_ids == []  # settled


def test_parser_version_bump_reparses_and_only_changed_pages_go_downstream(corpus, settings, catalog, monkeypatch):
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance

    folder, kb, docs = corpus
    alpha, beta = docs["alpha.md"], docs["beta.md"]
    nodes_run = {d.document_id: catalog.read_nodes(d.document_id)[0]["run_id"] for d in docs.values()}
    original = steps.sources.parse_document

    def revised_parser(path, name=None, options=None):  # the "new parser" reads beta's text differently
        parsed = original(path, name=name, options=options)
        if name == "beta.md":
            for page in parsed.pages:
                page.blocks = [replace(b, text=b.text.replace("five minutes", "5 minutes")) for b in page.blocks]
        return parsed

    monkeypatch.setattr(steps.sources, "parse_document", revised_parser)
    report = ingest([folder], kb, bumped(settings, parse="test-2"))

    assert not report.failures
    (run_id,) = report.run_ids
    assert run_selection(dagster_instance(settings), run_id) == {
        "parsed_pages",
        "pageindex_trees",
        "chunks",
        "embeddings",
        "milvus_collection",
    }
    beta_pages = catalog.read_pages(beta.document_id)
    assert {p["pipeline_version"] for p in beta_pages} == {"test-2"} and beta_pages[0]["run_id"] == run_id
    assert "5 minutes" in beta_pages[0]["text"]
    alpha_pages = catalog.read_pages(alpha.document_id)  # parsed again, the same pages: not rewritten
    assert {p["pipeline_version"] for p in alpha_pages} == {step_versions(settings)["parsed_pages"]}
    assert alpha_pages[0]["run_id"] != run_id
    assert catalog.read_nodes(alpha.document_id)[0]["run_id"] == nodes_run[alpha.document_id]
    assert catalog.read_nodes(beta.document_id)[0]["run_id"] == run_id
    steps_now = catalog.get_documents([alpha.document_id, beta.document_id])
    assert {d.step_versions["parsed_pages"] for d in steps_now.values()} == {"test-2"}
    status = dagster_instance(settings).get_status_by_partition(
        dg.AssetKey("parsed_pages"),
        [alpha.partition_key, beta.partition_key],
        dg.DynamicPartitionsDefinition(name="documents"),
    )
    assert set(status.values()) == {dg.AssetPartitionStatus.MATERIALIZED}


def test_concurrent_runs_start_at_the_first_stale_step_in_worker_processes(corpus, settings, catalog):
    """KB_CONCURRENT_RUNS > 1: the planned runs go to a spawned worker pool (``runs.execute_runs``), each
    with its asset selection from the first stale step and this machine's process tag."""
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import PROCESS_TAG, dagster_instance

    folder, kb, docs = corpus
    new = replace(bumped(settings, chunks="test-3"), concurrent_runs=2)
    report = ingest([folder], kb, new)

    assert not report.failures and len(report.run_ids) == 2  # one range for each of the two runs
    instance = dagster_instance(settings)
    for run_id in report.run_ids:
        run = instance.get_run_by_id(run_id)
        assert run.is_success and run.tags["kb/from_step"] == "chunks" and PROCESS_TAG in run.tags
        assert run_selection(instance, run_id) == {"chunks", "embeddings", "milvus_collection"}
    refreshed = catalog.get_documents([d.document_id for d in docs.values()])
    assert {d.step_versions["chunks"] for d in refreshed.values()} == {"test-3"}
    assert {d.status for d in refreshed.values()} == {"published"}


def test_a_chunk_contextualizer_rechunks_from_chunks_one_that_fails_is_retried_and_turning_it_off_restores(
    corpus, settings, catalog, lake
):
    from kb_assets.chunking.contextual import CONTEXT_KINDS
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.settings import EndpointSettings
    from kb_assets_tests.chat_server import ChatServer, chat_answer

    folder, kb, docs = corpus
    ids = [d.document_id for d in docs.values()]
    chunks_before = {i: lake.read("chunks", i) for i in ids}
    vectors_before = {i: lake.read("embeddings", i) for i in ids}
    with_endpoint = lambda url: replace(settings, chunk_context=EndpointSettings(url=url, model="tiny"))  # noqa: E731

    with ChatServer(503) as broken:
        report = ingest([folder], kb, with_endpoint(broken.url))
    assert not report.failures and len(broken.requests) == 1  # one failed call, no failed document
    assert {s.step for s in report.stale} == {"chunks"}
    assert all(lake.read("chunks", i).drop("run_id").equals(chunks_before[i].drop("run_id")) for i in ids)
    assert all(lake.read("embeddings", i).equals(vectors_before[i]) for i in ids)  # nothing re-encoded
    assert {d.step_versions["chunks"] for d in catalog.get_documents(ids).values()} == {"1+context:tiny:partial"}

    sentence = "Part of the team's operating rules for deploys and incidents."
    with ChatServer(200, chat_answer(sentence)) as server:
        working = with_endpoint(server.url)
        report = ingest([folder], kb, working)
        text_chunks = sum(lake.read("chunks", i)["kind"].is_in(CONTEXT_KINDS).sum() for i in ids)
        assert not report.failures and len(server.requests) == text_chunks > 0
        assert ingest([folder], kb, working).run_ids == []  # settled: no run, no call
        assert len(server.requests) == text_chunks

    (run_id,) = report.run_ids
    instance = dagster_instance(settings)
    assert run_selection(instance, run_id) == {"chunks", "embeddings", "milvus_collection"}
    assert materialization_total(instance, run_id, "chunks", "contextualized") == text_chunks
    for i in ids:
        chunks = lake.read("chunks", i)
        texts = chunks.filter(pl.col("kind").is_in(CONTEXT_KINDS))
        assert all(f"\n{sentence}\n" in row for row in texts["embedding_input"])
        assert chunks["content"].equals(chunks_before[i]["content"])
        assert (
            lake.read("embeddings", i).filter(pl.col("chunk_id").is_in(texts["chunk_id"].to_list()))["run_id"] == run_id
        ).all()
    assert {d.step_versions["chunks"] for d in catalog.get_documents(ids).values()} == {"1+context:tiny"}
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*), min(context) FROM chunk_contexts WHERE contextualizer = 'llm:tiny'")
        assert cur.fetchone() == (text_chunks, sentence)

    report = ingest([folder], kb, settings)  # turned off: plain inputs again
    assert not report.failures and {s.step for s in report.stale} == {"chunks"}
    assert all(lake.read("chunks", i).drop("run_id").equals(chunks_before[i].drop("run_id")) for i in ids)
    assert {d.step_versions["chunks"] for d in catalog.get_documents(ids).values()} == {"1"}
