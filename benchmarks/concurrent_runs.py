"""The dev corpus ingested with 1 and with 2 concurrent runs (KB_CONCURRENT_RUNS), each into a fresh home.

    .venv/bin/python benchmarks/concurrent_runs.py [--runs 1,2] [--work /tmp/kb-bench-runs]
                                                   [--cache ~/.cache/kb-assets/dev-corpus]

Every document is its own run range (KB_RUN_BATCH_SIZE=1), so the 5 manuals can run side by side.
Prints, per setting: the wall time of the full ingest, pages and chunks a second, the no-op re-run
(every file unchanged) as a share of the full ingest, peak memory of the ingesting processes, and
whether `verify` finds the stores consistent. Each setting runs in its own process so that nothing
(loaded models, environment) carries over. Load average is printed beside the figures: on a shared
machine they only compare with each other.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from dev_corpus import KNOWLEDGE_BASES, fetch  # a sibling: this script's folder is first on sys.path

REPO = Path(__file__).resolve().parents[1]


def ingest_once(cache: Path) -> dict:
    """Run inside the child: ingest every knowledge base, then again unchanged; figures as a dict."""
    from kb_assets.launch.ingest import ingest
    from kb_assets.pipeline.verify import verify
    from kb_assets.services import stop_milvus, stop_postgres
    from kb_assets.settings import Settings
    from kb_assets.stores import Stores

    settings = Settings.from_env()
    try:
        started = time.perf_counter()
        failures = []
        for kb, files in KNOWLEDGE_BASES.items():
            failures += ingest([cache / f for f in files], kb, settings).failures
        full = time.perf_counter() - started
        started = time.perf_counter()
        for kb, files in KNOWLEDGE_BASES.items():
            ingest([cache / f for f in files], kb, settings)
        noop = time.perf_counter() - started
        stores = Stores(settings)
        documents = stores.catalog.list_documents(list(KNOWLEDGE_BASES))
        report = verify(stores.catalog, stores.lake, stores.milvus, settings.alias)
        return {
            "full_s": full,
            "noop_s": noop,
            "failures": len(failures),
            "documents": len(documents),
            "pages": sum(d.page_count or 0 for d in documents),
            "chunks": sum(d.chunk_count or 0 for d in documents),
            "consistent": report.consistent,
        }
    finally:
        stop_milvus(settings.home)
        stop_postgres(settings.home)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default="1,2")
    parser.add_argument("--work", default="/tmp/kb-bench-runs")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kb-assets" / "dev-corpus"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    cache = Path(args.cache).expanduser()
    if args.child:
        print(json.dumps(ingest_once(cache)))
        return
    fetch(cache)
    work = Path(args.work)
    for runs in [int(n) for n in args.runs.split(",")]:
        home = work / f"runs-{runs}"
        shutil.rmtree(home, ignore_errors=True)
        env = dict(os.environ, KB_HOME=str(home), KB_CONCURRENT_RUNS=str(runs), KB_RUN_BATCH_SIZE="1")
        env.pop("DAGSTER_HOME", None)
        load = os.getloadavg()[0]
        child = subprocess.run(
            [sys.executable, __file__, "--child", "--cache", str(cache)],
            env=env,
            capture_output=True,
            text=True,
            cwd=REPO,
        )
        if child.returncode:
            sys.exit(f"KB_CONCURRENT_RUNS={runs} failed:\n{child.stderr[-4000:]}")
        figures = json.loads(child.stdout.strip().splitlines()[-1])
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(
            f"KB_CONCURRENT_RUNS={runs}: {figures['documents']} documents, {figures['pages']} pages, "
            f"{figures['chunks']} chunks in {figures['full_s']:.1f} s "
            f"({figures['pages'] / figures['full_s']:.2f} pages/s, "
            f"{figures['chunks'] / figures['full_s']:.1f} chunks/s), "
            f"{figures['failures']} failed; no-op re-run {figures['noop_s']:.1f} s "
            f"({100 * figures['noop_s'] / figures['full_s']:.1f}% of the full ingest); "
            f"largest process peak {peak_mb:.0f} MB; verify consistent: {figures['consistent']}; "
            f"load average at start {load:.2f}, at end {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
        )
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
