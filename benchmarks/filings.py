"""Filings benchmark (issue 32): evidence-page retrieval over ONE knowledge base of look-alike filings.

    python benchmarks/filings.py DATA_DIR [--home DIR] [--split dev|test|all|test2] [--filings N]
        [--strategies pageindex,hybrid,bm25] [--dump OUT.jsonl] [--set FIELD=VALUE]...

DATA_DIR is the folder ``benchmarks/filings/fetch_filings.py`` made (``pdfs/doc-NNN.pdf``). The knowledge
base ``filings`` under ``--home`` (default ``/work/kb-filings-<split>``) holds the ``--filings`` filings
(default 25) of the split's questions that carry the most questions (ties: the shorter filing first),
copied under their neutral names; the written-question issuers have 2-6 filings of other years or kinds
each, so most questions must find their filing among look-alikes. It is ingested with the real pipeline
(``kb_assets.launch.ingest``); a second run reuses it (unchanged files are skipped). Questions on
filings outside the knowledge base are left out (counted). Held-out filings are refused
(``filings/heldout.py``): nothing here opens a PDF except through it.

Printed per strategy (the service's ``pageindex`` and ``hybrid``, and ``bm25``: BM25 over whole pages
of the parsed pages, a plain search engine), per question type and overall: evidence-page hit@1/@5/MRR
(a hit: a result from the question's filing whose page range holds a labelled evidence page; pages
0-based), right-filing hit@5, ``passage@5`` (the share of questions whose evidence passage is inside
the returned text, ``context`` or ``content``, of the top 5: whitespace-normalised, a passage counts
when most of its lines are found), search p50/p95; then metadata accuracy (issuer, period, kind against
``truth.jsonl``) when the catalog holds document metadata.

``--split test2`` is the second frozen test split (issue 44, ``filings/test2_questions.jsonl``, 133 questions
over 32 filings of 6 issuers in neither list of ``split.json``): the knowledge base holds all 32 filings (every
readable filing of those issuers), the figures are printed by FinanceBench question type, a hit on a page an
``also_in`` entry names (the same evidence reprinted in another filing of the same issuer and period) counts as
a right page and a right filing, and only aggregates are printed (no ``--dump``, no metadata misses). It is run
ONCE, on the final code: scoring writes ``test2-scored.json`` under ``--home`` and refuses when it is there
(``--ingest-only`` may run any number of times: it reads no question).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent / "filings"
sys.path.insert(0, str(HERE))  # the set's own helpers (held-out guard, page text)

from heldout import guard, open_pdf  # noqa: E402
from pagetext import norm  # noqa: E402

KB = "filings"
K = 10


TEST2 = HERE / "test2_questions.jsonl"


def frozen_sha256() -> str:
    return hashlib.sha256((HERE / "questions.jsonl").read_bytes() + (HERE / "split.json").read_bytes()).hexdigest()


def test2_sha256() -> str:
    return hashlib.sha256(TEST2.read_bytes()).hexdigest()


def load_set(split: str) -> tuple[list[dict], dict[str, dict]]:
    truth = {t["doc"]: t for t in map(json.loads, (HERE / "truth.jsonl").read_text().splitlines()) if t}
    if split == "test2":  # fields read by name, never printed: the type is FinanceBench's question_type
        rows = [json.loads(line) for line in TEST2.read_text().splitlines() if line.strip()]
        return [{**q, "type": q["question_type"]} for q in rows], truth
    questions = [json.loads(line) for line in (HERE / "questions.jsonl").read_text().splitlines() if line.strip()]
    if split == "all":  # issue 44's development set: both splits of issue 32, and the written analysts' questions;
        # issue 53's reworded questions (the same questions as analysts type them), reported apart
        for name in ("analyst_questions.jsonl", "reworded_questions.jsonl"):
            questions += [json.loads(line) for line in (HERE / name).read_text().splitlines() if line]
    fb_types = json.loads((HERE / "financebench_types.json").read_text())
    for q in questions:  # FinanceBench's question type (the written ones: "written <type>")
        q.setdefault("question_type", fb_types.get(q.get("financebench_id"), f"written {q['type']}"))
    issuers = json.loads((HERE / "split.json").read_text())
    wanted = set(issuers["dev_issuers"]) if split == "dev" else set(issuers["test_issuers"])
    if split == "all":
        wanted |= set(issuers["dev_issuers"])
    return [q for q in questions if q["issuer"] in wanted], truth


def choose_filings(questions: list[dict], data: Path, count: int) -> list[str]:
    """The ``count`` present filings carrying the most questions (ties: fewer pages first)."""
    per_doc = Counter(q["doc"] for q in questions)
    sizes = {doc: page_count(data, doc) for doc in per_doc if _present(data, doc)}
    ranked = sorted(sizes, key=lambda doc: (-per_doc[doc], sizes[doc], doc))
    return sorted(ranked[:count])


def page_count(data: Path, doc: str) -> int:
    cached = data / "text" / f"{doc}.json"
    if cached.exists() and "n" in (text := json.loads(cached.read_text())):
        return int(text["n"])
    pdf = open_pdf(data / "pdfs" / f"{doc}.pdf")
    try:
        return len(pdf)
    finally:
        pdf.close()


def _present(data: Path, doc: str) -> bool:
    return (data / "pdfs" / f"{guard(doc)}.pdf").is_file()


def stage_files(data: Path, docs: list[str], home: Path) -> list[Path]:
    """Copies of the chosen PDFs under ``home/files`` (neutral names; the folder holds only these)."""
    folder = home / "files"
    folder.mkdir(parents=True, exist_ok=True)
    for stray in folder.glob("*.pdf"):
        if stray.stem not in docs:
            stray.unlink()
    paths = []
    for doc in docs:
        source, target = data / "pdfs" / f"{guard(doc)}.pdf", folder / f"{doc}.pdf"
        if not target.exists() or target.stat().st_size != source.stat().st_size:
            shutil.copyfile(source, target)
        paths.append(target)
    return paths


def build(paths: list[Path], settings) -> None:
    from kb_assets.launch.ingest import ingest

    started = time.perf_counter()
    report = ingest(paths, KB, settings, progress=lambda message: print(f"  {message}", flush=True))
    print(f"ingest: {report.as_json()['documents']} in {time.perf_counter() - started:.0f} s")
    for failure in report.failures:
        print(f"  failed: {failure}")


# scoring ---------------------------------------------------------------------------------------
def _squash(text: str) -> str:
    """Text without whitespace or Markdown table marks, lower case: the evidence is a PDF text layer's line
    ("Inventories 7,351 4,946"), a table page's text is Markdown ("| Inventories |  | 7,351 | 4,946 |")."""
    return re.sub(r"[\s|]+", "", norm(text)).lower()


def passage_inside(question: dict, texts: list[str]) -> bool:
    """An evidence passage is inside the returned texts when most of its lines (whitespace-normalised)
    are found in them; one passage of the question is enough."""
    pool = [_squash(t) for t in texts]
    for quote in question["evidence_text"]:
        lines = [_squash(line) for line in quote.splitlines()]
        lines = [line for line in lines if len(line) >= 3]
        if lines and sum(any(line in t for t in pool) for line in lines) > len(lines) / 2:
            return True
    return False


def doc_of(result: dict) -> str:
    return Path(result.get("sourceUri") or "").stem


def evidence_pages(question: dict) -> dict[str, list[int]]:
    """The filings and pages that hold a question's evidence: its own, and those ``also_in`` names (test2: the
    same evidence reprinted in another filing of the same issuer and period)."""
    pages = {question["doc"]: list(question["pages"])}
    for other in question.get("also_in") or []:
        pages.setdefault(other["doc"], []).extend(other["pages"])
    return pages


def page_hit(result: dict, question: dict) -> bool:
    pages = evidence_pages(question).get(doc_of(result))
    if not pages:
        return False
    start, end = result["pageIndex"], result.get("pageEnd", result["pageIndex"])
    return any(start <= page <= end for page in pages)


def measure(question: dict, results: list[dict]) -> dict:
    rank = next((n for n, r in enumerate(results[:K], 1) if page_hit(r, question)), None)
    top = results[:5]
    return {
        "rank": rank,
        "filing@1": bool(top) and doc_of(top[0]) in evidence_pages(question),
        "filing@5": any(doc_of(r) in evidence_pages(question) for r in top),
        "passage@5": passage_inside(question, [r.get("context") or r.get("content") or "" for r in top]),
    }


def summary(rows: list[dict]) -> dict:
    if not rows:
        return {"n": 0}
    ranks = [r["rank"] for r in rows]
    ms = sorted(r["ms"] for r in rows)
    return {
        "n": len(rows),
        "hit@1": sum(r == 1 for r in ranks) / len(rows),
        "hit@5": sum(r is not None and r <= 5 for r in ranks) / len(rows),
        "mrr": sum(1 / r for r in ranks if r) / len(rows),
        "filing@1": sum(r["filing@1"] for r in rows) / len(rows),
        "filing@5": sum(r["filing@5"] for r in rows) / len(rows),
        "scope@1": sum(r["scope@1"] for r in rows) / len(rows),
        "passage@5": sum(r["passage@5"] for r in rows) / len(rows),
        "p50": statistics.median(ms),
        "p95": ms[min(len(ms) - 1, int(0.95 * len(ms)))],
    }


class PageBM25:
    """BM25 over whole parsed pages (k1 1.2, b 0.75): the plain search engine the issue compares with."""

    def __init__(self, pages: list[dict]):
        self.pages = pages
        self.terms = [Counter(re.findall(r"[a-z0-9]+", p["text"].lower())) for p in pages]
        self.lengths = [sum(t.values()) for t in self.terms]
        self.average = sum(self.lengths) / max(1, len(self.lengths))
        self.df: Counter[str] = Counter(term for t in self.terms for term in t)

    def search(self, query: str, limit: int = K) -> list[dict]:
        words = re.findall(r"[a-z0-9]+", query.lower())
        n = len(self.pages)
        idf = {w: math.log(1 + (n - self.df[w] + 0.5) / (self.df[w] + 0.5)) for w in set(words) if self.df[w]}
        scores = []
        for number, (terms, length) in enumerate(zip(self.terms, self.lengths, strict=True)):
            value = 0.0
            for word, weight in idf.items():
                tf = terms.get(word, 0)
                if tf:
                    value += weight * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / self.average))
            if value:
                scores.append((value, number))
        scores.sort(reverse=True)
        return [
            {**self.pages[i], "content": self.pages[i]["text"], "pageIndex": self.pages[i]["page_index"]}
            for _, i in scores[:limit]
        ]


def scope_alone(searcher, catalog, questions: list[dict]) -> dict[str, bool]:
    """The scope step measured alone (issue 53): is the first filing it means (``scope.resolve(...).meant``, on the
    question as search reads it) the question's own? False where it names none."""
    from kb_assets.retrieval import scope
    from kb_assets.retrieval.instructions import retrieval_query

    known = scope.known_metadata(searcher, [KB])
    neutral = {d.document_id: Path(d.source_uri).stem for d in catalog.list_documents([KB])}
    out: dict[str, bool] = {}
    if not hasattr(scope, "resolve"):  # the code before issue 53 (a baseline): no filing meant, none right
        return {question["id"]: False for question in questions}
    for question in questions:
        meant = scope.resolve(retrieval_query(question["question"]), known).meant
        out[question["id"]] = bool(meant) and neutral.get(meant[0]) in evidence_pages(question)
    return out


def metadata_accuracy(catalog, truth: dict[str, dict], misses: bool = True) -> list[str]:
    """Lines: per field and overall, the share of the knowledge base's filings whose metadata is right."""
    right: Counter[str] = Counter()
    wrong = []
    documents = [d for d in catalog.list_documents([KB]) if d.status == "published"]
    stored = catalog.published_versions([d.document_id for d in documents])
    for document in documents:
        doc = Path(document.source_uri).stem
        expected, found = truth[doc], stored[document.document_id].metadata or {}
        period = found.get("period") or {}
        checks = metadata_checks(found, expected)
        right.update(field for field, ok in checks.items() if ok)
        right["all"] += all(checks.values())
        if misses and not all(checks.values()):
            wrong.append(
                f"    {doc}: {expected['issuer']} {expected['fiscal_period']} {expected['kind']} <- "
                f"{found.get('organisation')!r} {period.get('label')} {found.get('kind')}"
            )
    n = max(1, len(documents))
    head = ", ".join(f"{field} {right[field] / n:.2f}" for field in ("issuer", "period", "kind", "all"))
    return [f"metadata ({len(documents)} filings): {head}"] + wrong


def metadata_checks(found: dict, expected: dict) -> dict[str, bool]:
    """Per field (issuer, period, kind): is the metadata read (``found``) right against a truth record? An
    8-K's period is its event date; other filings' the fiscal year and quarter."""
    kinds = {"10-K": "annual report", "10-Q": "quarterly report", "8-K": "current report"}
    period = found.get("period") or {}
    return {
        "issuer": issuer_matches(found.get("organisation") or "", expected["issuer"]),
        "period": period.get("end") == expected["period_end"]
        if expected["kind"] == "8-K"
        else (period.get("fiscal_year"), period.get("fiscal_quarter"))
        == (expected["fiscal_year"], expected["fiscal_quarter"]),
        "kind": found.get("kind") == kinds.get(expected["kind"], expected["kind"]),
    }


def issuer_matches(organisation: str, issuer: str) -> bool:
    """The issuer's name words in the organisation read ("Apple" in "Apple Inc.", "Walmart" in "Wal-Mart
    Stores, Inc."), or its initials ("AMD": Advanced Micro Devices)."""
    found = re.sub(r"[^a-z0-9 ]", "", organisation.lower())
    words = re.sub(r"[^a-z0-9 ]", "", issuer.lower()).split()
    initials = "".join(w[0] for w in found.split() if w not in ("inc", "corporation", "company", "corp"))
    return bool(found) and (all(w in found.replace(" ", "") for w in words) or initials.startswith(issuer.lower()))


def score(questions: list[dict], truth: dict[str, dict], args) -> None:
    from kb_assets.retrieval.search import SearchRequest
    from kb_assets.service.api import make_searcher, one_thread_per_query
    from kb_assets.settings import Settings
    from kb_assets.stores import Stores

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from retrieval_quality import config_overrides

    settings = one_thread_per_query(Settings.from_env())
    searcher = make_searcher(settings, config_overrides(args.set, settings.search))
    searcher.warm_up()
    try:
        from kb_assets.retrieval import search_version

        print(f"search version {search_version()}")
    except ImportError:  # the code before issue 44 had none (measuring the baseline on the same knowledge base)
        print("search version: none (before issue 44)")
    catalog = Stores(settings).catalog
    meant = scope_alone(searcher, catalog, questions)
    runs: dict[str, list[dict]] = defaultdict(list)
    dump = open(args.dump, "w", encoding="utf-8") if args.dump else None
    engines = {}
    for strategy in args.strategies.split(","):
        if strategy == "bm25":
            pages = [
                {**page, "sourceUri": d.source_uri}
                for d in catalog.list_documents([KB])
                if d.status == "published"
                for page in catalog.read_pages(d.document_id)
            ]
            engine = PageBM25(pages)
            engines[strategy] = lambda q, engine=engine: engine.search(q)
        else:
            engines[strategy] = lambda q, s=strategy: searcher.search(SearchRequest(q, [KB], K, strategy=s)).results
    for strategy, search in engines.items():
        for question in questions:
            started = time.perf_counter()
            results = search(question["question"])
            ms = (time.perf_counter() - started) * 1000
            row = {
                "id": question["id"],
                **measure(question, results),
                "ms": ms,
                "type": question["type"],
                "kind": question["question_type"],
            }
            row |= {"scope@1": meant[question["id"]], "source": question.get("source"), "of": question.get("of")}
            runs[strategy].append(row)
            if dump:
                top = [{"doc": doc_of(r), "page": r["pageIndex"], "score": r.get("score")} for r in results[:5]]
                dump.write(json.dumps({"strategy": strategy, "id": question["id"], **row, "top": top}) + "\n")
    print(
        f"\n{'strategy':10} {'questions':32} {'n':>4} {'hit@1':>6} {'hit@5':>6} {'MRR':>6} {'filing@1':>8} "
        f"{'filing@5':>8} {'scope@1':>7} {'passage@5':>9} {'p50 ms':>7} {'p95 ms':>7}"
    )
    for strategy, every in runs.items():
        rows = [r for r in every if r["source"] != "reworded"]
        reworded = [r for r in every if r["source"] == "reworded"]
        groups = {"all": rows, **{t: [r for r in rows if r["type"] == t] for t in sorted({r["type"] for r in rows})}}
        if args.split != "test2":  # FinanceBench's kinds beside the set's own types
            groups |= {f"kind {k}": [r for r in rows if r["kind"] == k] for k in sorted({r["kind"] for r in rows})}
        if reworded:  # issue 53: the same questions in an analyst's words, beside their first wording
            originals = {r["of"] for r in reworded}
            first_wording = [r for r in rows if r.get("id") in originals]
            groups |= {"reworded": reworded, "original of reworded": first_wording}
            groups |= {
                f"reworded {t}": [r for r in reworded if r["type"] == t] for t in sorted({r["type"] for r in reworded})
            }
            groups |= {
                f"reworded kind {k}": [r for r in reworded if r["kind"] == k]
                for k in sorted({r["kind"] for r in reworded})
            }
        for name, group in groups.items():
            s = summary(group)
            print(
                f"{strategy:10} {name:32} {s['n']:4} {s['hit@1']:6.2f} {s['hit@5']:6.2f} {s['mrr']:6.2f} "
                f"{s['filing@1']:8.2f} {s['filing@5']:8.2f} {s['scope@1']:7.2f} {s['passage@5']:9.2f} "
                f"{s['p50']:7.0f} {s['p95']:7.0f}"
            )
    print("\n".join(metadata_accuracy(catalog, truth, misses=args.split != "test2")))
    searcher.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir")
    parser.add_argument("--home", help="KB_HOME (default /work/kb-filings-<split>); reused when it exists")
    parser.add_argument("--split", choices=("dev", "test", "all", "test2"), default="dev")
    parser.add_argument("--filings", type=int, help="filings in the knowledge base (default 25; test2: all 32)")
    parser.add_argument("--with", dest="extra", default="", help="more filings in the knowledge base: doc-NNN,...")
    parser.add_argument("--only", help="ingest only the staged files START:END (in sorted order), to cut a long ingest")
    parser.add_argument("--strategies", default="pageindex,hybrid,bm25")
    parser.add_argument("--no-ingest", action="store_true", help="score the knowledge base as it is")
    parser.add_argument("--ingest-only", action="store_true", help="build the knowledge base, score nothing")
    parser.add_argument("--dump", help="write per-question ranks and top 5 (JSON lines) to this file")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="override SearchConfig")
    args = parser.parse_args()
    data = Path(args.data_dir)
    home = Path(args.home or f"/work/kb-filings-{args.split}").resolve()
    os.environ["KB_HOME"] = str(home)
    os.environ.pop("DAGSTER_HOME", None)
    print(f"sha256(questions.jsonl + split.json) = {frozen_sha256()}")
    print(f"sha256(test2_questions.jsonl) = {test2_sha256()}")
    if args.split == "test2" and args.dump:
        raise SystemExit("test2 is a frozen test split: no --dump (no error analysis on it)")
    scored_once = home / "test2-scored.json"
    if args.split == "test2" and not args.ingest_only and scored_once.exists():
        raise SystemExit(f"test2 was scored already ({scored_once}): it is run once, at the end")

    from kb_assets.settings import Settings

    questions, truth = load_set(args.split)
    docs = choose_filings(questions, data, args.filings or (10**6 if args.split == "test2" else 25))
    docs = sorted(set(docs) | {guard(doc) for doc in args.extra.split(",") if doc})
    pages = sum(page_count(data, doc) for doc in docs)
    print(f"split {args.split}: {len(docs)} filings ({pages} pages) of {len({q['issuer'] for q in questions})} issuers")
    paths = stage_files(data, docs, home)
    if not args.no_ingest:
        start, _, end = (args.only or ":").partition(":")
        build(paths[int(start or 0) : int(end) if end else None], Settings.from_env())
    if args.ingest_only:
        return
    scored = [q for q in questions if q["doc"] in docs]
    print(f"questions: {len(scored)} of {len(questions)} (the rest are on filings outside the knowledge base)")
    if args.split == "test2":
        scored_once.write_text(json.dumps({"at": time.strftime("%Y-%m-%dT%H:%M:%S"), "sha256": test2_sha256()}))
    score(scored, truth, args)


if __name__ == "__main__":
    main()
