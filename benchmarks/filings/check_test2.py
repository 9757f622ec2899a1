#!/usr/bin/env python3
"""Check the second frozen test split, ``test2_questions.jsonl`` (issue 44), against the PDFs.

    python benchmarks/filings/check_test2.py DATA_DIR

Adapted from the set author's ``check.py`` (``/work/data/filings-test2``) to this folder's helpers. For every
question: every quote of ``evidence_text`` is on one of the labelled ``pages`` (0-based) of its ``doc`` and every
labelled page holds a quote (``pagetext.exact_on_pages``: NFKC, plain quotes and dashes, whitespace-normalized
substring, or the same with all whitespace removed); the same for each ``also_in`` entry (another present filing
of the same issuer reprinting the evidence); no doc is held out (``heldout.is_heldout`` on the original name in
``DATA_DIR/filings.csv``) and no issuer is in ``split.json``; fields, types, ids and pages are well formed.
Prints only counts and the hash (a failure names the question id and the page, never its text). Exits non-zero
on any failure.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
from heldout import guard, is_heldout  # noqa: E402
from pagetext import exact_on_pages, page_texts  # noqa: E402

QUESTIONS = HERE / "test2_questions.jsonl"
TYPES = {"metrics-generated", "novel-generated", "domain-relevant"}
FIELDS = ["id", "doc", "issuer", "question_type", "question", "answer", "evidence_text", "pages"]


def sha256() -> str:
    return hashlib.sha256(QUESTIONS.read_bytes()).hexdigest()


def problems(rows: list[dict], data: Path, cache: Path | None) -> list[str]:
    meta = {r["neutral"][:-4]: r for r in csv.DictReader(open(data / "filings.csv"))}
    split = json.loads((HERE / "split.json").read_text())
    banned = set(split["test_issuers"]) | set(split["dev_issuers"])
    fails = [f"duplicate id {i}" for i, n in Counter(r.get("id") for r in rows).items() if n > 1]
    for r in rows:
        rid = r.get("id", "?")
        if missing := [f for f in FIELDS if f not in r]:
            fails.append(f"{rid}: missing fields {missing}")
            continue
        if r["question_type"] not in TYPES:
            fails.append(f"{rid}: bad question_type")
        m = meta.get(r["doc"])
        if m is None or is_heldout(m["original"]):
            fails.append(f"{rid}: unknown or held-out doc {r['doc']}")
            continue
        guard(m["original"])
        if m["issuer"] in banned or m["issuer"] != r["issuer"]:
            fails.append(f"{rid}: issuer in split.json or not the filing's")
        if m["present"] != "1":
            fails.append(f"{rid}: doc {r['doc']} not present")
            continue
        ev, pages = r["evidence_text"], r["pages"]
        if not isinstance(ev, list) or not ev or not all(isinstance(q, str) and q.strip() for q in ev):
            fails.append(f"{rid}: evidence_text must be a non-empty list of strings")
            continue
        if not isinstance(pages, list) or not pages or not all(isinstance(p, int) and p >= 0 for p in pages):
            fails.append(f"{rid}: pages must be a non-empty list of 0-based ints")
            continue
        for doc, where in [(r["doc"], pages)] + [(a.get("doc"), a.get("pages") or []) for a in r.get("also_in", [])]:
            other = meta.get(doc)
            usable = other is not None and not is_heldout(other["original"]) and other["present"] == "1"
            if doc != r["doc"] and not (usable and other["issuer"] == m["issuer"]):
                fails.append(f"{rid}: bad also_in doc {doc}")
                continue
            texts = page_texts(data / "pdfs" / f"{doc}.pdf", sorted(set(where)), cache)
            on = [texts[p] for p in where]
            fails += [f"{rid}: a quote is not on {doc} pages {where}" for q in ev if not exact_on_pages(q, on)]
            empty = [p for p in where if not any(exact_on_pages(q, [texts[p]]) for q in ev)]
            fails += [f"{rid}: {doc} page {p} holds no quote" for p in empty]
    return fails


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir")
    parser.add_argument("--no-cache", action="store_true", help="do not cache page text under DATA_DIR/text")
    args = parser.parse_args()
    data = Path(args.data_dir)
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    fails = problems(rows, data, None if args.no_cache else data / "text")
    print(f"{len(rows)} questions, {len({r['doc'] for r in rows})} filings")
    print("by type:  ", dict(sorted(Counter(r["question_type"] for r in rows).items())))
    print("by issuer:", dict(sorted(Counter(r["issuer"] for r in rows).items())))
    print(f"sha256(test2_questions.jsonl) = {sha256()}")
    if fails:
        print(f"FAIL: {len(fails)} problem(s)")
        for fail in fails:
            print("  ", fail)
        return 1
    print("OK: every quote is on a labelled page, every labelled page holds a quote; no held-out or split.json filing")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
