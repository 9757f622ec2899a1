"""Retrieval quality on the development corpus: per knowledge base and per question kind, page-hit@1/@5,
MRR and latency p50/p95 of the default strategy, of each other strategy and of the naive chunk-RAG
baseline; for detail questions also answer-in-context at ranks 1 and 5; optionally the language
policies on the Chinese manual.

    .venv/bin/python benchmarks/retrieval_quality.py [--home .kb-bench] [--splits dev,test] [--json OUT]
        [--sets titles,paraphrases,details] [--strategies pageindex,hybrid,naive] [--set FIELD=VALUE]...
        [--dump OUT.jsonl] [--language-policies]

Needs the dev corpus ingested under ``--home`` (``benchmarks/dev_corpus.py``); reads it only.
Question kinds:

- ``titles``: ``../shared/eval/dev_questions.jsonl`` (section titles from each manual's table of contents);
- ``paraphrases``: ``benchmarks/paraphrased_questions.jsonl`` (sections asked in other words, English and
  Chinese, same page labels);
- ``details en`` / ``details zh``: ``benchmarks/detail_questions.jsonl`` (issue 15: an option, a default,
  a number inside a paragraph, table or code example), one table per language and split. ``test`` is the
  frozen split: tune on ``dev`` only (``--splits dev``) and score ``test`` for a final figure.

A detail question is an answer hit at rank k when its answer phrase (whitespace-collapsed, case-folded;
for Chinese also with whitespace removed) is inside the text a result hands the reader (its ``context``
when the response adds one, else ``content``); ``chars`` is the longest such text among the top 5 (the
budget is 800). ``--set FIELD=VALUE`` overrides a ``SearchConfig`` field for every strategy run (to
measure a switch; ``weights={"dense": 0.7, "lexical": 0.3}`` or ``weights.dense=0.7``). ``--dump``
writes one line per question and strategy (page rank, answer rank, the top 5) for reading misses.

Goals (issue 15, frozen test split of the detail set, default strategy): hit@5 >= 0.95, hit@1 >= 0.85,
answer@5 >= 0.90 in English and in Chinese; titles and paraphrases no worse than before. Last measured
(docs/retrieval.md, parser 3): test en 0.80 / 0.97 / 0.88, answer 0.74 / 0.89; zh 0.75 / 1.00 / 0.84,
answer 0.75 / 0.92; titles 0.95 / 1.00 / 0.97; paraphrases 0.60 / 0.90 / 0.72.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TITLES = REPO.parent / "shared" / "eval" / "dev_questions.jsonl"
PARAPHRASED = REPO / "benchmarks" / "paraphrased_questions.jsonl"
DETAILS = REPO / "benchmarks" / "detail_questions.jsonl"


def question_sets(args, load_questions) -> dict[str, list[dict]]:
    wanted = args.sets.split(",")
    sets: dict[str, list[dict]] = {}
    if "titles" in wanted:
        sets["titles"] = load_questions(Path(args.questions))
    if "paraphrases" in wanted and Path(args.paraphrased).exists():
        sets["paraphrases"] = load_questions(Path(args.paraphrased))
    if "details" in wanted and Path(args.details).exists():
        details = load_questions(Path(args.details))
        for lang in ("en", "zh"):
            for split in args.splits.split(","):
                rows = [q for q in details if q["lang"] == lang and q["split"] == split]
                if rows:
                    sets[f"details {lang} {split}"] = rows
    return sets


def config_overrides(pairs: list[str], config):
    """``FIELD=VALUE`` pairs applied to a SearchConfig (``weights.dense=0.7`` reaches a nested config;
    values parsed as JSON, else kept as strings)."""
    for pair in pairs:
        name, _, value = pair.partition("=")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        config = _override(config, name.split("."), parsed, pair)
    return config


def _override(config, path: list[str], value, pair: str):
    fields = {f.name for f in dataclasses.fields(config)}
    if path[0] not in fields:
        raise SystemExit(
            f"--set {pair}: {type(config).__name__} has no field {path[0]!r} (fields: {', '.join(sorted(fields))})"
        )
    current = getattr(config, path[0])
    if len(path) > 1:
        value = _override(current, path[1:], value, pair)
    elif dataclasses.is_dataclass(current) and isinstance(value, dict):  # weights={"dense": 0.7, ...}
        value = replace(current, **value)
    return replace(config, **{path[0]: value})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", default=str(REPO / ".kb-bench"))
    parser.add_argument("--questions", default=str(TITLES), help="title questions")
    parser.add_argument("--paraphrased", default=str(PARAPHRASED))
    parser.add_argument("--details", default=str(DETAILS))
    parser.add_argument("--sets", default="titles,paraphrases,details")
    parser.add_argument("--splits", default="dev,test", help="detail splits to score (tune on dev only)")
    parser.add_argument("--strategies", default="pageindex,hybrid,naive", help="naive: the chunk-RAG baseline")
    parser.add_argument(
        "--set", action="append", default=[], metavar="FIELD=VALUE", help="override a SearchConfig field (repeatable)"
    )
    parser.add_argument("--language-policies", action="store_true", help="also compare the language policies")
    parser.add_argument("--chinese-kb", default="edu-zh", help="knowledge base for the language-policy runs")
    parser.add_argument("--dump", help="write per-question ranks and top 5 results (JSON lines) to this file")
    parser.add_argument("--json", help="also write every figure to this file")
    args = parser.parse_args()
    os.environ["KB_HOME"] = str(Path(args.home).resolve())
    os.environ.pop("DAGSTER_HOME", None)

    from kb_assets.cli.search import naive_baseline
    from kb_assets.retrieval.evaluation import evaluate, first_answer_rank, first_hit_rank, load_questions
    from kb_assets.retrieval.query import LANGUAGE_POLICIES
    from kb_assets.retrieval.search import SearchRequest
    from kb_assets.retrieval.strategies import STRATEGIES
    from kb_assets.service.api import make_searcher, one_thread_per_query
    from kb_assets.settings import Settings

    settings = one_thread_per_query(Settings.from_env())  # as kb-assets serve and eval do
    sets = question_sets(args, load_questions)
    searcher = make_searcher(settings, config_overrides(args.set, settings.search))
    default = searcher.config.strategy
    searcher.warm_up()
    strategies = [s for s in args.strategies.split(",") if s in STRATEGIES or s == "naive"]
    dump = open(args.dump, "w", encoding="utf-8") if args.dump else None

    def recorded(label: str, set_name: str, search):
        def run_one(question: dict) -> list[dict]:
            results = search(question)
            if dump:
                dump.write(
                    json.dumps(
                        {
                            "set": set_name,
                            "strategy": label,
                            "id": question.get("id"),
                            "query": question["query"],
                            "answer": question.get("answer"),
                            "pages": question["pages"],
                            "pageRank": first_hit_rank(results, question),
                            "answerRank": first_answer_rank(results, question) if question.get("answer") else None,
                            "top": [
                                {
                                    "page": r["pageIndex"],
                                    "file": Path(r.get("sourceUri") or "").name,
                                    "chunk": r.get("chunkIndex"),
                                    "score": r.get("score"),
                                    "scores": r.get("scores"),
                                    "text": (r.get("context") or r.get("content") or "")[:400],
                                }
                                for r in results[:5]
                            ],
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
            return results

        return run_one

    def run(config, questions, label="", set_name=""):
        variant = type(searcher)(searcher.client, searcher.catalog, searcher.alias, searcher.load_model, config)
        try:
            return evaluate(
                recorded(label, set_name, lambda q: variant.search(SearchRequest(q["query"], [q["kb"]], 10)).results),
                questions,
            )
        finally:
            variant.close()

    report: dict = {"default": default, "config": repr(searcher.config), "sets": {}}
    kbs = sorted({q["kb"] for qs in sets.values() for q in qs})
    baseline = None
    if "naive" in strategies:
        started = time.perf_counter()
        baseline = naive_baseline(settings, kbs)
        print(f"naive baseline built over {len(baseline.rows)} windows in {time.perf_counter() - started:.0f} s")
    print(f"config: {searcher.config}")
    for name, questions in sets.items():
        runs = {}
        for strategy in strategies:
            if strategy == "naive":
                runs["naive baseline"] = evaluate(
                    recorded("naive", name, lambda q: baseline.search(q["query"], [q["kb"]], 10)), questions
                )
            else:
                label = f"{strategy} (default)" if strategy == default else strategy
                runs[label] = run(replace(searcher.config, strategy=strategy), questions, strategy, name)
        report["sets"][name] = runs
        print(f"\n{name} ({len(questions)} questions)")
        print_table(runs, sorted({q["kb"] for q in questions}) + ["overall"], answers=name.startswith("details"))

    if args.language_policies:
        policies: dict = {}
        for name, questions in sets.items():
            chinese = [q for q in questions if q["kb"] == args.chinese_kb]
            for strategy in [s for s in strategies if s in STRATEGIES]:
                for policy in LANGUAGE_POLICIES:
                    scores = run(replace(searcher.config, strategy=strategy, language_policy=policy), chinese)
                    policies[f"{name} {strategy} {policy}"] = scores.get(args.chinese_kb, {"questions": 0})
        report["languagePolicies"] = policies
        print(f"\nlanguage policies on {args.chinese_kb} (default {searcher.config.language_policy}):")
        for label, s in policies.items():
            if s.get("questions"):
                print(f"  {label:<40} n={s['questions']:<3} {s['hit@1']:.3f} / {s['hit@5']:.3f} / {s['mrr']:.3f}")

    goals = {}
    for split in args.splits.split(","):
        for lang in ("en", "zh"):
            scores = report["sets"].get(f"details {lang} {split}", {}).get(f"{default} (default)", {}).get("overall")
            if scores:
                goals[f"details {lang} {split}"] = (
                    scores["hit@5"] >= 0.95
                    and scores["hit@1"] >= 0.85
                    and scores["answer@5"] >= 0.90
                    and scores["maxReturnedChars"] <= 800
                )
    report["goals"] = goals
    if goals:
        print(
            "\ngoals (hit@5 >= 0.95, hit@1 >= 0.85, answer@5 >= 0.90, <= 800 chars a result; default strategy): "
            + "; ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in goals.items())
        )
    searcher.close()
    if dump:
        dump.close()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, ensure_ascii=False))


def print_table(runs: dict, rows: list[str], answers: bool) -> None:
    """One line per knowledge base: hit@1 / hit@5 / MRR [answer@1 / answer@5 chars] p50 / p95 ms."""
    width = 52 if answers else 36
    head = "h@1 / h@5 / MRR" + (" | a@1 / a@5 chars" if answers else "") + " | p50/p95 ms"
    print(f"  {'':<11}" + "".join(f"{name[: width - 2]:>{width}}" for name in runs))
    print(f"  {'':<11}" + "".join(f"{head:>{width}}" for _ in runs))
    for kb in rows:
        cells = []
        for scores in runs.values():
            s = scores.get(kb) or {}
            if not s.get("questions"):
                cells.append("-")
                continue
            cell = f"{s['hit@1']:.2f} / {s['hit@5']:.2f} / {s['mrr']:.2f}"
            if answers:
                cell += f" | {s['answer@1']:.2f} / {s['answer@5']:.2f} {s['maxReturnedChars']:>5}"
            cell += f" | {s['latencyP50Ms']:>4.0f}/{s['latencyP95Ms']:<4.0f}"
            cells.append(cell)
        n = next((s[kb]["questions"] for s in runs.values() if (s.get(kb) or {}).get("questions")), 0)
        print(f"  {kb[:7]:<7} {n:>3}" + "".join(f"{c:>{width}}" for c in cells))


if __name__ == "__main__":
    main()
