"""Vectors of chunks for one model: stored vectors of unchanged embedding inputs are reused, the rest
are encoded in one batch (shared by the ``embeddings`` asset, migration and verify --repair)."""

from __future__ import annotations

import polars as pl

from kb_assets.embedding import EMBEDDING_VERSION
from kb_assets.embedding.model import EmbeddingModel
from kb_assets.stores.lake import EMBEDDINGS_SCHEMA


def vectors_for(documents: list[tuple[pl.DataFrame, pl.DataFrame]], model: EmbeddingModel, model_id: str,
                run_id: str, version: str = EMBEDDING_VERSION) -> list[tuple[pl.DataFrame, int]]:
    """For each document's (chunk rows, stored embedding rows): its embedding rows for ``model`` and how
    many were encoded now. Stored rows count only when made by the same model id, dimension and encoding
    ``version``; a reused vector keeps the run id that encoded it."""
    plans, to_encode = [], []
    for chunks, stored in documents:
        stored = stored.filter((pl.col("model") == model_id) & (pl.col("dimension") == model.dimension)
                               & (pl.col("pipeline_version") == version))
        reusable = dict(zip(stored["embedding_input_sha"].to_list(), stored["vector"].to_list()))
        encoded_by = dict(zip(stored["embedding_input_sha"].to_list(), stored["run_id"].to_list()))
        missing = {sha: text for sha, text in zip(chunks["embedding_input_sha"].to_list(),
                                                  chunks["embedding_input"].to_list()) if sha not in reusable}
        plans.append((chunks, reusable, encoded_by, list(missing), len(to_encode)))
        to_encode.extend(missing.values())
    encoded = model.encode(to_encode)
    out = []
    for chunks, reusable, encoded_by, missing, offset in plans:
        lookup = {**reusable, **{sha: encoded[offset + i].tolist() for i, sha in enumerate(missing)}}
        shas = chunks["embedding_input_sha"].to_list()
        out.append((pl.DataFrame({
            "chunk_id": chunks["chunk_id"],
            "document_id": chunks["document_id"],
            "embedding_input_sha": chunks["embedding_input_sha"],
            "model": [model_id] * chunks.height,
            "dimension": [model.dimension] * chunks.height,
            "vector": [lookup[sha] for sha in shas],
            "run_id": [encoded_by.get(sha, run_id) for sha in shas],
            "pipeline_version": [version] * chunks.height,
        }, schema=EMBEDDINGS_SCHEMA), len(missing)))
    return out
