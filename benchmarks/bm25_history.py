"""Do rankings depend on how Milvus stored the chunks? The dev corpus ranked before and after a third of
two documents' chunks are written again (as an incremental ingest writes a changed document's new chunks
into new segments), with BM25 from the kept statistics and with Milvus's own scores.

    .venv/bin/python benchmarks/bm25_history.py --home .kb-bench [--knowledge-bases edu-zh,debian-en]

Changes the collection under ``--home`` (same content, other segments; ``kb-assets verify`` stays
consistent): use a copy of the dev corpus. Prints, per scoring, how many (question, strategy) pairs of
``retrieval_quality.py`` (dev and test splits, ``pageindex`` and ``hybrid``) moved their first right page
or answer. Measured here: kept statistics 0 of 906 moved; Milvus Lite's scores 23 (9 of them
``pageindex``; Chinese details dev hit@1 0.75 -> 0.71).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def ranks(home: Path, out: Path, kept: bool) -> dict:
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "retrieval_quality.py"), "--home", str(home),
                    "--splits", "dev,test", "--strategies", "pageindex,hybrid", "--dump", str(out),
                    "--set", f"kept_bm25_statistics={str(kept).lower()}"], check=True, capture_output=True)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return {(r["set"], r["strategy"], r["id"] or r["query"]): (r["pageRank"], r["answerRank"]) for r in rows}


def rewrite_a_third(home: Path, knowledge_bases: list[str]) -> int:
    """Delete every third chunk of the knowledge bases' documents from Milvus, then let ``verify --repair``
    write them again from the lake (into new segments). Returns the entities rewritten."""
    os.environ["KB_HOME"] = str(home)
    os.environ.pop("DAGSTER_HOME", None)
    sys.path.insert(0, str(REPO))
    from kb_assets.retrieval.api import make_searcher, one_thread_per_query
    from kb_assets.settings import Settings
    from kb_assets.stores.vectors import count_entities, flush

    searcher = make_searcher(one_thread_per_query(Settings.from_env()))
    collection, _ = searcher.published()
    before = count_entities(searcher.client, collection)
    for doc in searcher.catalog.list_documents(knowledge_bases):
        searcher.client.delete(collection, filter=f'document_id == "{doc.document_id}" and '
                                                  f'chunk_index in {list(range(0, doc.chunk_count or 0, 3))}')
    flush(searcher.client, collection)
    rewritten = before - count_entities(searcher.client, collection)
    searcher.close()
    subprocess.run([str(REPO / ".venv" / "bin" / "kb-assets"), "verify", "--repair"], check=True, capture_output=True,
                   env={**os.environ, "KB_HOME": str(home)})
    return rewritten


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, default=REPO / ".kb-bench")
    parser.add_argument("--knowledge-bases", default="edu-zh,debian-en")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bm25-history"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    home = args.home.resolve()
    before = {kept: ranks(home, args.work / f"before-{kept}.jsonl", kept) for kept in (True, False)}
    rewritten = rewrite_a_third(home, args.knowledge_bases.split(","))
    print(f"rewrote {rewritten} entities of {args.knowledge_bases} into new segments")
    for kept, label in ((True, "kept statistics"), (False, "Milvus's scores")):
        after = ranks(home, args.work / f"after-{kept}.jsonl", kept)
        moved = [key for key, value in before[kept].items() if after.get(key) != value]
        print(f"{label:16} {len(moved)} of {len(before[kept])} (question, strategy) pairs moved "
              f"({sum(1 for key in moved if key[1] == 'pageindex')} of them pageindex)")


if __name__ == "__main__":
    main()
