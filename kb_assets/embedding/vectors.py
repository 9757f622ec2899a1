"""Vectors of chunks for one model: stored vectors of unchanged embedding inputs are reused, the rest
are encoded, in bounded slices (shared by the ``embeddings`` asset, migration and verify --repair).

``encode_in_slices`` is how a run embeds many documents without letting a large one hold up the
others: documents go smallest first (by inputs left to encode), their inputs are encoded
``slice_size`` at a time, and each document is handed to ``ready`` (which publishes it) as soon as its
last input is encoded; a document waits for at most one slice of another's. A document that needs
several slices checkpoints its vectors so far (``checkpoint``), so a killed run resumes where it was.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from kb_assets.embedding import EMBEDDING_VERSION
from kb_assets.embedding.model import EmbeddingModel
from kb_assets.embedding.schema import EMBEDDINGS_SCHEMA

CHECKPOINT_SECONDS = 60.0  # a document still encoding saves its vectors so far at most this often


@dataclass
class DocumentVectors:
    """One document's chunks, the vectors it can reuse and the inputs it still needs encoded."""

    document_id: str
    chunks: pl.DataFrame
    vectors: dict[str, list[float]]  # embedding_input_sha -> vector (reused or encoded now)
    missing: dict[str, str]  # embedding_input_sha -> embedding_input, to encode
    encoded_by: dict[str, str] = field(default_factory=dict)  # embedding_input_sha -> run id of a reused vector
    version: str = EMBEDDING_VERSION  # the encoding version the vectors are of
    encoded: int = 0
    checkpointed: float = field(default_factory=time.monotonic)

    @property
    def remaining(self) -> int:
        return sum(1 for sha in self.missing if sha not in self.vectors)


def plan_vectors(
    document_id: str,
    chunks: pl.DataFrame,
    stored: pl.DataFrame,
    model_id: str,
    dimension: int,
    version: str = EMBEDDING_VERSION,
) -> DocumentVectors:
    """What a document needs: stored rows count only when made by the same model id, dimension and
    encoding ``version``; a reused vector keeps the run id that encoded it."""
    stored = stored.filter(
        (pl.col("model") == model_id) & (pl.col("dimension") == dimension) & (pl.col("pipeline_version") == version)
    )
    reusable = dict(zip(stored["embedding_input_sha"].to_list(), stored["vector"].to_list(), strict=False))
    encoded_by = dict(zip(stored["embedding_input_sha"].to_list(), stored["run_id"].to_list(), strict=False))
    missing = {
        sha: text
        for sha, text in zip(chunks["embedding_input_sha"].to_list(), chunks["embedding_input"].to_list(), strict=False)
        if sha not in reusable
    }
    needed = set(chunks["embedding_input_sha"].to_list())
    return DocumentVectors(
        document_id,
        chunks,
        {s: v for s, v in reusable.items() if s in needed},
        missing,
        {s: r for s, r in encoded_by.items() if s in needed},
        version,
    )


def vectors_frame(
    plan: DocumentVectors, model_id: str, dimension: int, run_id: str, partial: bool = False
) -> pl.DataFrame:
    """The document's embedding rows (``partial``: only the chunks that have a vector yet)."""
    chunks = plan.chunks
    if partial:
        chunks = chunks.filter(pl.col("embedding_input_sha").is_in(list(plan.vectors)))
    shas = chunks["embedding_input_sha"].to_list()
    return pl.DataFrame(
        {
            "chunk_id": chunks["chunk_id"],
            "document_id": chunks["document_id"],
            "embedding_input_sha": chunks["embedding_input_sha"],
            "model": [model_id] * chunks.height,
            "dimension": [dimension] * chunks.height,
            "vector": [plan.vectors[sha] for sha in shas],
            "run_id": [plan.encoded_by.get(sha, run_id) for sha in shas],
            "pipeline_version": [plan.version] * chunks.height,
        },
        schema=EMBEDDINGS_SCHEMA,
    )


def encode_in_slices(
    plans: list[DocumentVectors],
    encode: Callable[[list[str]], np.ndarray],
    slice_size: int,
    ready: Callable[[DocumentVectors], None],
    checkpoint: Callable[[DocumentVectors], None] | None = None,
    slice_done: Callable[[], None] = lambda: None,
) -> None:
    """Encode what the documents miss, ``slice_size`` inputs at a time, smallest documents first;
    call ``ready`` for each document as soon as it has every vector (documents needing none first), and
    ``slice_done`` after each slice's ``ready`` calls (and after those needing none): where a caller
    publishes what became ready in one batch. ``ready`` handles a document's own failures; an encoding
    failure raises."""
    order = sorted(plans, key=lambda p: p.remaining)
    queue = [(plan, sha) for plan in order for sha in plan.missing if sha not in plan.vectors]
    for plan in order:
        if plan.remaining == 0:
            ready(plan)
    slice_done()
    for start in range(0, len(queue), max(1, slice_size)):
        part = queue[start : start + slice_size]
        vectors = encode([plan.missing[sha] for plan, sha in part])
        touched: dict[str, DocumentVectors] = {}
        for (plan, sha), vector in zip(part, vectors, strict=False):
            plan.vectors[sha] = vector.tolist()
            plan.encoded += 1
            touched[plan.document_id] = plan
        for plan in touched.values():
            if plan.remaining == 0:
                ready(plan)
            elif checkpoint is not None and time.monotonic() - plan.checkpointed >= CHECKPOINT_SECONDS:
                checkpoint(plan)
                plan.checkpointed = time.monotonic()
        slice_done()


def vectors_for(
    documents: list[tuple[pl.DataFrame, pl.DataFrame]],
    model: EmbeddingModel,
    model_id: str,
    run_id: str,
    version: str = EMBEDDING_VERSION,
) -> list[tuple[pl.DataFrame, int]]:
    """For each document's (chunk rows, stored embedding rows): its embedding rows for ``model`` and how
    many were encoded now (one call, for migration and repair)."""
    plans = [
        plan_vectors(str(n), chunks, stored, model_id, model.dimension, version)
        for n, (chunks, stored) in enumerate(documents)
    ]
    encode_in_slices(plans, model.encode, max(1, sum(len(p.missing) for p in plans)), ready=lambda plan: None)
    return [(vectors_frame(plan, model_id, model.dimension, run_id), plan.encoded) for plan in plans]
