"""Make the page scorer (``kb_assets/retrieval/page_scorer.json``, issue 44) from a development knowledge base.

    python benchmarks/filings/train_page_scorer.py DATA_DIR --home /work/kb-filings-all [--out FILE]
        [--folds 5] [--synthetic 16] [--seed 44] [--version filings-1] [--no-write]

The knowledge base is the one ``benchmarks/filings.py --split all`` builds (development filings only: never a
held-out filing, never an issuer of ``test2_questions.jsonl``). Questions:

- the development questions on its filings (``questions.jsonl``, both splits of issue 32, and
  ``analyst_questions.jsonl``), labelled by their evidence pages;
- synthetic questions made from each filing's own structure (up to ``--synthetic`` a filing): a statement's line
  item ("What was X's total current assets in FY2022?", half of them naming the statement), a note's or an item's
  title ("What does X disclose about debt in its FY2022 annual report?"), the cover's registered securities, a
  sentence of the discussion that says what changed ("Why did X's net sales increase in FY2022?"); each labelled
  by the page it was made from.

Every question is searched as the service searches (``pageindex``), and the features of its best pages
(``page_scorer.FEATURES``, before the scorer orders them) are kept with a label: the page holds its evidence.
Issuers are split into ``--folds`` folds: each fold is scored by a scorer trained on the others (so every figure
is on issuers the scorer never saw), against the summed order, page hit@1 / hit@5 among the questions whose
evidence is among the best pages; then the scorer is trained on all and written (unless ``--no-write``). CPU
only; about a minute of training and one search a question.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from heldout import guard  # noqa: E402

CHANGE = re.compile(r"([A-Z][\w ,'&-]{3,60}?) (increased|decreased|grew|declined) ", re.M)
VERBS = {"increased": "increase", "decreased": "decrease", "grew": "grow", "declined": "decline"}
ROW = re.compile(r"^\|\s*([A-Za-z][A-Za-z ,'()&-]{6,60}?)\s*\|.*\d", re.M)


def synthetic(catalog, document, metadata: dict, count: int, rng: random.Random) -> list[dict]:
    """Questions made from a filing's statement rows, section titles, cover and discussion sentences."""
    from kb_assets.retrieval.routing import node_sources

    organisation = (metadata.get("organisation") or "the company").replace(",", "")
    period = (metadata.get("period") or {}).get("label") or ""
    kind = metadata.get("kind") or "report"
    nodes = [n for n in catalog.read_nodes(document.document_id) if n["depth"] > 0]
    pages = {p["page_index"]: p["text"] or "" for p in catalog.read_pages(document.document_id)}
    made: list[dict] = []
    for node in nodes:
        sources = node_sources(node["node_id"], node["title"])
        if node["node_id"].startswith("statement-"):
            rows = ROW.findall(pages.get(node["start_page"], ""))
            for label in rng.sample(rows, min(2, len(rows))):
                named = f" according to its {node['title'].lower()}" if rng.random() < 0.5 else ""
                made.append(
                    {
                        "question": f"What was {organisation}'s {label.lower()} in {period}{named}?",
                        "pages": [node["start_page"]],
                        "made": "line item",
                    }
                )
        elif node["node_id"].startswith("section-") and sources:
            if "cover" in sources:
                question = f"Which securities of {organisation} are registered on an exchange as of {period}?"
            else:
                subject = re.sub(r"^(?:note|item)\s+\w+\s*[.:\-\u2013\u2014]*\s*", "", node["title"], flags=re.I)
                question = f"What does {organisation} disclose about {subject.lower()} in its {period} {kind}?"
            made.append({"question": question, "pages": [node["start_page"]], "made": "section"})
            if sources & {"results", "liquidity", "segments"}:
                for page in range(node["start_page"], node["end_page"] + 1):
                    for subject, verb in CHANGE.findall(pages.get(page, ""))[:1]:
                        question = f"Why did {organisation}'s {subject.lower()} {VERBS[verb]} in {period}?"
                        made.append({"question": question, "pages": [page], "made": "discussion"})
    rng.shuffle(made)
    return made[:count]


def collect(searcher, questions: list[dict], doc_ids: dict[str, str], kb: str) -> list[dict]:
    """Each question's best pages' features and labels (only questions with an evidence page among them)."""
    from kb_assets.retrieval.search import SearchRequest

    kept = []
    for q in questions:
        response = searcher.search(SearchRequest(q["question"], [kb], 10))
        if not response.page_features:
            continue
        wanted = {(doc_ids[q["doc"]], p) for p in q["pages"] if q["doc"] in doc_ids}
        keys = [key for key, _ in response.page_features]
        labels = np.array([float(key in wanted) for key in keys])
        if labels.any():
            kept.append({**q, "x": np.array([f for _, f in response.page_features]), "y": labels})
    return kept


def page_hits(groups: list[dict], scorer=None) -> tuple[float, float]:
    """Page hit@1 / hit@5 of the groups ordered by relevance (feature 0) or by the scorer."""
    one = five = 0
    for g in groups:
        order = np.argsort(-(scorer.score(g["x"]) if scorer else g["x"][:, 0]), kind="stable")
        ranked = g["y"][order]
        one += ranked[0] > 0
        five += ranked[:5].any()
    return one / max(1, len(groups)), five / max(1, len(groups))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir")
    parser.add_argument("--home", required=True)
    parser.add_argument("--out", default=None)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--synthetic", type=int, default=16)
    parser.add_argument("--seed", type=int, default=44)
    parser.add_argument("--version", default="filings-1")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--made", default="line item,section,discussion", help="the synthetic kinds trained on")
    parser.add_argument("--features", help="keep the searched features in this file (pickle), and reuse them")
    args = parser.parse_args()
    os.environ["KB_HOME"] = str(Path(args.home).resolve())
    os.environ.pop("DAGSTER_HOME", None)
    from dataclasses import replace

    import filings as bench

    from kb_assets.retrieval import page_scorer
    from kb_assets.service.api import make_searcher, one_thread_per_query
    from kb_assets.settings import Settings
    from kb_assets.stores import Stores

    settings = one_thread_per_query(Settings.from_env())
    searcher = make_searcher(settings, replace(settings.search, page_scorer=True))
    searcher.warm_up()
    catalog = Stores(settings).catalog
    documents = [d for d in catalog.list_documents([bench.KB]) if d.status == "published"]
    doc_ids = {guard(Path(d.source_uri).stem): d.document_id for d in documents}
    metadata = catalog.document_metadata([bench.KB])
    questions, truth = bench.load_set("all")
    real = [{**q, "made": q["question_type"]} for q in questions if q["doc"] in doc_ids]
    rng = random.Random(args.seed)
    made = []
    for doc, document_id in sorted(doc_ids.items()):
        for q in synthetic(
            catalog,
            next(d for d in documents if d.document_id == document_id),
            metadata.get(document_id) or {},
            args.synthetic,
            rng,
        ):
            made.append({**q, "doc": doc, "issuer": truth[doc]["issuer"]})
    started = time.perf_counter()
    cached = Path(args.features) if args.features else None
    if cached and cached.exists():
        groups = pickle.loads(cached.read_bytes())
    else:
        groups = collect(searcher, real + made, doc_ids, bench.KB)
        if cached:
            cached.write_bytes(pickle.dumps(groups))
    kinds = set(args.made.split(","))
    synthetic_kinds = ("line item", "section", "discussion")
    trained = [g for g in groups if g["made"] not in synthetic_kinds or g["made"] in kinds]
    trained_ids = {id(g) for g in trained}
    print(
        f"{len(real)} development and {len(made)} synthetic questions; {len(groups)} with an evidence page among "
        f"the best {page_scorer.PAGES} ({time.perf_counter() - started:.0f} s)"
    )
    issuers = sorted({g["issuer"] for g in groups})
    random.Random(args.seed).shuffle(issuers)
    fold_of = {issuer: n % args.folds for n, issuer in enumerate(issuers)}
    by_fold: dict[int, list[dict]] = defaultdict(list)
    for g in groups:
        by_fold[fold_of[g["issuer"]]].append(g)
    results = defaultdict(lambda: [[], []])
    for fold, held in sorted(by_fold.items()):
        train = [(g["x"], g["y"]) for f, gs in by_fold.items() if f != fold for g in gs if id(g) in trained_ids]
        scorer = page_scorer.train(train, l2=args.l2, version="fold")
        for g in held:
            for n, s in enumerate((None, scorer)):
                results[g["made"]][n].append(page_hits([g], s))
    print(f"{'questions (unseen issuers)':28} {'n':>4}  summed hit@1/@5   scorer hit@1/@5")
    results["all real"] = [sum((v[n] for k, v in results.items() if k not in synthetic_kinds), []) for n in (0, 1)]
    for made_by, (before, after) in sorted(results.items()):
        b, a = np.mean(before, axis=0), np.mean(after, axis=0)
        print(f"{made_by:28} {len(before):4}  {b[0]:.2f} / {b[1]:.2f}        {a[0]:.2f} / {a[1]:.2f}")
    final = page_scorer.train([(g["x"], g["y"]) for g in trained], l2=args.l2, version=args.version)
    weights = sorted(zip(page_scorer.FEATURES, final.weights, strict=True), key=lambda fw: -abs(fw[1]))
    print("largest weights:", ", ".join(f"{f} {w:+.2f}" for f, w in weights[:10]))
    if not args.no_write:
        out = Path(args.out or page_scorer.SCORER_FILE)
        out.write_text(json.dumps(final.as_json(), indent=1) + "\n")
        print(f"wrote {out} (version {final.version})")
    searcher.close()


if __name__ == "__main__":
    main()
