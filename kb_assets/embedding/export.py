"""Export a sentence-transformers folder to ONNX (and quantize it): run by ``onnx.py`` in a child
process, so that only this short-lived process imports torch.

    python -m kb_assets.embedding.export MODEL_FOLDER CACHE_FOLDER [--quantize int8]

Writes ``model.onnx`` (the whole pipeline: transformer, pooling, normalization; opset 17, the
TorchScript exporter, eager attention) with its weights in ``model.onnx.data`` beside it, and
``model-int8.onnx`` on request, each with a ``.json`` record: sha256 (of the weights too), the probe's
token ids and the vectors torch gives for them. Files are written under temporary names and renamed,
the record last.
"""

from __future__ import annotations

import argparse
import json
import os
import warnings
from pathlib import Path
from typing import Any, TypedDict

from kb_assets.embedding.onnx import VARIANTS, export_sha256, weights_file
from kb_assets.embedding.torch_runner import MODEL_INPUTS, features, load_sentence_transformer

# short, long (truncated at the window), non-English and code-like texts, padded into one batch
PROBE_TEXTS = [
    "How long are backups kept?",
    "Nightly backups of the orders database are kept for 35 days in the cold tier. " * 30,
    "数据平台的备份每天执行一次，备份保留三十五天。",
    'write.table(x, file = "out.csv", sep = ",", col.names = NA, qmethod = "double")',
]


def write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


class Probe(TypedDict):
    """The probe texts' token ids and torch's vectors for them: what an export must reproduce."""

    input_ids: list[list[int]]
    vectors: list[list[float]]


def probe(model: Any) -> Probe:
    """The probe's token ids (as the window tokenizer cuts them) and torch's vectors for them."""
    import torch

    encoded = model.tokenizer(
        PROBE_TEXTS, truncation=True, max_length=model.max_seq_length, padding=True, return_tensors="pt"
    )
    with torch.inference_mode():
        vectors = model(features(model, encoded["input_ids"], encoded["attention_mask"]))["sentence_embedding"]
    vectors = torch.nn.functional.normalize(vectors.float(), dim=1).numpy()
    pairs = zip(encoded["input_ids"], encoded["attention_mask"], strict=True)
    rows = [ids[: int(mask.sum())].tolist() for ids, mask in pairs]
    return {"input_ids": rows, "vectors": vectors.round(7).tolist()}


def eager_attention(model) -> None:
    """Export attention as plain MatMul/Softmax: onnxruntime fuses that into its own attention kernel,
    while the traced ``sdpa`` graph it does not (MiniLM on 2 cores, 324 passages of R-admin: 63.7
    against 49.2 passages/s; cosine to torch 1.00000 for both)."""
    for module in model.modules():
        transformer = getattr(module, "auto_model", None)
        if transformer is not None:
            transformer.set_attn_implementation("eager")


def export_fp32(model, target: Path) -> None:
    import torch

    class Pipeline(torch.nn.Module):
        """The sentence-transformers modules with the tokenizer's inputs as keyword tensors (the
        TorchScript exporter passes positional ones)."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            given = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
            return self.model({k: v for k, v in given.items() if v is not None})["sentence_embedding"]

    eager_attention(model)
    names = [n for n in MODEL_INPUTS if n in set(getattr(model.tokenizer, "model_input_names", MODEL_INPUTS))]
    example = model.tokenizer(
        PROBE_TEXTS[:2], truncation=True, max_length=model.max_seq_length, padding=True, return_tensors="pt"
    )
    if "token_type_ids" in names and "token_type_ids" not in example:
        example["token_type_ids"] = torch.zeros_like(example["input_ids"])
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Pipeline(model).eval(),
            tuple(example[n] for n in names),
            str(temporary),
            input_names=names,
            output_names=["sentence_embedding"],
            opset_version=17,
            dynamo=False,
            dynamic_axes={**{n: {0: "batch", 1: "tokens"} for n in names}, "sentence_embedding": {0: "batch"}},
        )
    weights_apart(temporary, target)


def weights_apart(exported: Path, target: Path) -> None:
    """Move the weights of ``exported`` into ``target``'s external data file and write ``target``:
    onnxruntime maps external weights from the file instead of copying them onto the heap, so a
    process that encodes a few queries keeps only the pages it reads (the retrieval service: about 70
    MB less resident)."""
    import onnx

    graph = onnx.load(str(exported))
    weights = weights_file(target)
    weights.unlink(missing_ok=True)  # onnx appends to an existing data file
    temporary = target.with_name(f".{target.name}.{os.getpid()}.split.tmp")
    onnx.save_model(
        graph,
        str(temporary),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=weights.name,
        size_threshold=1024,
    )
    os.replace(temporary, target)
    exported.unlink()


def quantize_int8(source: Path, target: Path) -> None:
    """Dynamic int8 quantization of the MatMul weights, per output channel; embeddings, attention
    softmax, layer norms and pooling stay fp32."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    quantize_dynamic(
        str(source),
        str(temporary),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
        extra_options={"MatMulConstBOnly": True},
    )
    os.replace(temporary, target)


def fp32_intact(fp32: Path) -> bool:
    """The fp32 export is there and matches its record (int8 is made from it)."""
    try:
        return json.loads(fp32.with_name(fp32.name + ".json").read_text())["sha256"] == export_sha256(fp32)
    except (OSError, ValueError, KeyError):
        return False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("source", type=Path)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--quantize", choices=[v for v in VARIANTS if v])
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    model = load_sentence_transformer(args.source)
    record = {
        "source": str(args.source),
        "probe": probe(model),
        "maxTokens": model.max_seq_length,
        "dimension": int(model.get_embedding_dimension()),
    }
    fp32 = args.folder / VARIANTS[None]
    if not fp32_intact(fp32):
        export_fp32(model, fp32)
        write_atomically(
            fp32.with_name(fp32.name + ".json"), json.dumps({**record, "sha256": export_sha256(fp32)}).encode()
        )
    if args.quantize:
        target = args.folder / VARIANTS[args.quantize]
        quantize_int8(fp32, target)
        write_atomically(
            target.with_name(target.name + ".json"),
            json.dumps({**record, "quantization": args.quantize, "sha256": export_sha256(target)}).encode(),
        )


if __name__ == "__main__":
    main()
