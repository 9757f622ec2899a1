"""The analysis map on real filings (issue 44): does each analysis of ``kb_assets/structure/analyses.toml`` reach a
statement or section node of real (non-held-out, development) filings, and do analysts' questions reach their
evidence page?

    python benchmarks/filings/analysis_map.py --home /work/kb-filings-all

Reads the knowledge base ``benchmarks/filings.py --split all`` built (its PageIndex nodes, as search reads them;
nothing is searched). Prints, for the annual and quarterly reports in it: the share of (filing, analysis) pairs
whose sources have a node in the filing, per family of analyses, and the analyses that reach no node in most
filings; then, for the development questions that ask for an analysis (``analyst_questions.jsonl`` and the
FinanceBench questions), the share whose evidence page is among the pages routed to, and among those routed to
with the best value.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from heldout import guard  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", required=True)
    args = parser.parse_args()
    os.environ["KB_HOME"] = str(Path(args.home).resolve())
    os.environ.pop("DAGSTER_HOME", None)
    import filings as bench

    from kb_assets.retrieval.routing import routed_pages, routing
    from kb_assets.settings import Settings
    from kb_assets.stores import Stores
    from kb_assets.structure.analyses import ANALYSES, FAMILIES, source_weights

    catalog = Stores(Settings.from_env()).catalog
    documents = [d for d in catalog.list_documents([bench.KB]) if d.status == "published"]
    metadata = catalog.document_metadata([bench.KB])
    ids = {guard(Path(d.source_uri).stem): d.document_id for d in documents}
    nodes = defaultdict(list)
    for document_id, node_id, title, start, end in catalog.evidence_nodes([bench.KB], sorted(ids.values())):
        nodes[document_id].append((document_id, node_id, title, start, end))
    reports = [i for i in ids.values() if (metadata.get(i) or {}).get("kind") in ("annual report", "quarterly report")]
    reached: Counter[str] = Counter()
    missed: Counter[str] = Counter()
    for document_id in reports:
        for analysis in ANALYSES:
            if routed_pages(nodes[document_id], source_weights([analysis])):
                reached[analysis.family] += 1
            else:
                missed[analysis.name] += 1
    per_family = Counter(a.family for a in ANALYSES)
    print(f"{len(reports)} annual and quarterly reports, {len(ANALYSES)} analyses")
    for family in FAMILIES:
        print(f"  {family:20} {reached[family] / (per_family[family] * len(reports)):.2f} of (filing, analysis) pairs")
    total = sum(reached.values()) / (len(ANALYSES) * len(reports))
    print(
        f"  {'all':20} {total:.2f}; reaching no node in more than half: "
        + ", ".join(f"{name} ({n})" for name, n in missed.most_common() if n > len(reports) / 2)
    )
    questions, _ = bench.load_set("all")
    asked = []
    for q in questions:
        route = routing(q["question"])
        if route is None or q["doc"] not in ids:
            continue
        pages = routed_pages(nodes[ids[q["doc"]]], route.weights)
        best = max(pages.values(), default=0.0)
        evidence = {(ids[q["doc"]], p) for p in q["pages"]}
        asked.append(
            (
                q["question_type"],
                bool(evidence & pages.keys()),
                bool(evidence & {k for k, v in pages.items() if v == best}),
            )
        )
    print(f"\n{len(asked)} development questions asking for an analysis: evidence page routed to / among the best")
    for kind in sorted({k for k, _, _ in asked}) + ["all"]:
        rows = [r for r in asked if kind in ("all", r[0])]
        routed, best = sum(r[1] for r in rows) / len(rows), sum(r[2] for r in rows) / len(rows)
        print(f"  {kind:28} {len(rows):4}  {routed:.2f} / {best:.2f}")


if __name__ == "__main__":
    main()
