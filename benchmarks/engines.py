"""The vector engines side by side (issue 45): the dev corpus grown to N chunks in each engine at once,
then the default search through the searcher ``kb-assets serve`` builds, index recall, memory and disk.

    .venv/bin/python benchmarks/engines.py --home DIR --chunks 40000[,500000] [--engines embedded,lite-3.2.2]
        [--questions 90] [--concurrency 1,4] [--restart] [--grow-only] [--json OUT]

``--home``: a copy of a dev-corpus home (``benchmarks/dev_corpus.py``) with no kb-assets process on it, grown
in place. Engines:

- ``embedded``: the home's own engine (Milvus Lite 2.5.1's C++ core, FLAT). The first open of a home made
  by Milvus Lite 3.x moves its data folder aside and rebuilds the published collection from the lake: that
  migration is timed and printed.
- ``lite-3.2.2``: Milvus Lite 3.2.2 (what kb-assets ran before; HNSW, the default dense index) as a server
  on the moved-aside folder (``HOME/milvus-lite-3.2.2``), reached as ``KB_MILVUS_URI`` would reach it.

Both hold the same collection and share the home's catalog: each copy round (``search_scale.grow``'s:
every original document again under new ids, real text and the model's vectors) is inserted into every
engine (batches of 2,000, one flush a round; insert rows/s printed per engine), and the catalog rows once.
At each size, each engine alone (the others stopped with SIGSTOP): the searcher's warm-up and a warm pass,
then ``--questions`` of the manuals' questions at each concurrency (``search_scale.timed_searches``: wall
p50/p95 and the stages' p50), then recall@50 of the dense search exactly as the searcher makes it (the
question's knowledge base as filter, limit 50, the collection's index and search parameters) against
exact search: every copy repeats its original's vector, so exact top-50 are the originals' cosines, each as
many times as it has copies, and a hit counts when its cosine reaches the 50th exact one (ties counted as
equal). Then the engine's resident memory (its process tree) and its data on disk. ``--restart``: each
engine stopped and started again, and its first search timed (the collection loaded again).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_scale import (  # noqa: E402
    copy_catalog,
    copy_id,
    original_entities,
    originals,
    questions,
    rounds_done,
    timed_searches,
)

COPY_MARK = "~"
BATCH = 2000


class Engine:
    """One engine: its client, its process tree, its data folder."""

    def __init__(self, name: str, home: Path):
        from kb_assets.services import milvus_status
        from kb_assets.services.local import free_port

        self.name, self.home = name, home
        self.process: subprocess.Popen | None = None
        if name == "embedded":
            from kb_assets.stores import Stores

            self.data = home / "milvus"
            self.client = Stores(SETTINGS).milvus  # may rebuild the collection from the lake (timed by main)
            self.pid = lambda: milvus_status(home)["pid"]
        elif name == "lite-3.2.2":
            self.data = home / "milvus-lite-3.2.2"
            port = free_port()
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kb_assets.services.milvus_lite_server", "--data-dir", str(self.data)]
                + ["--host", "127.0.0.1", "--port", str(port)],
                stdout=open(home / "milvus-lite-3.2.2.log", "ab"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self.pid = lambda: self.process.pid
            try:
                self.client = connected(f"http://127.0.0.1:{port}", self.process)
            except BaseException:
                self.stop()
                raise
        else:
            raise SystemExit(f"unknown engine {name}")

    def signal(self, sig: int) -> None:
        os.killpg(self.pid(), sig)

    def rss_mb(self) -> float:
        return sum(rss_kb(pid) for pid in tree(self.pid())) / 1024

    def disk_mb(self) -> float:
        return sum(f.stat().st_size for f in self.data.rglob("*") if f.is_file()) / 1e6

    def restart(self) -> None:
        if self.name == "embedded":
            from kb_assets.services import ensure_milvus, stop_milvus

            stop_milvus(self.home)
            ensure_milvus(self.home)  # the same port: the client reconnects
        else:
            self.stop()
            self.__init__(self.name, self.home)

    def stop(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(60)


def connected(uri: str, process: subprocess.Popen, timeout_s: float = 600):
    """A client of the server at ``uri`` once it answers (a client made before fails at once)."""
    from kb_assets.services import milvus_client

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client = milvus_client(uri)
            client.list_collections()
            return client
        except Exception:
            if process.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def grow(engines: list[Engine], catalog, collection: str, target: int) -> dict:
    """Copy rounds into every engine until they hold ``target`` chunks; insert rows/s per engine."""
    from kb_assets.stores.entities import count_entities, insert
    from kb_assets.stores.vectors import flush

    sizes = {e.name: count_entities(e.client, collection) for e in engines}
    if len(set(sizes.values())) != 1:
        raise SystemExit(f"the engines hold different collections: {sizes}")
    size = sizes[engines[0].name]
    seconds = dict.fromkeys(sizes, 0.0)
    inserted = 0
    if size >= target:
        return {"chunks": size, "insertRowsPerS": {}}
    documents = originals(catalog)
    entities = original_entities(engines[0].client, collection, documents)
    round_number = rounds_done(catalog) // max(len(documents), 1)
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
        for engine in engines:
            began = time.perf_counter()
            for start in range(0, len(copies), BATCH):
                insert(engine.client, collection, copies[start : start + BATCH])
            flush(engine.client, collection)
            seconds[engine.name] += time.perf_counter() - began
        copy_catalog(catalog, new_docs, new_chunks, round_number)
        size += len(copies)
        inserted += len(copies)
        rates = ", ".join(f"{n} {inserted / s:.0f} rows/s" for n, s in seconds.items())
        print(f"  round {round_number}: {size} chunks ({time.perf_counter() - started:.0f} s; {rates})", flush=True)
    return {"chunks": size, "insertRowsPerS": {n: round(inserted / s) for n, s in seconds.items()}}


def recall_at_50(searcher, engine: Engine, collection: str, asked: list[dict], multiplicity: int) -> float:
    """Mean recall@50 of the searcher's dense search against exact search (ties counted as equal)."""
    from kb_assets.stores.vector_search import search_dense
    from kb_assets.stores.vectors import in_filter

    documents = set(originals(searcher.catalog))
    by_kb: dict[str, list] = {}
    for row in original_entities(engine.client, collection, sorted(documents)):
        by_kb.setdefault(row["knowledge_base_id"], []).append(row["dense"])
    model = searcher.load_model(searcher.published()[1]["model"])
    recalls = []
    for question in asked:
        vectors = np.asarray(by_kb[question["kb"]], dtype=np.float32)
        query = np.asarray(model.encode_queries([question["query"]])[0], dtype=np.float32)
        cosines = vectors @ query / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(query))
        exact = np.sort(np.repeat(cosines, multiplicity))[::-1][:50]
        flt = in_filter("knowledge_base_id", [question["kb"]])
        hits = search_dense(engine.client, collection, query.tolist(), flt, 50)
        found = sum(1 for hit in hits if hit.distance >= exact[-1] - 1e-4)
        recalls.append(min(found, len(exact)) / len(exact))
    return round(statistics.mean(recalls), 4)


def measure(engine: Engine, others: list[Engine], collection: str, asked, args, multiplicity: int) -> dict:
    from kb_assets.retrieval.search import Searcher
    from kb_assets.stores import Stores

    for other in others:
        other.signal(signal.SIGSTOP)
    try:
        stores = Stores(SETTINGS)
        config = SETTINGS.search
        searcher = Searcher(
            engine.client,
            stores.catalog_with_timeout(config.postgres_timeout_ms),
            SETTINGS.alias,
            stores.model,
            config,
            owns_catalog=True,
        )
        began = time.perf_counter()
        problems = searcher.warm_up()
        warm = time.perf_counter() - began
        timed_searches(searcher, asked, 1, None)  # warm: collection loaded, caches
        rows = {"warmUpS": round(warm, 1), "warmUpProblems": problems}
        for concurrency in [int(c) for c in args.concurrency.split(",")]:
            rows[f"c{concurrency}"] = timed_searches(searcher, asked, concurrency, None)
        rows["recallAt50"] = recall_at_50(searcher, engine, collection, asked[: args.recall_questions], multiplicity)
        rows["rssMB"] = round(engine.rss_mb())
        rows["diskMB"] = round(engine.disk_mb())
        if args.restart:
            engine.restart()
            searcher.client = engine.client  # the old engine comes back on another port
            searcher.forget_published()
            began = time.perf_counter()
            response = searcher.search(_request(asked[0]))
            rows["firstSearchAfterRestartS"] = round(time.perf_counter() - began, 1)
            rows["firstSearchWarnings"] = response.warnings
            rows["rssAfterRestartMB"] = round(engine.rss_mb())
        searcher.close()
        return rows
    finally:
        for other in others:
            other.signal(signal.SIGCONT)


def _request(question: dict):
    from kb_assets.retrieval.search import SearchRequest

    return SearchRequest(question["query"], knowledge_base_ids=[question["kb"]], limit=10)


def main() -> None:
    global SETTINGS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", required=True)
    parser.add_argument("--chunks", default="40000", help="sizes to reach, in order (comma-separated)")
    parser.add_argument("--engines", default="embedded,lite-3.2.2")
    parser.add_argument("--questions", type=int, default=90)
    parser.add_argument("--recall-questions", type=int, default=60)
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--restart", action="store_true")
    parser.add_argument(
        "--grow-only", action="store_true", help="grow to the sizes, measure nothing (long builds in pieces)"
    )
    parser.add_argument("--json", help="append the figures to this JSON file")
    args = parser.parse_args()
    home = Path(args.home).resolve()
    os.environ["KB_HOME"] = str(home)
    os.environ.pop("DAGSTER_HOME", None)
    os.environ.pop("KB_MILVUS_URI", None)

    from kb_assets.service.api import one_thread_per_query
    from kb_assets.settings import Settings
    from kb_assets.stores import Stores

    SETTINGS = one_thread_per_query(Settings.from_env())
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; home {home}", flush=True)
    engines = []
    for name in args.engines.split(","):
        began = time.perf_counter()
        engines.append(Engine(name, home))
        print(f"{name}: open {time.perf_counter() - began:.1f} s", flush=True)
    catalog = Stores(SETTINGS).catalog
    collection = catalog.published_collection(SETTINGS.alias)
    asked = questions(args.questions)
    figures = []
    try:
        for target in [int(n) for n in args.chunks.split(",")]:
            grown = grow(engines, catalog, collection, target)
            if args.grow_only:
                continue
            multiplicity = 1 + rounds_done(catalog) // max(len(originals(catalog)), 1)
            for engine in engines:
                row = {
                    "engine": engine.name,
                    **grown,
                    **measure(engine, [e for e in engines if e is not engine], collection, asked, args, multiplicity),
                }
                figures.append(row)
                line = ", ".join(
                    f"c{c['concurrency']} p50 {c['p50']:.0f} / p95 {c['p95']:.0f} ms ({c['page_fallbacks']} from pages)"
                    for key, c in row.items()
                    if key.startswith("c") and isinstance(c, dict)
                )
                print(
                    f"{grown['chunks']:>8} chunks  {engine.name:<11} {line}; recall@50 {row['recallAt50']}; "
                    f"RSS {row['rssMB']} MB, disk {row['diskMB']} MB; stages p50 {row['c1']['stages_p50']}"
                    + (f"; first search after a restart {row['firstSearchAfterRestartS']} s" if args.restart else ""),
                    flush=True,
                )
    finally:
        for engine in engines:
            engine.stop()
        if args.json:
            path = Path(args.json)
            previous = json.loads(path.read_text()) if path.exists() else []
            path.write_text(json.dumps(previous + figures, indent=1))


SETTINGS = None

if __name__ == "__main__":
    main()
