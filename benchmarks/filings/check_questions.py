#!/usr/bin/env python3
"""Re-check the filings question set against the PDFs and print its counts.

    python benchmarks/filings/check_questions.py DATA_DIR [--strict]

DATA_DIR is the folder fetch_filings.py made (pdfs/doc-NNN.pdf, filings.csv). Checks:
  * schema: fields, types, unique ids, every doc in truth.jsonl, every issuer in exactly
    one split of split.json, no question on a held-out filing (via DATA_DIR/filings.csv);
  * written questions: every evidence quote, whitespace-normalized, occurs on one of the
    labelled pages (0-based) of the pypdfium2 text, and every labelled page holds a quote;
  * FinanceBench questions: their evidence (extracted by them, other layout) is covered
    >= 90% token-wise by the labelled pages.
A question whose PDF is absent is reported as unchecked (a failure with --strict).
Exits non-zero on any failure. Prints sha256 of questions.jsonl + split.json (the frozen set).
"""

from __future__ import annotations

import argparse
import collections
import csv
import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
from heldout import is_heldout  # noqa: E402
from pagetext import coverage, exact_on_pages, page_texts  # noqa: E402

TYPES = {"statement_figure", "statement_ratio", "explanation"}
SOURCES = {"financebench", "written"}
FIELDS = {"id", "doc", "issuer", "question", "answer", "evidence_text", "pages", "type", "source"}
FB_MIN_COVERAGE = 0.9


def frozen_sha256() -> dict[str, str]:
    q = (HERE / "questions.jsonl").read_bytes()
    s = (HERE / "split.json").read_bytes()
    return {
        "questions.jsonl+split.json": hashlib.sha256(q + s).hexdigest(),
        "questions.jsonl": hashlib.sha256(q).hexdigest(),
        "split.json": hashlib.sha256(s).hexdigest(),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir")
    ap.add_argument("--strict", action="store_true", help="absent PDFs count as failures")
    ap.add_argument("--no-cache", action="store_true", help="do not cache page text under DATA_DIR/text")
    args = ap.parse_args()
    data = Path(args.data_dir)
    cache = None if args.no_cache else data / "text"

    questions = [json.loads(line) for line in open(HERE / "questions.jsonl") if line.strip()]
    truth = {t["doc"]: t for t in map(json.loads, open(HERE / "truth.jsonl")) if t}
    split = json.load(open(HERE / "split.json"))
    test, dev = set(split["test_issuers"]), set(split["dev_issuers"])
    original = {}
    if (data / "filings.csv").exists():
        original = {r["neutral"][:-4]: r["original"] for r in csv.DictReader(open(data / "filings.csv"))}

    failures: list[str] = []
    unchecked: list[str] = []
    if test & dev:
        failures.append(f"issuers in both splits: {sorted(test & dev)}")
    ids = collections.Counter(q.get("id") for q in questions)
    failures += [f"duplicate id {i}" for i, n in ids.items() if n > 1]

    by_doc: dict[str, list[dict]] = collections.defaultdict(list)
    for q in questions:
        qid = q.get("id")
        missing = FIELDS - set(q)
        if missing:
            failures.append(f"{qid}: missing fields {sorted(missing)}")
            continue
        if q["type"] not in TYPES or q["source"] not in SOURCES:
            failures.append(f"{qid}: bad type/source {q['type']}/{q['source']}")
        if q["doc"] not in truth:
            failures.append(f"{qid}: doc {q['doc']} not in truth.jsonl")
        elif truth[q["doc"]]["issuer"] != q["issuer"]:
            failures.append(f"{qid}: issuer {q['issuer']} != truth {truth[q['doc']]['issuer']}")
        if q["issuer"] not in test | dev:
            failures.append(f"{qid}: issuer {q['issuer']} in no split")
        if q["doc"] in original and is_heldout(original[q["doc"]]):
            failures.append(f"{qid}: on a held-out filing")
        if not q["pages"] or not q["evidence_text"]:
            failures.append(f"{qid}: no pages or no evidence")
            continue
        by_doc[q["doc"]].append(q)

    checked = 0
    for doc, qs in sorted(by_doc.items()):
        pdf = data / "pdfs" / f"{doc}.pdf"
        if not pdf.exists():
            unchecked += [q["id"] for q in qs]
            continue
        need = sorted({p for q in qs for p in q["pages"]})
        try:
            texts = page_texts(pdf, need, cache_dir=cache)
        except Exception as e:  # unreadable PDF
            failures += [f"{q['id']}: cannot read {pdf.name}: {e}" for q in qs]
            continue
        for q in qs:
            pages = [texts.get(p, "") for p in q["pages"]]
            if q["source"] == "written":
                for quote in q["evidence_text"]:
                    if not exact_on_pages(quote, pages):
                        failures.append(f"{q['id']}: quote not on pages {q['pages']}: {quote[:70]!r}")
                for p, t in zip(q["pages"], pages, strict=True):
                    if not any(exact_on_pages(quote, [t]) for quote in q["evidence_text"]):
                        failures.append(f"{q['id']}: page {p} holds none of the quotes")
            else:
                for quote in q["evidence_text"]:
                    cov = coverage(quote, pages)
                    if cov < FB_MIN_COVERAGE:
                        failures.append(f"{q['id']}: evidence coverage {cov:.2f} on pages {q['pages']}")
            checked += 1

    # counts
    cnt = collections.Counter()
    docs = collections.defaultdict(set)
    for q in questions:
        s = "test" if q["issuer"] in test else "dev"
        cnt[(s, q["source"], q["type"])] += 1
        docs[(s, q["source"])].add(q["doc"])
    print(
        f"{len(questions)} questions on {len({q['doc'] for q in questions})} filings; "
        f"{checked} checked against the PDFs, {len(unchecked)} unchecked (PDF absent)"
    )
    print(f"{'split':6} {'source':13} {'figure':>7} {'ratio':>7} {'explain':>7} {'total':>6} {'filings':>7}")
    for s in ("dev", "test"):
        for src in ("financebench", "written"):
            row = [cnt[(s, src, t)] for t in ("statement_figure", "statement_ratio", "explanation")]
            print(f"{s:6} {src:13} {row[0]:7} {row[1]:7} {row[2]:7} {sum(row):6} {len(docs[(s, src)]):7}")
    for s in ("dev", "test"):
        n = sum(v for k, v in cnt.items() if k[0] == s)
        iss = sorted(test if s == "test" else dev)
        print(f"{s}: {n} questions, {len(iss)} issuers")
    if unchecked:
        print(f"unchecked (PDF absent): {', '.join(unchecked)}")
    for k, v in frozen_sha256().items():
        print(f"sha256 {k}: {v}")
    if args.strict and unchecked:
        failures.append(f"{len(unchecked)} questions unchecked (--strict)")
    if failures:
        print(f"\n{len(failures)} FAILURES:")
        for f in failures:
            print("  " + f)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
