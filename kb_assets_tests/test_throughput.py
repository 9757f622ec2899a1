"""Ingest at the speed of the hardware, safely: the ONNX encoder (same vectors as torch, a cache that
heals), the service without torch, lazy page images, the chunk budget and bounded embedding slices,
concurrent ingests and runs, and hash-bucket partitions; on the real services and the real model."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest

from kb_assets_tests.corpora import EXAMPLE_CORPUS

pytestmark = pytest.mark.slow

REPO = EXAMPLE_CORPUS.parents[1]


def _docs(catalog, kb):
    return {d.source_path: d for d in catalog.list_documents([kb])}


def _child_env(**extra) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}


# the encoder ------------------------------------------------------------------------------------
def test_onnxruntime_and_torch_vectors_agree_on_the_sample_corpus(handbook, catalog, lake, settings):
    from kb_assets.embedding.model import EmbeddingModel

    texts = [
        t
        for d in _docs(catalog, "handbook").values()
        for t in lake.read("chunks", d.document_id)["embedding_input"].to_list()
    ]
    onnx = EmbeddingModel(settings.embedding_model, encoder="onnx", cache_dir=settings.cache_dir)
    torch = EmbeddingModel(settings.embedding_model, encoder="torch")
    assert onnx.backend == "onnx" and torch.backend == "torch" and len(texts) > 40
    cosines = (onnx.encode(texts) * torch.encode(texts)).sum(axis=1)
    assert cosines.min() >= 0.9999, cosines.min()


def test_a_missing_or_corrupt_onnx_cache_is_rebuilt(tmp_path, settings):
    from kb_assets.embedding.model import EmbeddingModel
    from kb_assets.embedding.onnx import model_folder

    reference = EmbeddingModel(settings.embedding_model, encoder="torch").encode(["How long are backups kept?"])
    folder = model_folder(EmbeddingModel(settings.embedding_model).path, tmp_path)
    stale = folder.with_name(folder.name.rsplit("-", 1)[0] + "-0123456789abcdef")  # an older exporter's
    other = folder.with_name("another_model-0123456789abcdef")  # another model's
    for kept in (stale, other):
        kept.mkdir(parents=True)
        (kept / "model.onnx").write_bytes(b"old")
    fresh = EmbeddingModel(settings.embedding_model, cache_dir=tmp_path)  # missing: exported
    file = folder / "model.onnx"
    weights = file.with_name("model.onnx.data")
    assert fresh.backend == "onnx" and file.exists() and file.with_name("model.onnx.json").exists()
    assert not stale.exists() and (other / "model.onnx").exists()  # stale exports go
    assert weights.stat().st_size > 50_000_000 > file.stat().st_size  # the weights lie apart
    exported = weights.stat().st_mtime_ns

    data = bytearray(weights.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 4096] = os.urandom(4096)  # flipped bytes in the weights
    weights.write_bytes(bytes(data))
    healed = EmbeddingModel(settings.embedding_model, cache_dir=tmp_path)
    assert healed.backend == "onnx" and weights.stat().st_mtime_ns != exported
    assert float(healed.encode(["How long are backups kept?"])[0] @ reference[0]) >= 0.9999

    size = file.stat().st_size
    file.write_bytes(file.read_bytes()[:1000])  # truncated graph
    assert EmbeddingModel(settings.embedding_model, cache_dir=tmp_path).backend == "onnx"
    assert file.stat().st_size == size

    weights.unlink()  # weights missing
    assert EmbeddingModel(settings.embedding_model, cache_dir=tmp_path).backend == "onnx"
    assert weights.stat().st_size > 50_000_000


def test_the_service_process_loads_neither_torch_nor_pyarrow(handbook, kb_home):
    """A real ``kb-assets serve`` answers searches (English, Chinese), lineage and pages with the ONNX
    encoder and the lake read by polars, while torch and pyarrow stay out of its process."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "kb_assets.cli", "serve", "--port", str(port)],
        env=_child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"

    def call(path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(base + path, data, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as answer:
            return json.loads(answer.read())

    try:
        deadline = time.monotonic() + 300
        while True:
            assert server.poll() is None, server.stderr.read().decode()[-2000:]
            try:
                call("/healthz")
                break
            except OSError:
                assert time.monotonic() < deadline, "kb-assets serve did not come up"
                time.sleep(0.5)
        english = call("/v1/kb/search", {"query": "How long are backups kept?", "knowledgeBaseIds": ["handbook"]})
        assert english["results"][0]["retrievalSource"] == "hybrid", english
        chinese = call("/v1/kb/search", {"query": "数据备份保留多少天？", "knowledgeBaseIds": ["handbook"]})
        assert any("35" in r["content"] for r in chinese["results"][:3]), chinese
        top = english["results"][0]
        lineage = call(f"/v1/chunks/{top['chunkId']}/lineage")
        assert lineage["chunkId"] == top["chunkId"] and lineage["pages"][0]["text"]
        assert call(f"/v1/documents/{top['documentId']}/pages/{top['pageIndex']}")["text"]
        maps = Path(f"/proc/{server.pid}/maps").read_text()
        assert "onnxruntime" in maps
        assert "libtorch_cpu" not in maps and "libarrow" not in maps
    finally:
        server.terminate()
        server.wait(timeout=30)


# page images off the critical path --------------------------------------------------------------
def test_a_page_image_is_rendered_on_first_request_and_cached(handbook, catalog, stores, settings):
    from fastapi.testclient import TestClient

    from kb_assets.service.api import create_app

    doc = _docs(catalog, "handbook")["platform-handbook.pdf"]
    key = catalog.read_pages(doc.document_id)[2]["image_key"]
    assert key == f"pages/{doc.document_id}/{doc.version}/2.png"
    stores.objects.delete(key)
    assert not stores.objects.exists(key)
    with TestClient(
        create_app(replace(settings, api_keys="")), client=("127.0.0.1", 5), base_url="http://localhost"
    ) as client:
        page = client.get(f"/v1/documents/{doc.document_id}/pages/2").json()
        first = client.get(page["pageImageUrl"])
        assert first.status_code == 200 and first.content.startswith(b"\x89PNG")
        assert stores.objects.exists(key)  # cached in the object store
        cached = stores.objects.path(key).stat().st_mtime_ns
        again = client.get(page["pageImageUrl"])
        assert again.status_code == 200 and again.content == first.content
        assert stores.objects.path(key).stat().st_mtime_ns == cached  # served, not rendered again
        other_version = key.replace(doc.version, "0" * 64)
        # a key of no stored page is not rendered (unsigned: this loopback app has no API keys)
        assert client.get(f"/v1/assets/{other_version}").status_code == 404
        assert not stores.objects.exists(other_version)


# one large document among small ones ---------------------------------------------------------------
def _large_text(paragraphs: int) -> str:
    return "\n\n".join(
        f"Section {i}. The relay station {i} forwards telemetry batch {i * 7} to the archive "
        f"every {i % 13 + 2} minutes and keeps a local copy for {i % 5 + 1} days."
        for i in range(paragraphs)
    )


def test_a_document_over_the_chunk_budget_is_refused_and_the_small_one_publishes(settings, tmp_path, catalog):
    from kb_assets.launch.ingest import ingest

    folder = tmp_path / "budget"
    folder.mkdir()
    (folder / "a-huge-log.txt").write_text(_large_text(3000))
    (folder / "z-note.md").write_text("# Note\n\nThe relay station reboots every Sunday at 03:00.\n")

    report = ingest([folder], "budget", replace(settings, max_chunks_per_document=200))

    docs = _docs(catalog, "budget")
    assert docs["z-note.md"].status == "published"
    (failure,) = report.failures
    assert failure.source_uri.endswith("a-huge-log.txt")
    assert "a-huge-log.txt" in failure.reason and "KB_MAX_CHUNKS_PER_DOCUMENT" in failure.reason
    assert docs["a-huge-log.txt"].status == "failed"


def test_a_large_document_is_embedded_in_slices_and_does_not_hold_up_the_small_one(settings, tmp_path, catalog, lake):
    from kb_assets.launch.ingest import ingest

    folder = tmp_path / "slices"
    folder.mkdir()
    (folder / "a-long-log.txt").write_text(_large_text(320))  # first in partition order; ~110 chunks
    (folder / "z-note.md").write_text("# Note\n\nThe relay station reboots every Sunday at 03:00.\n")

    report = ingest([folder], "slices", replace(settings, embedding_slice=16))

    assert not report.failures and len(report.run_ids) == 1
    docs = _docs(catalog, "slices")
    large, small = docs["a-long-log.txt"], docs["z-note.md"]
    assert large.status == small.status == "published" and large.chunk_count > 5 * 16
    assert small.updated_at < large.updated_at  # published after the first slice, not after the large one
    assert lake.read("embeddings", large.document_id).height == large.chunk_count


# concurrent ingests and runs ----------------------------------------------------------------------
def _no_duplicate_entities(milvus_client, collection, kb):
    rows = milvus_client.query(
        collection, filter=f'knowledge_base_id == "{kb}"', output_fields=["chunk_id"], limit=16384
    )
    ids = [r["chunk_id"] for r in rows]
    return len(ids) == len(set(ids)) and ids


def test_two_ingests_of_the_same_folder_started_together_both_succeed(
    handbook, tmp_path, catalog, milvus_client, stores, settings
):
    from kb_assets.pipeline.verify import verify

    folder = tmp_path / "twice"
    shutil.copytree(EXAMPLE_CORPUS, folder)
    command = [sys.executable, "-m", "kb_assets.cli", "ingest", str(folder), "--kb", "twice", "--json"]
    children = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_child_env())
        for _ in range(2)
    ]
    outputs = [child.communicate(timeout=900) for child in children]
    for child, (_out, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err[-3000:]
    docs = _docs(catalog, "twice")
    assert len(docs) == 8 and {d.status for d in docs.values()} == {"published"}
    assert _no_duplicate_entities(milvus_client, handbook.published.collection, "twice")
    assert verify(catalog, stores.lake, milvus_client, settings.alias).consistent


def test_three_runs_over_overlapping_ranges_leave_the_stores_consistent(
    handbook, tmp_path, catalog, milvus_client, stores, settings
):
    from kb_assets.launch.ingest import register
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.launch.runs import execute_runs
    from kb_assets.pipeline.planning import range_tags
    from kb_assets.pipeline.verify import verify

    folder = tmp_path / "overlap"
    shutil.copytree(EXAMPLE_CORPUS, folder)
    report, to_run, keys, _ = register([folder], "overlap", stores, dagster_instance(settings), settings)
    assert len(keys) == 8
    ranges = [
        range_tags(keys[0], keys[4], "overlap"),
        range_tags(keys[2], keys[6], "overlap"),
        range_tags(keys[3], keys[7], "overlap"),
    ]
    run_ids = execute_runs(ranges, replace(settings, concurrent_runs=3), done=lambda run_id: None)

    instance = dagster_instance(settings)
    assert len(run_ids) == 3 and all(instance.get_run_by_id(r).is_success for r in run_ids)
    docs = _docs(catalog, "overlap")
    assert {d.status for d in docs.values()} == {"published"}
    ids = _no_duplicate_entities(milvus_client, handbook.published.collection, "overlap")
    assert ids and len(ids) == sum(d.chunk_count for d in docs.values())
    assert verify(catalog, stores.lake, milvus_client, settings.alias).consistent


# hash-bucket partitions ---------------------------------------------------------------------------------
def test_hash_bucket_partitions_run_only_their_changed_documents(settings, tmp_path, catalog, lake):
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.pipeline.planning import is_bucket

    buckets = replace(settings, partitioning="buckets:2")
    folder = tmp_path / "buckets"
    folder.mkdir()
    for i in range(6):
        (folder / f"note-{i}.md").write_text(f"# Note {i}\n\nRelay station {i} reboots every day at 0{i}:00.\n")
    first = ingest([folder], "buckets", buckets)
    assert not first.failures and len(first.new) == 6
    instance = dagster_instance(settings)
    run = instance.get_run_by_id(first.run_ids[0])
    assert all(
        is_bucket(run.tags[t]) for t in ("dagster/asset_partition_range_start", "dagster/asset_partition_range_end")
    )
    docs = _docs(catalog, "buckets")
    assert {d.status for d in docs.values()} == {"published"}
    before = {path: lake.read("chunks", d.document_id)["run_id"].to_list() for path, d in docs.items()}

    (folder / "note-3.md").write_text("# Note 3\n\nRelay station 3 now reboots every week.\n")
    second = ingest([folder], "buckets", buckets)

    assert second.as_json()["documents"] == {"new": 0, "changed": 1, "unchanged": 5, "deleted": 0, "failed": 0}
    docs = _docs(catalog, "buckets")
    assert {d.status for d in docs.values()} == {"published"}
    after = {path: lake.read("chunks", d.document_id)["run_id"].to_list() for path, d in docs.items()}
    assert [p for p in after if after[p] != before[p]] == ["note-3.md"]  # the bucket's other documents untouched
    assert docs["note-3.md"].last_run_id in second.run_ids


def test_page_images_run_after_publishing_in_an_ingest_run(handbook, settings):
    from kb_assets.launch.instance import dagster_instance

    stats = sorted(dagster_instance(settings).get_run_step_stats(handbook.run_ids[0]), key=lambda s: s.start_time)
    order = [s.step_key for s in stats]
    assert order[-1] == "page_images" and order.index("embed_and_publish") < order.index("page_images")
