"""Search latency as the knowledge base grows: the dev corpus's real chunks copied under other document
names until the collection holds N chunks, then the searcher timed with the manuals' questions.

    .venv/bin/python benchmarks/search_scale.py --home .kb-bench-scale --chunks 40000,500000
        [--questions 120] [--concurrency 1,4] [--strategy pageindex] [--set FIELD=VALUE]... [--json OUT]

``--home`` holds an ingested corpus (``benchmarks/dev_corpus.py --home DIR``, ~3 min); it is grown in
place, so copy the folder first (``cp -a .kb-bench .kb-bench-scale`` with no kb-assets process on it)
to keep the original for ``retrieval_quality.py``. Each copy round adds every original document again
under new ids (``ORIGINAL~k``, hashed to the original's id length): in Milvus its entities (real text, the
real model's vectors; Milvus Lite derives BM25 on insert) with new chunk ids, one flush a round as one
ingest run does; in Postgres what an ingest writes and search reads, copied row for row (``documents``,
``pages``, ``pageindex_nodes``, ``chunk_terms``; every column, so a column added later is copied too;
the knowledge bases' term counts grow by the copies'). Copies stay in their original's knowledge base, so
the searched knowledge base is what grows. Sizes are reached in order (a later size adds to the earlier one).

At each size the searcher is built as ``kb-assets serve`` builds it (``make_searcher`` with one encoder
thread a query) and asked ``--questions`` questions (titles, paraphrases and detail questions taken
evenly from the three sets, each in its own knowledge base, limit 10), after a warm-up pass, at each
concurrency (threads sharing the one searcher). Printed: wall p50/p95 per request, how many were answered
from pages because chunk search failed (a Milvus call past ``KB_MILVUS_TIMEOUT_S``), and the p50 of each
stage of ``timingsMs`` (``kb_assets.retrieval.request.STAGES``; stages overlap where they run in
parallel), and what the stores hold at that size: the embedded Milvus engine's resident memory and data on
disk, the catalog's size in Postgres. Goals (issue 51), the default strategy on a 2-core machine with no other
job running: at ~40,000 chunks p50 <= 50 ms and p95 <= 120 ms at one client, and at 4 clients at least 1.8x one
client's requests a second; at ~500,000 chunks p50 <= 100 ms and p95 <= 250 ms at one client.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUESTION_FILES = (
    REPO.parent / "shared" / "eval" / "dev_questions.jsonl",
    REPO / "benchmarks" / "paraphrased_questions.jsonl",
    REPO / "benchmarks" / "detail_questions.jsonl",
)
COPY_MARK = "~"  # in a copy's source_path: ORIGINAL~k
CATALOG_TABLES = ("documents", "pages", "pageindex_nodes", "chunk_terms")


def copy_id(original: str, round_number: int) -> str:
    """A copy's id: as long as the original's (ids fit Milvus's field lengths), unique per round."""
    return hashlib.sha256(f"{original}{COPY_MARK}{round_number}".encode()).hexdigest()[: max(len(original), 16)]


def originals(catalog) -> list[str]:
    """The published documents that are not copies."""
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT document_id FROM documents WHERE status = 'published' AND position(%s in source_path) = 0 "
            "ORDER BY document_id",
            (COPY_MARK,),
        )
        return [row[0] for row in cur.fetchall()]


def rounds_done(catalog) -> int:
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM documents WHERE position(%s in source_path) > 0", (COPY_MARK,))
        copies = cur.fetchone()[0]
    return copies


def columns(cur, table: str) -> list[str]:
    cur.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
        (table,),
    )
    return [row[0] for row in cur.fetchall()]


def copy_catalog(catalog, documents: dict[str, str], chunks: dict[str, str], round_number: int) -> None:
    """Every row search reads of the original documents, under the copies' ids, in one transaction."""
    suffix = f"{COPY_MARK}{round_number}"
    replaced = {
        "document_id": "d.new_id",
        "chunk_id": "c.new_id",
        "source_path": "t.source_path || %(suffix)s",
        "source_uri": "t.source_uri || %(suffix)s",
        "partition_key": "CASE WHEN t.partition_key IS NULL THEN NULL ELSE t.partition_key || %(suffix)s END",
    }
    params = {
        "old_docs": list(documents),
        "new_docs": list(documents.values()),
        "old_chunks": list(chunks),
        "new_chunks": list(chunks.values()),
        "suffix": suffix,
    }
    with catalog.connect() as conn, conn.cursor() as cur:
        for table in CATALOG_TABLES:
            names = columns(cur, table)
            select = ", ".join(replaced.get(name, f"t.{name}") for name in names)
            join_chunks = (
                "JOIN unnest(%(old_chunks)s::text[], %(new_chunks)s::text[]) AS c(old_id, new_id) "
                "ON c.old_id = t.chunk_id"
                if "chunk_id" in names
                else ""
            )
            cur.execute(
                f"INSERT INTO {table} ({', '.join(names)}) SELECT {select} FROM {table} t "
                "JOIN unnest(%(old_docs)s::text[], %(new_docs)s::text[]) AS d(old_id, new_id) "
                f"ON d.old_id = t.document_id {join_chunks}",
                params,
            )
        cur.execute(  # the copies' chunks hold their terms too: the knowledge bases' counts grow by them
            "INSERT INTO knowledge_base_terms (knowledge_base_id, term, chunks) "
            "SELECT d.knowledge_base_id, t.term, count(*) FROM chunk_terms c JOIN documents d USING (document_id), "
            "unnest(c.terms) AS t(term) WHERE d.document_id = ANY(%(new_docs)s) GROUP BY 1, 2 "
            "ON CONFLICT (knowledge_base_id, term) DO UPDATE "
            "SET chunks = knowledge_base_terms.chunks + EXCLUDED.chunks",
            params,
        )
        conn.commit()


def original_entities(client, collection: str, documents: list[str]) -> list[dict]:
    from kb_assets.stores.entities import query_all
    from kb_assets.stores.vectors import OUTPUT_FIELDS, in_filter

    entities = []
    for document_id in documents:
        entities += query_all(client, collection, in_filter("document_id", [document_id]), OUTPUT_FIELDS + ["dense"])
    return entities


def grow(stores, collection: str, target: int) -> int:
    """Copy rounds until the collection holds at least ``target`` chunks; its size after."""
    from kb_assets.stores.entities import count_entities, insert
    from kb_assets.stores.vectors import flush

    client, catalog = stores.milvus, stores.catalog
    size = count_entities(client, collection)
    if size >= target:
        return size
    documents = originals(catalog)
    entities = original_entities(client, collection, documents)
    round_number = rounds_done(catalog) // max(len(documents), 1)
    print(f"  {len(documents)} original documents, {len(entities)} chunks; {size} chunks now, growing to {target}")
    started = time.perf_counter()
    while size < target:
        round_number += 1
        new_docs = {d: copy_id(d, round_number) for d in documents}
        new_chunks = {e["chunk_id"]: copy_id(e["chunk_id"], round_number) for e in entities}
        copies = [
            {
                **entity,
                "chunk_id": new_chunks[entity["chunk_id"]],
                "document_id": new_docs[entity["document_id"]],
                "source_uri": entity["source_uri"] + f"{COPY_MARK}{round_number}",
            }
            for entity in entities
        ]
        for start in range(0, len(copies), 2000):
            insert(client, collection, copies[start : start + 2000])
        flush(client, collection)
        copy_catalog(catalog, new_docs, new_chunks, round_number)
        size += len(copies)
        print(f"  round {round_number}: {size} chunks ({time.perf_counter() - started:.0f} s)", flush=True)
    return size


def footprint(home: Path, catalog) -> str:
    """The embedded engine's resident memory and data on disk, and the catalog's database size, in MB."""
    rss = 0
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
            status = (proc / "status").read_text()
        except (OSError, ValueError):
            continue
        if command and command[0].endswith(b"/lib/milvus") and str(home / "milvus").encode() in b" ".join(command):
            rss += next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
    disk = sum(f.stat().st_size for f in (home / "milvus").rglob("*") if f.is_file())
    with catalog.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT pg_database_size(current_database())")
        postgres = cur.fetchone()[0]
    return f"engine {rss / 1024:.0f} MB resident, {disk / 2**20:.0f} MB on disk; catalog {postgres / 2**20:.0f} MB"


def questions(limit: int) -> list[dict]:
    """``limit`` questions taken evenly from each set (in file order)."""
    from kb_assets.retrieval.evaluation import load_questions

    sets = [load_questions(path) for path in QUESTION_FILES if path.exists()]
    share = max(1, limit // len(sets))
    picked = []
    for rows in sets:
        step = max(1, len(rows) // share)
        picked += rows[::step][:share]
    return picked


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def timed_searches(searcher, asked: list[dict], concurrency: int, strategy: str | None) -> dict:
    from kb_assets.retrieval.request import STAGES
    from kb_assets.retrieval.search import SearchRequest

    def one(question: dict) -> tuple[float, dict, bool]:
        started = time.perf_counter()
        response = searcher.search(
            SearchRequest(question["query"], knowledge_base_ids=[question["kb"]], limit=10, strategy=strategy)
        )
        failed = any("chunk search failed" in warning for warning in response.warnings)  # e.g. Milvus timeout
        return (time.perf_counter() - started) * 1000, response.as_json()["timingsMs"], failed

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        started = time.perf_counter()
        done = list(pool.map(one, asked))
        seconds = time.perf_counter() - started
    walls = [wall for wall, _, _ in done]
    return {
        "concurrency": concurrency,
        "requests": len(done),
        "page_fallbacks": sum(failed for _, _, failed in done),
        "per_second": round(len(done) / seconds, 1),
        "p50": round(statistics.median(walls), 1),
        "p95": round(percentile(walls, 0.95), 1),
        "stages_p50": {s: round(statistics.median(t[s] for _, t, _ in done), 1) for s in STAGES},
        "stages_p95": {s: round(percentile([t[s] for _, t, _ in done], 0.95), 1) for s in STAGES},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", default=str(REPO / ".kb-bench-scale"))
    parser.add_argument("--chunks", default="40000", help="sizes to reach, in order (comma-separated)")
    parser.add_argument("--questions", type=int, default=120)
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--strategy", default=None, help="default: the configured one")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="a SearchConfig field")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    os.environ["KB_HOME"] = str(Path(args.home).resolve())
    os.environ.pop("DAGSTER_HOME", None)

    from retrieval_quality import config_overrides

    from kb_assets.service.api import make_searcher, one_thread_per_query
    from kb_assets.settings import Settings
    from kb_assets.stores import Stores
    from kb_assets.stores.vectors import load, published_collection

    settings = one_thread_per_query(Settings.from_env())
    stores = Stores(settings)
    collection = published_collection(stores.milvus, stores.catalog, settings.alias)
    load(stores.milvus, collection)
    asked = questions(args.questions)
    figures = []
    for target in [int(n) for n in args.chunks.split(",")]:
        size = grow(stores, collection, target)
        searcher = make_searcher(settings, config_overrides(args.set, settings.search))
        searcher.warm_up()
        timed_searches(searcher, asked, 1, args.strategy)  # warm: collection loaded, indexes built, caches
        for concurrency in [int(c) for c in args.concurrency.split(",")]:
            row = {"chunks": size, **timed_searches(searcher, asked, concurrency, args.strategy)}
            figures.append(row)
            stages = ", ".join(f"{s} {row['stages_p50'][s]:g}" for s in row["stages_p50"] if row["stages_p50"][s])
            print(
                f"{size:>8} chunks  concurrency {concurrency}: p50 {row['p50']:.0f} ms  p95 {row['p95']:.0f} ms  "
                f"{row['per_second']} req/s  {row['page_fallbacks']} answered from pages  | stage p50 ms: {stages}",
                flush=True,
            )
        searcher.close()
        print(f"{size:>8} chunks  {footprint(Path(args.home).resolve(), stores.catalog)}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
