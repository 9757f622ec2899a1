"""The torch encoder: sentence-transformers on the CPU (``KB_ENCODER=torch``, and the fallback when
the ONNX export cannot be made). Also what the ONNX export is made from (export.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kb_assets.lib.machine import use_offline_model_libraries

if TYPE_CHECKING:
    import torch

MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def load_sentence_transformer(source: Path):
    """The sentence-transformers model of a local folder, on the CPU, offline."""
    use_offline_model_libraries()
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    return SentenceTransformer(str(source), device="cpu", local_files_only=True)


def features(model: Any, input_ids: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """The inputs the model's tokenizer would give it (token types are all 0 for single texts)."""
    import torch

    given = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(input_ids)}
    wanted = set(getattr(model.tokenizer, "model_input_names", MODEL_INPUTS))
    return {name: value for name, value in given.items() if name in wanted}


class TorchRunner:
    """Runs the sentence-transformers pipeline (transformer, pooling, normalization) on token ids."""

    name = "torch"

    def __init__(self, source: Path, threads: int):
        import torch

        torch.set_num_threads(max(1, threads))
        self.model = load_sentence_transformer(source)
        self.dimension = int(self.model.get_embedding_dimension())

    def run(self, input_ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        import torch

        with torch.inference_mode():
            out = self.model(features(self.model, torch.from_numpy(input_ids), torch.from_numpy(mask)))
        return out["sentence_embedding"].float().numpy()
