"""Over which chunks BM25 statistics should be gathered: the whole collection, each knowledge base, or
each document; ``retrieval_quality.py`` on the dev corpus with the candidates' BM25 computed from the
lake's chunks at the chosen scope (``kb_assets/lexical.py``'s terms and formula).

    .venv/bin/python benchmarks/bm25_scopes.py {collection,knowledge-base,document} -- --home .kb-bench --splits dev

The product keeps per-knowledge-base statistics in Postgres (``retrieval/lexical_scores.py``); this
script recomputes them from the lake so that the other scopes can be measured beside it (``knowledge-base``
here gives the product's figures). ``collection`` is what a Milvus that gathers statistics over the
whole collection would give. Measured on the dev split (hit@1 / hit@5 / MRR, default strategy):
``knowledge-base`` gives the product's figures (Chinese details 0.75 / 0.88 / 0.80, titles 0.95 / 1.00 /
0.97, paraphrases 0.60 / 0.90 / 0.72); ``collection`` gives Chinese details 0.69 / 0.83 / 0.76 (titles
0.96 / 1.00 / 0.98, paraphrases 0.63 / 0.87 / 0.74, English details 0.91 / 0.99 against 0.92 / 0.99):
weighed by the English manuals' vocabulary, every Chinese word is rare and fewer tell pages apart.
With jieba's default mode for chunks too, ``document`` and ``knowledge-base`` gave the same figures.
Figures in README "Searching".
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from retrieval_quality import run_wrapped, wrapper_args

REPO = Path(__file__).resolve().parents[1]


def lake_statistics(home: Path, scope: str):
    """chunk id -> (term counts, length, scope key), and scope key -> ``Statistics``, from the lake's chunks."""
    import polars as pl

    from kb_assets.lexical import Statistics, chunk_terms

    frames = [pl.read_parquet(f, columns=["chunk_id", "content", "document_id", "knowledge_base_id"])
              for f in sorted((home / "lake" / "chunks").glob("*.parquet"))]
    frame = pl.concat(frames)
    key_of = {"collection": lambda row: "", "knowledge-base": lambda row: row[3], "document": lambda row: row[2]}[scope]
    counted, frequencies, chunks, lengths = {}, {}, Counter(), Counter()
    for row, terms in zip(frame.iter_rows(), chunk_terms(zip(frame["chunk_id"], frame["content"]))):
        key = key_of(row)
        counted[terms.chunk_id] = (terms.counts, terms.length, key)
        frequencies.setdefault(key, Counter()).update(terms.counts.keys())
        chunks[key] += 1
        lengths[key] += terms.length
    return counted, {key: Statistics(chunks[key], lengths[key] / chunks[key], dict(frequencies[key])) for key in chunks}


def run_with_bm25(scorer, quality_args: list[str]) -> None:
    """``retrieval_quality.py`` with every BM25 candidate scored by ``scorer(the query's terms)``, a
    function of the chunk id (None: a chunk this lake does not hold), instead of the statistics kept in
    Postgres."""
    from kb_assets.lexical import query_terms
    from kb_assets.retrieval import scoring

    hybrid = scoring.score

    def rescored(query, found, weights, warnings, read_vectors):
        if found.bm25_error is None:
            chunk_score = scorer(query_terms(query.bm25_text or query.text))
            scores = {chunk_id: chunk_score(chunk_id) for chunk_id in found.hits}
            scores = {chunk_id: score for chunk_id, score in scores.items() if score is not None and score > 0}
            found = replace(found, bm25=scores, no_bm25=set(found.hits) - set(scores))
        return hybrid(query, found, weights, warnings, read_vectors)

    scoring.score = rescored
    run_wrapped([*quality_args, "--set", "kept_bm25_statistics=false"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scope", choices=["collection", "knowledge-base", "document"])
    own, quality_args, home = wrapper_args(sys.argv)
    args = parser.parse_args(own)
    sys.path.insert(0, str(REPO))
    from kb_assets.lexical import bm25

    counted, statistics = lake_statistics(home, args.scope)

    def at_scope(asked):
        def score(chunk_id):
            if chunk_id not in counted:
                return None
            counts, length, key = counted[chunk_id]
            return bm25(asked, counts, length, statistics[key])
        return score

    run_with_bm25(at_scope, quality_args)


if __name__ == "__main__":
    main()
