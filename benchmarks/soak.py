"""The long soak of issue 9: 4 clients send searches, page and lineage requests to a real server on
127.0.0.1 for 5 minutes or 2,000 requests while ingests add, change and delete documents and the
Milvus Lite server is killed once; prints the request count, the error count and the p95 latency,
and whether ``verify`` is consistent at the end. Runs under a fresh temporary KB_HOME (its embedded
services are stopped at the end).

    .venv/bin/python benchmarks/soak.py [--seconds 300] [--requests 2000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--kill-at", type=float, default=60, help="seconds in when the Milvus Lite server is killed")
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
        )
        print(report.summary())
        print(f"requests {report.requests}  errors {len(report.errors)}  p95 {report.p95_ms():.0f} ms")
        for error in report.errors[:10]:
            print("  error:", error)
        return 0 if not report.errors and (report.verify or {}).get("consistent") else 1
    finally:
        stop_milvus(home)
        stop_postgres(home)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
