"""What a search is asked and what it answers: ``SearchRequest``, ``SearchResponse``, and the helpers
every stage uses to report into a response (warnings that name the error, timings)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class SearchRequest:
    query: str
    knowledge_base_ids: list[str] | None = None
    limit: int = 10
    min_score: float | None = None
    strategy: str | None = None  # None: the configured default
    filters: dict[str, str | None] | None = None  # period, kind, organisation: document metadata (scope.py)


@dataclass
class SearchResponse:
    results: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    strategy: str | None = None
    timings_ms: dict = field(default_factory=dict)
    last_good: dict = field(default_factory=dict)  # document id -> notice: a newer file failed, an older version serves

    def as_json(self) -> dict:
        return {"results": self.results, "warnings": self.warnings}


def short(error: BaseException | None, chars: int = 200) -> str:
    """An error's message on one line, at most ``chars`` characters (for warnings and logs)."""
    text = " ".join(str(error).split())
    return text if len(text) <= chars else text[: chars - 1] + "…"


def elapsed_ms(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()``), to one decimal."""
    return round((time.perf_counter() - started) * 1000, 1)
