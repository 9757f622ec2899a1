"""Retrieval evaluation on labelled questions: page-hit@1/@5, MRR and latency, per knowledge base.

A question (one JSON line) names its knowledge base ``kb``, the source ``file`` (matched against the
end of a result's ``sourceUri``), the 0-based page range ``pages`` [first, last] of the answer and the
table-of-contents pages ``toc_pages``. A result is a hit when it comes from that file and its page range
``[pageIndex, pageEnd]`` overlaps ``pages`` without lying wholly on table-of-contents pages.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable

K_FOR_MRR = 10


def load_questions(path: Path) -> list[dict]:
    questions = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                questions.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not a JSON line ({error})") from None
    return questions


def is_hit(result: dict, question: dict) -> bool:
    source = (result.get("sourceUri") or "").replace("\\", "/")
    if not source.endswith(question["file"]) and Path(source).name != Path(question["file"]).name:
        return False
    start, end = result["pageIndex"], result.get("pageEnd", result["pageIndex"])
    first, last = question["pages"]
    if end < first or start > last:
        return False
    toc = set(question.get("toc_pages") or [])
    return not all(page in toc for page in range(start, end + 1))


def first_hit_rank(results: list[dict], question: dict) -> int | None:
    for rank, result in enumerate(results[:K_FOR_MRR], 1):
        if is_hit(result, question):
            return rank
    return None


def evaluate(search: Callable[[dict], list[dict]], questions: list[dict]) -> dict:
    """Scores of a search function (question -> ranked results) per knowledge base and overall."""
    per_kb: dict[str, list[tuple[int | None, float]]] = defaultdict(list)
    for question in questions:
        started = time.perf_counter()
        results = search(question)
        elapsed_ms = (time.perf_counter() - started) * 1000
        per_kb[question["kb"]].append((first_hit_rank(results, question), elapsed_ms))
    report = {kb: summarize(rows) for kb, rows in sorted(per_kb.items())}
    report["overall"] = summarize([row for rows in per_kb.values() for row in rows])
    return report


def summarize(rows: list[tuple[int | None, float]]) -> dict:
    if not rows:
        return {"questions": 0}
    ranks = [rank for rank, _ in rows]
    latencies = sorted(ms for _, ms in rows)
    return {
        "questions": len(rows),
        "hit@1": round(sum(1 for r in ranks if r == 1) / len(rows), 3),
        "hit@5": round(sum(1 for r in ranks if r is not None and r <= 5) / len(rows), 3),
        "mrr": round(sum(1 / r for r in ranks if r is not None) / len(rows), 3),
        "latencyP50Ms": round(statistics.median(latencies), 1),
        "latencyP95Ms": round(latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))], 1),
    }
