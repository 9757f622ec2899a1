"""Encoder throughput on the same passages: plain sentence-transformers on torch (batch 32), our
onnxruntime fp32 encoder and its int8 variant; and how far each is from torch (cosine).

    .venv/bin/python benchmarks/encoders.py [--pdf R-data.pdf] [--passages 1000]

Passages are ~120-word windows of the text pypdfium2 extracts from the PDF (default: R-data from
the dev corpus cache). Prints passages/s per encoder, the load average, and min/mean cosine to torch.
The int8 figure is speed only: whether int8 is offered depends on retrieval quality
(``retrieval_quality.py`` on a home migrated to ``all-MiniLM-L6-v2+int8``).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

CACHE = Path("/work/main/corpus-cache/usr/share/doc/r-doc-pdf/manual")


def passages(pdf: Path, count: int, words: int = 120) -> list[str]:
    import pypdfium2

    document = pypdfium2.PdfDocument(str(pdf))
    text = " ".join(document[i].get_textpage().get_text_range() for i in range(len(document)))
    tokens = text.split()
    out = [" ".join(tokens[i : i + words]) for i in range(0, len(tokens), words)]
    # vary the lengths like real chunks do (headings, short paragraphs, full windows)
    return [p if n % 3 else " ".join(p.split()[: 8 + n % 40]) for n, p in enumerate(out)][:count]


def timed(encode, texts: list[str]) -> tuple[np.ndarray, float]:
    encode(texts[:8])  # warm up
    started = time.perf_counter()
    vectors = encode(texts)
    return np.asarray(vectors, dtype=np.float32), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pdf", type=Path, default=CACHE / "R-data.pdf")
    parser.add_argument("--passages", type=int, default=1000)
    args = parser.parse_args()
    texts = passages(args.pdf, args.passages)
    print(f"{len(texts)} passages from {args.pdf.name}; load average {os.getloadavg()[0]:.2f}")

    from sentence_transformers import SentenceTransformer

    from kb_assets.embedding.model import EmbeddingModel, resolve_model_path

    path, _ = resolve_model_path("all-MiniLM-L6-v2")
    plain = SentenceTransformer(str(path), device="cpu", local_files_only=True)
    reference, seconds = timed(lambda t: plain.encode(t, batch_size=32, normalize_embeddings=True), texts)
    print(f"torch (sentence-transformers, batch 32): {len(texts) / seconds:7.1f} passages/s")
    for model_id in ("all-MiniLM-L6-v2", "all-MiniLM-L6-v2+int8"):
        model = EmbeddingModel(model_id)
        model.encode(["warm"])  # exports / quantizes once (cached)
        vectors, seconds = timed(model.encode, texts)
        cosine = (vectors * reference).sum(axis=1)
        print(
            f"{model.backend:<40}: {len(texts) / seconds:7.1f} passages/s; cosine to torch "
            f"min {cosine.min():.5f} mean {cosine.mean():.5f}"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
