"""The embedding-model loader: one instance per model id and process, shared by ingest and search."""

from __future__ import annotations

from functools import lru_cache

from kb_assets.embedding.model import EmbeddingModel, short_model_name
from kb_assets.settings import use_offline_model_libraries
from kb_assets.stores.vectors import EmbeddingSpec


@lru_cache(maxsize=4)
def load_model(model_id: str, batch_size: int = 32) -> EmbeddingModel:
    """The model (a packaged id or a local path), loaded once per process; never downloaded."""
    use_offline_model_libraries()
    return EmbeddingModel(model_id, batch_size=batch_size)


def embedding_spec(model: EmbeddingModel) -> EmbeddingSpec:
    """What a collection records of the model that fills it: id, dimension, languages."""
    return EmbeddingSpec(model=model.model_id, dimension=model.dimension, languages=tuple(model.languages),
                         short_name=short_model_name(model.model_id))
