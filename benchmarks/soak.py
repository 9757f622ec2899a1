"""The long soak: 4 clients send searches, page, lineage and readiness requests to a real server on
127.0.0.1 for 10 minutes while ingests add, change and delete documents; the Milvus Lite server is
killed, Postgres is stopped for a while, and an ingest is killed with kill -9 while it parses. Prints the
requests, errors (any 5xx but a 503 with Retry-After while a store is down, a dropped connection, a wrong
answer), lost documents (a file present at the end that is not published), leftover processes of the
killed ingest, p95 latency and whether ``verify`` is consistent at the end. Runs under a fresh temporary
KB_HOME (its embedded services are stopped at the end); exit 1 on any error, loss or leftover.

    .venv/bin/python benchmarks/soak.py [--seconds 600] [--requests 20000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--kill-at", type=float, default=60, help="seconds in when the Milvus Lite server is killed")
    parser.add_argument("--postgres-at", type=float, default=200, help="seconds in when Postgres is stopped")
    parser.add_argument("--postgres-down", type=float, default=15, help="how long Postgres stays down")
    parser.add_argument("--kill-ingest-at", type=float, default=350, help="seconds in when an ingest is killed")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="kb-soak-"))
    home.chmod(0o755)
    os.environ.update(KB_HOME=str(home), DAGSTER_HOME=str(home / "dagster"), DAGSTER_DISABLE_TELEMETRY="1")
    for name in ("KB_POSTGRES_URL", "KB_MILVUS_URI", "KB_OBJECT_STORE_URL", "KB_LAKE_URL", "KB_API_KEYS"):
        os.environ.pop(name, None)
    from kb_assets.lib.machine import use_offline_model_libraries
    from kb_assets.services import stop_milvus, stop_postgres
    from kb_assets.settings import Settings
    from kb_assets_tests.soak import run_soak

    use_offline_model_libraries()
    try:
        report = run_soak(
            Settings.from_env(),
            home,
            duration_s=args.seconds,
            max_requests=args.requests,
            kill_milvus_at_s=args.kill_at,
            stop_postgres_at_s=args.postgres_at,
            postgres_down_s=args.postgres_down,
            kill_ingest_at_s=args.kill_ingest_at,
        )
        print(report.summary())
        print(
            f"requests {report.requests}  errors {len(report.errors)}  503-with-Retry-After {report.unavailable}  "
            f"lost documents {len(report.lost_documents)}  leftover processes {len(report.leftover_processes)}  "
            f"p95 {report.p95_ms():.0f} ms"
        )
        for error in report.errors[:10]:
            print("  error:", error)
        for lost in report.lost_documents[:10]:
            print("  lost:", lost)
        for process in report.leftover_processes:
            print("  leftover:", process)
        clean = not report.errors and not report.lost_documents and not report.leftover_processes
        return 0 if clean and (report.verify or {}).get("consistent") else 1
    finally:
        stop_milvus(home)
        stop_postgres(home)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
