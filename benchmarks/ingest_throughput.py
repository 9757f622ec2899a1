"""Ingest throughput on the embedded profile: the sample corpus copied N times into a fresh KB_HOME.

    .venv/bin/python benchmarks/ingest_throughput.py [--copies 5]

Prints documents, pages and chunks per second, the time of each asset step from the Dagster run
stats, and the cost of a second ingest of the unchanged files (no run should start).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kb-bench-ingest-"))
    work.chmod(0o755)
    corpus = work / "corpus"
    for copy in range(args.copies):
        shutil.copytree(REPO / "examples" / "corpus", corpus / f"copy{copy}")
    os.environ["KB_HOME"] = str(work / "home")
    os.environ.pop("DAGSTER_HOME", None)

    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.services import stop_milvus, stop_postgres
    from kb_assets.settings import Settings
    from kb_assets.stores import Stores

    settings = Settings.from_env()
    try:
        started = time.perf_counter()
        report = ingest([corpus], "bench", settings)
        first = time.perf_counter() - started
        catalog_docs = Stores(settings).catalog.list_documents(["bench"])
        pages = sum(d.page_count or 0 for d in catalog_docs)
        chunks = sum(d.chunk_count or 0 for d in catalog_docs)
        print(
            f"first ingest: {len(catalog_docs)} documents, {pages} pages, {chunks} chunks in {first:.1f} s "
            f"({len(catalog_docs) / first:.2f} docs/s, {pages / first:.1f} pages/s, {chunks / first:.1f} chunks/s), "
            f"{len(report.run_ids)} runs, {len(report.failures)} failed"
        )
        instance = dagster_instance(settings)
        for run_id in report.run_ids:
            for step in instance.get_run_step_stats(run_id):
                print(f"  {step.step_key:<20} {step.end_time - step.start_time:7.2f} s")
        started = time.perf_counter()
        again = ingest([corpus], "bench", settings)
        print(f"second ingest (unchanged): {time.perf_counter() - started:.2f} s, runs started: {len(again.run_ids)}")
    finally:
        stop_milvus(settings.home)
        stop_postgres(settings.home)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
