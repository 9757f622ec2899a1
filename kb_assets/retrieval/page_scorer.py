"""A page scorer trained here (issue 44): a linear learning-to-rank model over page-level signals that orders the
best pages of a filings search.

``pageindex`` ranks a page by the sum of its parts (its best chunk's hybrid score, its locating score, a named
statement's and a routed analysis's bonus, its page coverage), with weights chosen by hand on the manuals and the
first filings questions. The scorer learns their weights, and those of signals the sum does not use (the page's
rank, whether it is a table of figures, where it lies in its filing, what kind of question asks, and their
products), from questions on development filings, by pairwise logistic regression: for each question, each
evidence page should score above each other page among the best ``PAGES`` (``benchmarks/filings/
train_page_scorer.py`` makes it; synthetic questions from the filings' own structure and the written and public
non-held-out questions, issuers split so that it is measured on issuers it never saw).

It is a small file beside this module (``page_scorer.json``: its version, the feature names, their means, scales
and weights). It scores the pages of filings only (a document whose metadata names a form or a filing's kind):
a manual's search is ranked as before. A missing or unreadable file, or one of another format or feature set,
leaves the hand-weighted order, with a warning logged once and in each response's ``warnings``; never an error.
Its version is part of the search's version (``search_version``, shown by ``GET /v1/service`` and
``kb-assets eval``).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kb_assets.lib.json_types import JsonObject
from kb_assets.retrieval import scope
from kb_assets.retrieval.context import is_table
from kb_assets.retrieval.request import SearchRequest, SearchResponse

if TYPE_CHECKING:
    from kb_assets.retrieval.search import Searcher
    from kb_assets.structure.metadata import DocumentMetadata

log = logging.getLogger(__name__)

SCORER_FILE = Path(__file__).with_name("page_scorer.json")
FORMAT = 1
PAGES = 20  # the best pages (by the hand-weighted relevance) the scorer orders
FILING_KINDS = ("annual report", "quarterly report", "current report", "earnings release")
# page signals, then the question's, then products of the two (the same for every page of a question: they only
# matter in the products)
PAGE_FEATURES = (
    "relevance",  # the hand-weighted sum pageindex ranks by
    "chunk",  # its best chunk's second-stage score
    "dense",  # its best chunk's dense score
    "lexical",  # its best chunk's normalized BM25 score
    "locate",  # its locating score (titles, summaries, keywords)
    "named",  # a statement the question names (``namedStatement``)
    "analysis",  # the routing value of an asked analysis (``analysis``)
    "analysis_statement",  # the same where it routes to a statement or the cover (``analysisStatement``)
    "coverage",  # the weighted share of the question's terms its best window holds (``pageCoverage``)
    "inverse_rank",  # 1 / its rank by relevance
    "table",  # most of its lines are rows of figures (``context.is_table``)
    "front",  # one of its filing's first three pages (a cover, a release's headline)
    "chunks",  # how many candidate chunks it has (log)
)
QUESTION_FEATURES = ("asked", "named_question", "long", "why")  # an analysis asked, a statement named, 8+ terms,
# a question asking what caused something (routing.WHY: its answer is a discussion, not a figure)
PRODUCTS = ("relevance", "named", "analysis", "analysis_statement", "coverage", "table", "front", "locate", "dense")
FEATURES = PAGE_FEATURES + tuple(f"{q}*{p}" for q in QUESTION_FEATURES for p in PRODUCTS)


@dataclass(frozen=True)
class PageScorer:
    version: str
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray

    def score(self, rows: np.ndarray) -> np.ndarray:
        """The scores of pages (one row of ``FEATURES`` each)."""
        return ((rows - self.mean) / self.scale) @ self.weights

    def as_json(self) -> JsonObject:
        return {
            "format": FORMAT,
            "version": self.version,
            "features": list(FEATURES),
            "mean": self.mean.round(6).tolist(),
            "scale": self.scale.round(6).tolist(),
            "weights": self.weights.round(6).tolist(),
        }


def load_scorer(path: Path | None = None) -> tuple[PageScorer | None, str | None]:
    """(the scorer, None), or (None, a warning saying why it is not used): file missing, unreadable, of another
    format or feature set (``path``: ``SCORER_FILE``). Read and logged once per file."""
    return _load(path or SCORER_FILE)


@lru_cache(maxsize=8)
def _load(path: Path) -> tuple[PageScorer | None, str | None]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT or tuple(data.get("features", ())) != FEATURES:
            raise ValueError(f"format {data.get('format')!r} with other features than this code's (format {FORMAT})")
        arrays = [np.asarray(data[name], dtype=np.float64) for name in ("mean", "scale", "weights")]
        if any(a.shape != (len(FEATURES),) for a in arrays) or not np.all(arrays[1] > 0):
            raise ValueError("arrays of the wrong size or a scale that is not positive")
        scorer = PageScorer(str(data["version"]), *arrays)
    except Exception as error:
        warning = f"page scorer {path.name} not used ({type(error).__name__}: {error}); pages keep the summed order"
        log.warning(warning)
        return None, warning
    return scorer, None


def scorer_version(path: Path | None = None) -> str:
    """The scorer's version, or ``none`` where it is not used."""
    scorer, _ = load_scorer(path)
    return scorer.version if scorer else "none"


def page_features(page: Mapping[str, float], question: Mapping[str, float]) -> list[float]:
    """One page's ``FEATURES`` from its signals (``page``: the names of ``PAGE_FEATURES``) and the question's
    (``QUESTION_FEATURES``: 0 or 1)."""
    values = [float(page.get(name, 0.0)) for name in PAGE_FEATURES]
    products = [float(question.get(q, 0.0)) * float(page.get(p, 0.0)) for q in QUESTION_FEATURES for p in PRODUCTS]
    return values + products


def train(
    groups: list[tuple[np.ndarray, np.ndarray]], l2: float = 1.0, steps: int = 400, version: str = ""
) -> PageScorer:
    """Pairwise logistic regression: ``groups`` of (features of a question's pages, 1 for an evidence page else 0);
    every (evidence, other) pair of a group should score in that order. Full-batch gradient descent with L2,
    features standardized over all pages; deterministic."""
    rows = np.vstack([x for x, _ in groups])
    mean, scale = rows.mean(axis=0), rows.std(axis=0)
    scale[scale < 1e-9] = 1.0
    pairs = []
    for x, y in groups:
        z = (x - mean) / scale
        good, bad = z[y > 0], z[y <= 0]
        if len(good) and len(bad):
            pairs.append((good[:, None, :] - bad[None, :, :]).reshape(-1, z.shape[1]))
    diff = np.vstack(pairs)
    w = np.zeros(diff.shape[1])
    rate = 0.5
    for _ in range(steps):
        margin = diff @ w
        p = 0.5 * (1 + np.tanh(-margin / 2))  # sigmoid(-margin), stable
        grad = -(diff * p[:, None]).mean(axis=0) + l2 * w / len(diff) * 10
        w -= rate * grad
    return PageScorer(version, mean, scale, w)


def is_filing(metadata: DocumentMetadata | None) -> bool:
    return metadata is not None and (bool(metadata.get("form")) or metadata.get("kind") in FILING_KINDS)


def order_pages(
    searcher: Searcher,
    request: SearchRequest,
    response: SearchResponse,
    by_page: dict[tuple[str, int], list[JsonObject]],
    relevance: dict[tuple[str, int], float],
    locate_score: dict[tuple[str, int], float],
    question: Mapping[str, float],
    texts: dict[tuple[str, int], str],
) -> None:
    """Order the ``PAGES`` best pages of a filings search by the scorer (in place: their relevance becomes the
    scorer's score above every other page's; ``pageScore`` in their rows' ``scores``). The pages' features go to
    ``response.page_features`` (for training). Nothing changes for other documents' searches."""
    started = time.perf_counter()
    known = scope.known_metadata(searcher, request.knowledge_base_ids)
    head = [key for key in sorted(relevance, key=lambda k: -relevance[k])[:PAGES] if is_filing(known.get(key[0]))]
    if not head:
        return
    missing = [key for key in head if key not in texts]
    if missing:
        facts = searcher.page_facts(missing, response, with_text=True)
        texts = {**texts, **{key: fact.text or "" for key, fact in facts.items()}}
    rows = []
    for rank, key in enumerate(head, 1):
        best = by_page[key][0]
        scores = best["scores"]
        signals = {
            "relevance": relevance[key],
            "chunk": scores.get("rerank", best["score"]),
            "dense": scores.get("dense") or 0.0,
            "lexical": scores.get("lexical") or 0.0,
            "locate": locate_score.get(key, 0.0),
            "named": scores.get("namedStatement", 0.0),
            "analysis": scores.get("analysis", 0.0),
            "analysis_statement": scores.get("analysisStatement", 0.0),
            "coverage": scores.get("pageCoverage", 0.0),
            "inverse_rank": 1.0 / rank,
            "table": float(is_table(texts.get(key, ""))),
            "front": float(key[1] < 3),
            "chunks": math.log1p(len(by_page[key])),
        }
        rows.append(page_features(signals, question))
    response.page_features = list(zip(head, rows, strict=True))
    scorer, warning = load_scorer()
    if scorer is None:
        response.warnings.append(warning or "page scorer not used")
    else:
        top = max(relevance.values()) + 1.0
        for key, value in zip(head, scorer.score(np.asarray(rows)), strict=True):
            relevance[key] = top + 10.0 + float(value)  # above every page the scorer does not order
            for row in by_page[key]:
                row["scores"]["pageScore"] = round(float(value), 6)
    response.add_ms("pageScore", started)
