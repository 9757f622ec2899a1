"""Latency p50/p95 and requests/s of ``POST /v1/kb/search`` over HTTP at 10k and 100k chunks, beside raw
Milvus searches with the same filters on the same collection, in the same run.

    .venv/bin/python benchmarks/retrieval_latency.py [--home .kb-bench-latency] [--sizes 10000,100000]

Synthetic corpus (built once per size under ``--home``, reused by later runs): chunks of 60 words
drawn from a Zipf-distributed 4,000-word vocabulary, random unit vectors (encoding 100k chunks with the
model would take half an hour here), 7 chunks a page, 10 pages a document; the Postgres catalog gets
the documents, pages (text, summary, keywords) and one PageIndex node a page, so the ``pageindex``
strategy locates pages as it does on real documents. A second, small knowledge base makes the filter
select something. Queries are 3-5 vocabulary words; the service embeds them with the real model.

The service runs as ``kb-assets serve`` in its own process. Raw figures are what the Milvus searches
the service makes take, called directly (``stores.vector_search.search_dense``/``search_bm25``, one pymilvus
call each) with the same filters, query vectors computed beforehand:
``hybrid`` = dense + BM25 (knowledge-base filter), one after the other; ``pageindex`` = those plus
BM25 filtered to the pages the catalog locates (the locate query itself is not in the raw
figure); ``raw + query embedding`` adds the model call a text query needs before its dense search.
Service and raw alternate per query so neither profits from the other's caches. Milvus Lite answers one
request at a time, so the service's parallel dense + BM25 searches gain nothing here.
Goal (issue 5): service <= 1.3 x raw.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CHUNKS_PER_PAGE, PAGES_PER_DOC, WORDS_PER_CHUNK, VOCABULARY = 7, 10, 60, 4000


def vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables, size=rng.integers(2, 4))))
    return sorted(words)


def kb_names(size: int) -> tuple[str, str]:
    """The searched knowledge base of a size and the small other one (each size has its own)."""
    return f"bench-{size // 1000}k", f"bench-{size // 1000}k-other"


def build(client, catalog, size: int, dimension: int, rng: np.random.Generator, words: list[str]) -> str:
    """The collection of ``size`` synthetic chunks (published under its own alias) and its catalog rows."""
    from kb_assets.lib.lexical import chunk_terms
    from kb_assets.stores.entities import clear, count_entities, insert
    from kb_assets.stores.vectors import SCHEMA_VERSION, EmbeddingSpec, ensure_collection, flush, publish

    spec = EmbeddingSpec(
        model="all-MiniLM-L6-v2", dimension=dimension, languages=("en",), short_name=f"synthetic{size // 1000}k"
    )
    alias = f"bench_{size // 1000}k"
    collection = ensure_collection(client, spec)
    with catalog.connect() as conn:
        catalog.record_collection(
            conn,
            name=collection,
            alias=alias,
            schema_version=SCHEMA_VERSION,
            model=spec.model,
            dimension=spec.dimension,
            languages=list(spec.languages),
            state="building",
        )
    publish(client, catalog, alias, collection)
    if count_entities(client, collection) == size:
        print(f"  {collection}: {size} chunks already there")
        return alias
    clear(client, collection)
    KB, OTHER_KB = kb_names(size)
    probabilities = 1 / np.arange(1, len(words) + 1) ** 1.1
    probabilities /= probabilities.sum()
    started = time.perf_counter()
    documents, contents, rows = {}, {}, []
    for i in range(size):
        kb = OTHER_KB if i % 50 == 49 else KB
        doc, rest = divmod(i, CHUNKS_PER_PAGE * PAGES_PER_DOC)
        page, chunk = divmod(rest, CHUNKS_PER_PAGE)
        document_id = f"synthetic-{size}-{doc}"
        text = " ".join(rng.choice(words, size=WORDS_PER_CHUNK, p=probabilities))
        vector = rng.standard_normal(dimension).astype(np.float32)
        title = (
            f"Section {doc}.{page + 1} {words[(doc * 31 + page * 7) % 800 + 50]} {words[(doc * 17 + page) % 800 + 50]}"
        )
        documents.setdefault((kb, document_id), {}).setdefault(page, {"title": title, "chunks": []})["chunks"].append(
            text
        )
        contents.setdefault(document_id, []).append((f"{document_id}-{page}-{chunk}", f"{title}\n{text}"))
        rows.append(
            {
                "chunk_id": f"{document_id}-{page}-{chunk}",
                "knowledge_base_id": kb,
                "document_id": document_id,
                "document_version": "v1",
                "document_title": f"Synthetic document {doc}",
                "source_uri": f"synthetic/{document_id}.txt",
                "section_title": title,
                "page_label": str(page + 1),
                "kind": "text",
                "source_kind": "text",
                "mime": "text/plain",
                "image_key": "",
                "page_index": page,
                "page_end": page,
                "chunk_index": rest,
                "content": f"{title}\n{text}",
                "dense": (vector / np.linalg.norm(vector)).tolist(),
            }
        )
        if len(rows) == 2000:
            insert(client, collection, rows)
            rows = []
    if rows:
        insert(client, collection, rows)
    flush(client, collection)
    print(f"  {collection}: {size} chunks inserted and flushed in {time.perf_counter() - started:.0f} s")

    started = time.perf_counter()
    with catalog.connect() as conn:
        for (kb, document_id), pages in documents.items():
            catalog.register_document(
                conn,
                document_id=document_id,
                knowledge_base_id=kb,
                source_root="synthetic",
                source_path=f"{document_id}.txt",
                source_uri=f"synthetic/{document_id}.txt",
                version="v1",
                size_bytes=0,
            )
            catalog.update_document(
                conn,
                document_id,
                status="published",
                title=document_id,
                published_version="v1",
                page_count=len(pages),
                chunk_count=sum(len(p["chunks"]) for p in pages.values()),
            )
            catalog.replace_chunk_terms(conn, document_id, chunk_terms(contents[document_id]))
            page_rows, nodes = (
                [],
                [
                    {
                        "node_id": "n0",
                        "parent_id": None,
                        "ordinal": 0,
                        "title": document_id,
                        "depth": 0,
                        "start_page": 0,
                        "end_page": len(pages) - 1,
                    }
                ],
            )
            for index, page in sorted(pages.items()):
                text = page["title"] + "\n" + "\n".join(page["chunks"])
                keywords = sorted(set(text.split()[3:]), key=text.count, reverse=True)[:4]
                page_rows.append(
                    {
                        "page_index": index,
                        "text": text,
                        "blocks": [],
                        "summary": text[:160],
                        "keywords": keywords,
                        "parser": "synthetic",
                        "mode": "synthetic",
                    }
                )
                nodes.append(
                    {
                        "node_id": f"n{index + 1}",
                        "parent_id": "n0",
                        "ordinal": index + 1,
                        "title": page["title"],
                        "depth": 1,
                        "start_page": index,
                        "end_page": index,
                        "summary": text[:160],
                        "keywords": keywords,
                    }
                )
            catalog.replace_pages(conn, document_id, "v1", page_rows, "synthetic")
            catalog.replace_nodes(conn, document_id, "v1", nodes, "synthetic")
    print(
        f"  catalog: {len(documents)} documents with pages, nodes and BM25 statistics in "
        f"{time.perf_counter() - started:.0f} s"
    )
    return alias


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(latencies_ms: list[float]) -> dict:
    return {"p50Ms": round(statistics.median(latencies_ms), 1), "p95Ms": round(percentile(latencies_ms, 0.95), 1)}


def throughput(call, queries: list, concurrency: int, requests: int) -> float:
    """Requests a second with ``concurrency`` callers sharing ``requests`` calls."""
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(call, [queries[i % len(queries)] for i in range(requests)]))
    return round(requests / (time.perf_counter() - started), 1)


def measure(size: int, alias: str, client, searcher, model, queries: list[str], args) -> dict:
    import httpx

    from kb_assets.retrieval.query import query_terms
    from kb_assets.stores.vector_search import search_bm25, search_dense
    from kb_assets.stores.vectors import in_filter, pages_filter, published_collection

    collection = published_collection(client, searcher.catalog, alias)
    KB = kb_names(size)[0]
    kb_filter = in_filter("knowledge_base_id", [KB])
    vectors = {q: model.encode([q])[0].tolist() for q in queries}
    page_filters = {}
    for q in queries:
        located = searcher.catalog.locate_pages(query_terms(q), q, [KB], searcher.config.pageindex_pages)
        ranges: dict = {}
        for page in located:
            ranges.setdefault(page.document_id, []).append((page.page_index, page.page_index))
        page_filters[q] = f"({in_filter('knowledge_base_id', [KB])}) and ({pages_filter(ranges)})" if ranges else None

    def raw(q: str, flt: str, dense: bool = True) -> None:
        if dense:
            search_dense(client, collection, vectors[q], flt, 50)  # ef 100, as the service asks
        search_bm25(client, collection, q, flt, 50)

    def raw_call(strategy: str, encode: bool = False):
        def call(q: str) -> None:
            if encode:  # what a text query costs before its dense search
                model.encode([q])
            raw(q, kb_filter)
            if strategy == "pageindex" and page_filters[q]:
                raw(q, page_filters[q], dense=False)

        return call

    port = free_port()
    env = {**os.environ, "KB_MILVUS_ALIAS": alias, "KB_API_KEYS": ""}
    log = open(Path(os.environ["KB_HOME"]) / f"serve-{size}.log", "wb")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "kb-assets"), "serve", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kb-assets serve did not start; see {log.name}")
            time.sleep(0.5)
        http = httpx.Client(timeout=60)

        def service_call(strategy: str):
            def call(q: str) -> None:
                response = http.post(
                    f"{url}/v1/kb/search",
                    json={"query": q, "knowledgeBaseIds": [KB], "strategy": strategy, "limit": 10},
                )
                response.raise_for_status()
                assert response.json()["results"], response.json()["warnings"]

            return call

        for q in queries[:3]:  # warm the server, the model and the KB filter
            service_call("hybrid")(q)
            raw_call("hybrid")(q)
        result = {}
        for strategy in ("hybrid", "pageindex"):
            service, direct, encoded = service_call(strategy), raw_call(strategy), raw_call(strategy, encode=True)
            timings: dict[str, list[float]] = {"service": [], "raw": [], "rawWithEncode": []}
            for i, q in enumerate(queries[3:]):
                order = [("service", service), ("raw", direct), ("rawWithEncode", encoded)]
                for name, call in order if i % 2 == 0 else order[::-1]:
                    started = time.perf_counter()
                    call(q)
                    timings[name].append((time.perf_counter() - started) * 1000)
            measured = {name: summary(values) for name, values in timings.items()}
            measured["service"]["requestsPerS"] = throughput(service, queries, args.concurrency, args.requests)
            measured["raw"]["requestsPerS"] = throughput(direct, queries, args.concurrency, args.requests)
            measured["ratioP50"] = round(measured["service"]["p50Ms"] / measured["raw"]["p50Ms"], 2)
            measured["ratioP95"] = round(measured["service"]["p95Ms"] / measured["raw"]["p95Ms"], 2)
            measured["ratioP50WithEncode"] = round(measured["service"]["p50Ms"] / measured["rawWithEncode"]["p50Ms"], 2)
            result[strategy] = measured
            s, r, e = measured["service"], measured["raw"], measured["rawWithEncode"]
            print(
                f"  {size:>7} {strategy:<10} service p50 {s['p50Ms']:>6} ms  p95 {s['p95Ms']:>6} ms  "
                f"{s['requestsPerS']:>5} req/s | raw p50 {r['p50Ms']:>6} ms  p95 {r['p95Ms']:>6} ms  "
                f"{r['requestsPerS']:>5} req/s | service/raw p50 {measured['ratioP50']}x  p95 {measured['ratioP95']}x"
                f" | raw + query embedding p50 {e['p50Ms']} ms: service/that {measured['ratioP50WithEncode']}x",
                flush=True,
            )
        http.close()
        return result
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", default=str(REPO / ".kb-bench-latency"))
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=43, help="queries timed one by one (3 more warm up)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--requests", type=int, default=40, help="requests of each throughput run")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    os.environ["KB_HOME"] = str(Path(args.home).resolve())
    os.environ.pop("DAGSTER_HOME", None)
    os.environ.pop("KB_API_KEYS", None)

    from kb_assets.service.api import make_searcher, one_thread_per_query
    from kb_assets.settings import Settings
    from kb_assets.stores import Stores

    settings = one_thread_per_query(Settings.from_env())  # the raw side embeds queries as kb-assets serve does
    stores = Stores(settings)
    client, catalog, model = stores.milvus, stores.catalog, stores.model()
    rng = np.random.default_rng(7)
    words = vocabulary(VOCABULARY, rng)
    queries = [" ".join(rng.choice(words[50:1500], size=rng.integers(3, 6))) for _ in range(args.queries)]
    report = {}
    for size in [int(s) for s in args.sizes.split(",")]:
        print(f"{size} chunks:")
        alias = build(client, catalog, size, model.dimension, rng, words)
        searcher = make_searcher(settings)
        report[size] = measure(size, alias, client, searcher, model, queries, args)
        searcher.close()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
