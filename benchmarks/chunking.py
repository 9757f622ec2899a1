"""Chunking and PageIndex figures on the development corpus, with page-hit@5 beside the naive baseline.

    .venv/bin/python benchmarks/chunking.py [--home .kb-bench-chunking] [--fresh] [--json out.json]

Ingests the dev corpus (benchmarks/dev_corpus.py: R-data, R-admin, R-lang into ``r-manuals``,
debian-reference.en into ``debian-en``, the Chinese Debian Edu manual into ``edu-zh``) into its own
KB_HOME, then prints per document and knowledge base:

- chunk length distribution (characters of ``content``) and chunk kinds;
- the share of embedding inputs over the model window (goal 0), counted with the model's tokenizer;
- the share of chunks whose content is found in their pages (lineage property, goal 100%);
- tree source, node count and depth, and table-of-contents pages;
- page-hit@1/@5 and MRR of ../shared/eval/dev_questions.jsonl for kb-assets (each search strategy)
  and for the naive baseline (512-character windows, 50 overlap, dense only, same model), both
  measured in this run.

Unchanged files are not re-ingested: after a change to parsing, structure or chunking pass --fresh
(the home is wiped and everything re-ingested, ~8 minutes on 2 cores, mostly embedding). The
embedded Postgres and Milvus Lite servers are stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from collections import Counter
from pathlib import Path

from dev_corpus import KNOWLEDGE_BASES, fetch  # a sibling: this script's folder is first on sys.path

REPO = Path(__file__).resolve().parents[1]

QUESTIONS = REPO.parent / "shared" / "eval" / "dev_questions.jsonl"


def distribution(values: list[int]) -> dict:
    if not values:
        return {"n": 0}
    values = sorted(values)
    at = {q: values[min(len(values) - 1, int(q * len(values)))] for q in (0.10, 0.25, 0.50, 0.75, 0.90)}
    return {
        "n": len(values),
        "mean": round(statistics.fmean(values)),
        "p10": at[0.10],
        "p25": at[0.25],
        "p50": at[0.50],
        "p75": at[0.75],
        "p90": at[0.90],
        "max": values[-1],
    }


def document_figures(doc, catalog, lake, store, model) -> dict:
    from kb_assets.pipeline.lineage import chunk_found_in_pages
    from kb_assets.pipeline.steps import pdf_outline
    from kb_assets.structure.pageindex import build_document_tree

    chunks = lake.read("chunks", doc.document_id)
    pages = catalog.read_pages(doc.document_id)
    texts = {p["page_index"]: p["text"] for p in pages}
    rows = list(chunks.iter_rows(named=True))
    tokens = model.count_tokens([r["embedding_input"] for r in rows]) if rows else []
    nodes = catalog.read_nodes(doc.document_id)
    source = build_document_tree(doc.title or doc.source_path, pages, pdf_outline(doc, store)).source
    return {
        "document": doc.source_path.rsplit("/", 1)[-1],
        "pages": len(pages),
        "chunks": len(rows),
        "lengths": [len(r["content"]) for r in rows],
        "kinds": dict(Counter(r["kind"] for r in rows)),
        "over_window": sum(1 for t in tokens if t > model.max_tokens),
        "max_tokens_used": max(tokens, default=0),
        "found_in_pages": sum(1 for r in rows if chunk_found_in_pages(r, texts)),
        "spanning_pages": sum(1 for r in rows if r["page_end"] > r["page_index"]),
        "tree": {"source": source, "nodes": len(nodes), "depth": max((n["depth"] for n in nodes), default=0)},
        "toc_pages": sorted(catalog.toc_pages(doc.document_id)),
    }


def print_documents(figures: list[dict], model_window: int) -> None:
    print(
        f"\n{'document':<34}{'pages':>6}{'chunks':>7}  {'len p10/p50/p90/max':<22}{'>window':>8}{'found':>9}"
        f"{'spans':>6}  tree (source, nodes, depth)   toc pages"
    )
    for f in figures:
        d = distribution(f["lengths"])
        found = f"{100 * f['found_in_pages'] / max(1, f['chunks']):.1f}%"
        toc = f["toc_pages"]
        toc_text = f"{len(toc)}: {toc[0]}-{toc[-1]}" if toc else "0"
        print(
            f"{f['document'][:33]:<34}{f['pages']:>6}{f['chunks']:>7}  "
            f"{d['p10']:>4}/{d['p50']:>4}/{d['p90']:>4}/{d['max']:>5}     {f['over_window']:>6}{found:>9}"
            f"{f['spanning_pages']:>6}  {f['tree']['source']:<12}{f['tree']['nodes']:>5}{f['tree']['depth']:>4}"
            f"         {toc_text}"
        )
    print(f"(model window {model_window} tokens; lengths in characters of content)")


def evaluate_retrieval(settings, catalog, model, kbs: list[str]) -> dict:
    from kb_assets.retrieval.baseline import NaiveBaseline
    from kb_assets.retrieval.evaluation import evaluate, load_questions
    from kb_assets.retrieval.search import SearchRequest
    from kb_assets.retrieval.strategies import STRATEGIES
    from kb_assets.service.api import make_searcher

    questions = [q for q in load_questions(QUESTIONS) if q["kb"] in kbs]
    searcher = make_searcher(settings)
    scores = {}
    for strategy in STRATEGIES:
        started = time.perf_counter()
        scores[strategy] = evaluate(
            lambda q, strategy=strategy: (
                searcher.search(SearchRequest(q["query"], [q["kb"]], 10, None, strategy)).results
            ),
            questions,
        )
        print(f"  scored {strategy} in {time.perf_counter() - started:.0f} s", flush=True)
    started = time.perf_counter()
    documents = [
        ({"knowledgeBaseId": d.knowledge_base_id, "sourceUri": d.source_uri}, catalog.read_pages(d.document_id))
        for d in catalog.list_documents(kbs)
        if d.status == "published"
    ]
    naive = NaiveBaseline(model, documents)
    scores["naive baseline"] = evaluate(lambda q: naive.search(q["query"], [q["kb"]], 10), questions)
    print(
        f"  built and scored the naive baseline ({len(naive.rows)} windows) in {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    return scores


def print_scores(scores: dict) -> None:
    kbs = sorted({kb for s in scores.values() for kb in s if kb != "overall"}) + ["overall"]
    print(f"\n{'page-hit@1 / @5 / MRR':<22}" + "".join(f"{kb:>22}" for kb in kbs))
    for name, by_kb in scores.items():
        cells = []
        for kb in kbs:
            s = by_kb.get(kb) or {}
            cells.append(f"{s['hit@1']:.3f}/{s['hit@5']:.3f}/{s['mrr']:.3f}" if s.get("questions") else "-")
        print(f"{name:<22}" + "".join(f"{c:>22}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", default=str(REPO / ".kb-bench-chunking"))
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kb-assets" / "dev-corpus"))
    parser.add_argument("--fresh", action="store_true", help="wipe the home first and ingest everything again")
    parser.add_argument("--no-eval", action="store_true", help="skip the retrieval scores")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    cache = Path(args.cache).expanduser()
    home = Path(args.home).resolve()
    fetch(cache)
    os.environ["KB_HOME"] = str(home)
    os.environ.pop("DAGSTER_HOME", None)
    os.environ["DAGSTER_DISABLE_TELEMETRY"] = "1"

    from kb_assets.launch.ingest import ingest
    from kb_assets.services import stop_milvus, stop_postgres
    from kb_assets.settings import Settings
    from kb_assets.stores import Stores

    if args.fresh and home.exists():
        stop_milvus(home)
        stop_postgres(home)
        shutil.rmtree(home)
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o755)
    settings = Settings.from_env()
    report: dict = {"ingest": {}, "documents": {}, "scores": None}
    try:
        for kb, files in KNOWLEDGE_BASES.items():
            started = time.perf_counter()
            result = ingest([cache / f for f in files], kb, settings, progress=lambda m: print(f"  {m}", flush=True))
            report["ingest"][kb] = {
                **result.as_json()["documents"],
                "seconds": round(time.perf_counter() - started, 1),
                "failures": [f.as_json() for f in result.failures],
            }
            print(f"{kb}: {report['ingest'][kb]}", flush=True)

        stores = Stores(settings)
        catalog, lake, store, model = stores.catalog, stores.lake, stores.objects, stores.model()
        for kb in KNOWLEDGE_BASES:
            docs = [d for d in catalog.list_documents([kb]) if d.status == "published"]
            report["documents"][kb] = [document_figures(d, catalog, lake, store, model) for d in docs]
        every = [f for figures in report["documents"].values() for f in figures]
        print_documents(every, model.max_tokens)
        print(
            f"\n{'knowledge base':<14}{'chunks':>8}  length mean/p10/p25/p50/p75/p90/max   over window   found in pages"
            "   spanning pages   kinds"
        )
        for kb, figures in [*report["documents"].items(), ("all", every)]:
            lengths = [n for f in figures for n in f["lengths"]]
            n = max(1, len(lengths))
            d = distribution(lengths)
            kinds = Counter()
            for f in figures:
                kinds.update(f["kinds"])
            over = sum(f["over_window"] for f in figures)
            found = sum(f["found_in_pages"] for f in figures)
            spans = sum(f["spanning_pages"] for f in figures)
            print(
                f"{kb:<14}{len(lengths):>8}  {d.get('mean', 0):>4}/{d.get('p10', 0)}/{d.get('p25', 0)}/"
                f"{d.get('p50', 0)}/{d.get('p75', 0)}/{d.get('p90', 0)}/{d.get('max', 0):<12}"
                f"{over:>5} ({100 * over / n:.2f}%)  {found:>6} ({100 * found / n:.2f}%)"
                f"  {spans:>6} ({100 * spans / n:.1f}%)   {dict(kinds.most_common())}"
            )
        if not args.no_eval:
            report["scores"] = evaluate_retrieval(settings, catalog, model, list(KNOWLEDGE_BASES))
            print_scores(report["scores"])
        if args.json:
            args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False, default=str))
    finally:
        stop_milvus(home)
        stop_postgres(home)


if __name__ == "__main__":
    main()
