"""The embedding-model loader: one instance per model, encoder and process, shared by ingest and search."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from kb_assets.embedding.model import EmbeddingModel, short_model_name
from kb_assets.stores.vectors import EmbeddingSpec


@lru_cache(maxsize=8)
def load_model(
    model_id: str, batch_size: int = 32, encoder: str = "onnx", cache_dir: Path | None = None, threads: int = 0
) -> EmbeddingModel:
    """The model (a packaged id or a local path), loaded once per process; never downloaded.
    ``encoder``: onnx (exported into ``cache_dir`` on first use) or torch; ``threads``: 0 = every core."""
    return EmbeddingModel(model_id, batch_size=batch_size, encoder=encoder, cache_dir=cache_dir, threads=threads)


def embedding_spec(model: EmbeddingModel) -> EmbeddingSpec:
    """What a collection records of the model that fills it: id, dimension, languages."""
    return EmbeddingSpec(
        model=model.model_id,
        dimension=model.dimension,
        languages=tuple(model.languages),
        short_name=short_model_name(model.model_id),
    )
