"""Fast tier: the bounded embedding slices, hash-bucket partitions, the chunk budget and the
throughput settings, as pure functions (no service, no model)."""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl
import pytest

from kb_assets.chunking.chunker import OverBudget, within_budget
from kb_assets.chunking.pieces import Piece
from kb_assets.chunking.schema import CHUNKS_SCHEMA
from kb_assets.embedding.schema import EMBEDDINGS_SCHEMA
from kb_assets.embedding.vectors import encode_in_slices, plan_vectors, vectors_frame
from kb_assets.pipeline.planning import is_bucket, partition_key, partition_keys
from kb_assets.settings import Settings
from kb_assets.stores.catalog import Document


def chunks_of(document_id: str, n: int) -> pl.DataFrame:
    texts = [f"{document_id} passage {i}" for i in range(n)]
    rows = [
        {name: None for name in CHUNKS_SCHEMA}
        | {
            "chunk_id": f"{document_id}-{i}",
            "document_id": document_id,
            "embedding_input": text,
            "embedding_input_sha": hashlib.sha256(text.encode()).hexdigest(),
        }
        for i, text in enumerate(texts)
    ]
    return pl.DataFrame(rows, schema=CHUNKS_SCHEMA)


class CountingEncoder:
    """Vectors whose first component numbers the call (so the test sees which slice made each)."""

    def __init__(self):
        self.calls: list[int] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        return np.array([[float(len(self.calls)), 1.0]] * len(texts), dtype=np.float32)


def test_a_small_document_is_ready_after_one_slice_while_a_large_one_needs_many():
    empty = pl.DataFrame(schema=EMBEDDINGS_SCHEMA)
    large = plan_vectors("large", chunks_of("large", 50), empty, "m", 2)
    small = plan_vectors("small", chunks_of("small", 3), empty, "m", 2)
    encoder, order = CountingEncoder(), []
    encode_in_slices(
        [large, small], encoder, 8, ready=lambda plan: order.append((plan.document_id, len(encoder.calls)))
    )
    assert encoder.calls == [8] * 6 + [5]  # bounded slices, every input once
    assert order == [("small", 1), ("large", 7)]  # the small one published after the first slice
    frame = vectors_frame(small, "m", 2, "run-1")
    assert frame.height == 3 and frame["vector"].to_list()[0] == [1.0, 1.0]


def test_stored_vectors_are_reused_and_a_document_needing_none_is_ready_before_any_encoding():
    chunks = chunks_of("done", 4)
    plan = plan_vectors("done", chunks, pl.DataFrame(schema=EMBEDDINGS_SCHEMA), "m", 2)
    plan.vectors = {sha: [0.0, 1.0] for sha in plan.missing}
    stored = vectors_frame(plan, "m", 2, "old")
    again = plan_vectors("done", chunks, stored, "m", 2)
    other_model = plan_vectors("done", chunks, stored, "other", 2)
    encoder, order = CountingEncoder(), []
    encode_in_slices(
        [other_model, again], encoder, 100, ready=lambda p: order.append((p.document_id, len(encoder.calls)))
    )
    assert again.missing == {} and len(other_model.missing) == 4
    assert order == [("done", 0), ("done", 1)] and encoder.calls == [4]


def test_a_document_over_the_chunk_budget_is_refused_before_its_window_is_applied():
    pieces = [Piece("paragraph", f"text {i}", (), 0, 0) for i in range(11)]
    assert within_budget(pieces, 11) == pieces and within_budget(pieces, None) == pieces
    with pytest.raises(OverBudget, match="at least 11 chunks, over the budget of 10"):
        within_budget(pieces, 10)


def test_hash_buckets_are_stable_and_name_many_documents():
    docs = [
        Document(
            f"doc-{i:024x}",
            "kb",
            f"n{i}.md",
            f"/r/n{i}.md",
            None,
            "v",
            1,
            None,
            None,
            None,
            "pending",
            None,
            None,
            None,
            None,
            None,
            None,
            source_root="/r",
            partition_key=f"kb/r/n{i}.md",
        )
        for i in range(200)
    ]
    keys = [partition_key(d, "buckets:16") for d in docs]
    assert len(set(keys)) == 16 and all(is_bucket(k) and k.endswith("-of-16") for k in keys)
    assert keys == [partition_key(d, "buckets:16") for d in docs]  # stable
    assert partition_key(docs[0], "documents") == "kb/r/n0.md" and not is_bucket("kb/r/n0.md")
    assert partition_keys(docs, "buckets:16") == list(dict.fromkeys(keys))  # each bucket once, first-seen order


@pytest.mark.parametrize(
    "env, field, expected",
    [
        ({}, "encoder", "onnx"),
        ({"KB_ENCODER": "torch"}, "encoder", "torch"),
        ({"KB_PARTITIONING": "Buckets:0256"}, "partitioning", "buckets:256"),
        ({"KB_CONCURRENT_RUNS": "3"}, "concurrent_runs", 3),
        ({"KB_MAX_CHUNKS_PER_DOCUMENT": "500"}, "max_chunks_per_document", 500),
        ({"KB_CACHE_DIR": "/srv/cache"}, "cache_dir", "/srv/cache"),
    ],
)
def test_throughput_settings_are_read_typed(env, field, expected):
    value = getattr(Settings.from_env({"KB_HOME": "/tmp/kb", **env}), field)
    assert (str(value) if field == "cache_dir" else value) == expected


def test_parse_workers_and_encoder_threads_share_the_cores_among_concurrent_runs():
    from kb_assets.lib.machine import cores

    assert Settings.from_env({"KB_HOME": "/tmp/kb", "KB_PARSE_WORKERS": "3"}).parse.workers == 3
    assert Settings.from_env({"KB_HOME": "/tmp/kb", "KB_ENCODER_THREADS": "3"}).encoder_threads == 3
    alone = Settings.from_env({"KB_HOME": "/tmp/kb"})
    assert alone.parse.workers == alone.encoder_threads == cores()
    runs = Settings.from_env({"KB_HOME": "/tmp/kb", "KB_CONCURRENT_RUNS": str(cores() * 2)})
    assert runs.parse.workers == runs.encoder_threads == 1
    with pytest.raises(ValueError, match="KB_ENCODER_THREADS"):
        Settings.from_env({"KB_HOME": "/tmp/kb", "KB_ENCODER_THREADS": "-1"})


@pytest.mark.parametrize(
    "env, message",
    [
        ({"KB_ENCODER": "tensorflow"}, "KB_ENCODER"),
        ({"KB_PARTITIONING": "buckets:0"}, "KB_PARTITIONING"),
        ({"KB_PARTITIONING": "hash"}, "KB_PARTITIONING"),
        ({"KB_CONCURRENT_RUNS": "0"}, "KB_CONCURRENT_RUNS"),
        ({"KB_MAX_CHUNKS_PER_DOCUMENT": "many"}, "KB_MAX_CHUNKS_PER_DOCUMENT"),
    ],
)
def test_bad_throughput_settings_are_refused_with_the_variable_named(env, message):
    with pytest.raises(ValueError, match=message):
        Settings.from_env({"KB_HOME": "/tmp/kb", **env})


def test_runs_launched_from_the_ui_use_the_in_process_executor(tmp_path):
    from kb_assets.definitions import make_definitions

    defs = make_definitions(Settings.from_env({"KB_HOME": str(tmp_path)}))
    assert defs.resolve_implicit_global_asset_job_def().executor_def.name == "in_process"
    assert defs.resolve_job_def("ingest_documents").executor_def.name == "in_process"
