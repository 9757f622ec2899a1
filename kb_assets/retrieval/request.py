"""What a search is asked and what it answers: ``SearchRequest``, ``SearchResponse``, and the helpers
every stage uses to report into a response (warnings that name the error, timings)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kb_assets.lib.json_types import JsonObject

if TYPE_CHECKING:
    from kb_assets.stores.catalog.search_reads import PageFacts


@dataclass
class SearchRequest:
    query: str
    knowledge_base_ids: list[str] | None = None
    limit: int = 10
    min_score: float | None = None
    strategy: str | None = None  # None: the configured default
    filters: dict[str, str | None] | None = None  # period, kind, organisation: document metadata (scope.py)


# the stages every response times (``timingsMs``; 0.0: not run by this request), in milliseconds. Milvus
# searches run in parallel with encoding and locating, so stages overlap: ``total`` is the wall time.
STAGES = (
    "queryEncoding",  # the model reads the query
    "locate",  # pageindex: pages located by titles, summaries, keywords (Postgres)
    "denseSearch",  # Milvus dense searches (each call's own time, summed)
    "bm25Search",  # Milvus BM25 searches, knowledge base (and located pages without kept page ranges)
    "locatedChunks",  # pageindex: the located pages' chunks (kept term counts, then Milvus by id)
    "versions",  # the candidates' document rows: published version, BM25 statistics kept (Postgres)
    "lexicalStatistics",  # BM25 statistics and the candidates' term counts (Postgres)
    "fusion",  # hybrid scores of the candidates (stored vectors read for BM25-only hits)
    "rerank",  # pageindex second stage: coverage and proximity
    "pageCoverage",  # pageindex, long questions: the best pages' texts read and scored
    "pageScore",  # pageindex, filings: the best pages ordered by the trained page scorer (page_scorer.py)
    "pageFacts",  # page images and table-of-contents marks of the results' pages (Postgres)
    "context",  # each result's context passage: its page text read (Postgres) and the window chosen
    "other",  # the wall time no stage accounts for (``unaccounted``): a process's first search loads the model
    "total",
)


@dataclass
class SearchResponse:
    results: list[JsonObject] = field(default_factory=list)  # as the API answers them (``rows.py``)
    warnings: list[str] = field(default_factory=list)
    strategy: str | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)  # stage (``STAGES``) -> milliseconds
    # document id -> notice: a newer file failed, an older version serves
    last_good: dict[str, str] = field(default_factory=dict)
    # pageindex, filings: ((document id, page), FEATURES) ordered
    page_features: list[tuple[tuple[str, int], list[float]]] = field(default_factory=list)
    # what this search read of the catalog, so that nothing is read twice (not answered): page facts
    # ((document id, page) -> is_toc, image_key and, once read, text) and BM25 statistics (kb -> (chunks,
    # total length, term -> chunks holding it)) with the terms they were read for
    pages: dict[tuple[str, int], PageFacts] = field(default_factory=dict)
    statistics: dict[str, tuple[int, int, dict[str, int]]] = field(default_factory=dict)
    statistics_terms: dict[str, set[str]] = field(default_factory=dict)

    def as_json(self) -> JsonObject:
        timings = {stage: self.timings_ms.get(stage, 0.0) for stage in STAGES}
        timings["other"] = unaccounted(timings)
        return {"results": self.results, "warnings": self.warnings, "timingsMs": timings}

    def keep_statistics(self, statistics: dict[str, tuple[int, int, dict[str, int]]], terms: list[str]) -> None:
        """Keep BM25 statistics read for ``terms`` (``statistics_for`` answers from them)."""
        for kb, (chunks, length, frequencies) in statistics.items():
            known = self.statistics.get(kb, (chunks, length, {}))[2]
            self.statistics[kb] = (chunks, length, {**known, **frequencies})
            self.statistics_terms.setdefault(kb, set()).update(terms)

    def statistics_for(
        self, knowledge_base_ids: set[str], terms: list[str]
    ) -> dict[str, tuple[int, int, dict[str, int]]] | None:
        """The kept statistics of these knowledge bases for ``terms`` when all were read (None: some were not)."""
        if all(kb in self.statistics and set(terms) <= self.statistics_terms[kb] for kb in knowledge_base_ids):
            return {kb: self.statistics[kb] for kb in knowledge_base_ids}
        return None

    def add_ms(self, stage: str, started: float) -> None:
        """Add the milliseconds since ``started`` (a ``time.perf_counter()``) to a stage's time."""
        self.timings_ms[stage] = round(self.timings_ms.get(stage, 0.0) + elapsed_ms(started), 1)


def unaccounted(timings: dict[str, float]) -> float:
    """The milliseconds of ``total`` outside the stages: total less their critical path (the Milvus searches,
    and the locating followed by the located pages' chunks, run beside the query's encoding; the other stages one
    after another), at least 0. On a process's first search (the command line's) it is mostly loading the model
    and the collection; else reading the published collection, the request's scope and waits for a free worker."""
    beside = ("queryEncoding", "denseSearch", "bm25Search", "locate", "locatedChunks", "other", "total")
    after = sum(ms for stage, ms in timings.items() if stage not in beside)
    parallel = max(
        timings["queryEncoding"] + timings["denseSearch"],
        timings["bm25Search"],
        timings["locate"] + timings["locatedChunks"],
    )
    return round(max(0.0, timings["total"] - parallel - after), 1)


def short(error: BaseException | None, chars: int = 200) -> str:
    """An error's message on one line, at most ``chars`` characters (for warnings and logs)."""
    text = " ".join(str(error).split())
    return text if len(text) <= chars else text[: chars - 1] + "…"


def elapsed_ms(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()``), to one decimal."""
    return round((time.perf_counter() - started) * 1000, 1)
