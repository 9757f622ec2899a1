"""Retrieval evaluation on labelled questions: page-hit@1/@5, MRR and latency, per knowledge base.

A question (one JSON line) names its knowledge base ``kb``, the source ``file`` (matched against the
end of a result's ``sourceUri``), the 0-based page range ``pages`` [first, last] of the answer and the
table-of-contents pages ``toc_pages``. A result is a hit when it comes from that file and its page range
``[pageIndex, pageEnd]`` overlaps ``pages`` without lying wholly on table-of-contents pages.

A question with an ``answer`` phrase (``benchmarks/detail_questions.jsonl``) is also scored by
answer-in-context: a result is an answer hit when the phrase, whitespace-collapsed and case-folded, is
inside the text the result hands a reader (its ``context`` when there is one, else its ``content``);
for a Chinese question (``lang: zh``) the comparison with all whitespace removed counts too (PDF line
breaks split Chinese text).
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from kb_assets.lib.json_types import JsonObject

K_FOR_MRR = 10


def load_questions(path: Path) -> list[JsonObject]:
    """The questions of a JSON-lines file, each as written (the fields above, and whatever a benchmark adds)."""
    questions = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                questions.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not a JSON line ({error})") from None
    return questions


def is_hit(result: JsonObject, question: JsonObject) -> bool:
    source = (result.get("sourceUri") or "").replace("\\", "/")
    if not source.endswith(question["file"]) and Path(source).name != Path(question["file"]).name:
        return False
    start: int = result["pageIndex"]
    end: int = result.get("pageEnd", start)
    first, last = question["pages"]
    if end < first or start > last:
        return False
    toc = set(question.get("toc_pages") or [])
    return not all(page in toc for page in range(start, end + 1))


def first_hit_rank(results: list[JsonObject], question: JsonObject) -> int | None:
    for rank, result in enumerate(results[:K_FOR_MRR], 1):
        if is_hit(result, question):
            return rank
    return None


# typographic quotes as ASCII ones: the PDF text layer has “服务器”, docling-parse's text "服务器"
_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2018": "'", "\u2019": "'", "\u201a": "'"})


def _collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text.translate(_QUOTES)).strip().casefold()


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text.translate(_QUOTES)).casefold()


def answer_in(answer: str, text: str, lang: str = "en") -> bool:
    """The answer phrase inside a text: whitespace-collapsed, case-folded, typographic quotes as ASCII
    ones; for Chinese (``zh``) the comparison with all whitespace removed counts too. A Markdown table is
    read as it renders: its cell separators (``|``) as spaces, since answers were checked on the PDF's
    text, where a table row is its cells separated by spaces, and an escaped pipe (``\\|``) as a pipe."""
    unescaped = text.replace("\\|", "\x00")
    for variant in (text, unescaped.replace("|", " ").replace("\x00", "|")):
        if _collapse(answer) in _collapse(variant) or (lang == "zh" and _squeeze(answer) in _squeeze(variant)):
            return True
    return False


def returned_text(result: JsonObject) -> str:
    """What a reader of the result gets: its ``context`` when the response adds one (the passage around
    the chunk, which holds the chunk), else its ``content``."""
    return result.get("context") or result.get("content") or ""


def first_answer_rank(results: list[JsonObject], question: JsonObject) -> int | None:
    """The rank of the first result whose returned text holds the question's answer phrase (top 10)."""
    for rank, result in enumerate(results[:K_FOR_MRR], 1):
        if answer_in(question["answer"], returned_text(result), question.get("lang", "en")):
            return rank
    return None


def evaluate(search: Callable[[JsonObject], list[JsonObject]], questions: list[JsonObject]) -> dict[str, JsonObject]:
    """Scores of a search function (question -> ranked results, as the API answers them) per knowledge base and
    overall (``summarize``: reported as JSON)."""
    per_kb: dict[str, list[tuple]] = defaultdict(list)
    for question in questions:
        started = time.perf_counter()
        results = search(question)
        elapsed_ms = (time.perf_counter() - started) * 1000
        row: tuple = (first_hit_rank(results, question), elapsed_ms)
        if question.get("answer"):
            row += (first_answer_rank(results, question), max((len(returned_text(r)) for r in results[:5]), default=0))
        per_kb[question["kb"]].append(row)
    report = {kb: summarize(rows) for kb, rows in sorted(per_kb.items())}
    report["overall"] = summarize([row for rows in per_kb.values() for row in rows])
    return report


def summarize(rows: list[tuple]) -> JsonObject:
    """hit@1/@5, MRR, latency p50/p95; for questions with an answer phrase (rows of four: page rank, ms,
    answer rank, longest returned text of the top 5) also answer@1/@5, answer MRR and that length."""
    if not rows:
        return {"questions": 0}
    ranks = [row[0] for row in rows]
    latencies = sorted(row[1] for row in rows)
    answered = [row for row in rows if len(row) > 2]
    extra = {}
    if answered:
        answers = [row[2] for row in answered]
        extra = {
            "answer@1": round(sum(1 for r in answers if r == 1) / len(answers), 3),
            "answer@5": round(sum(1 for r in answers if r is not None and r <= 5) / len(answers), 3),
            "answerMrr": round(sum(1 / r for r in answers if r is not None) / len(answers), 3),
            "maxReturnedChars": max(row[3] for row in answered),
        }
    return {
        "questions": len(rows),
        "hit@1": round(sum(1 for r in ranks if r == 1) / len(rows), 3),
        "hit@5": round(sum(1 for r in ranks if r is not None and r <= 5) / len(rows), 3),
        "mrr": round(sum(1 / r for r in ranks if r is not None) / len(rows), 3),
        "latencyP50Ms": round(statistics.median(latencies), 1),
        "latencyP95Ms": round(latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))], 1),
        **extra,
    }
