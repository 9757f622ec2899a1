"""Ingest against stores that go away, and against itself: a Postgres restart is waited out, a store that
stays down is one clear line (and a JSON error), and a second identical ingest waits for the first and
does none of its work again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

pytestmark = pytest.mark.slow


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kb_assets.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


@pytest.mark.parametrize(
    "env, kind",
    [
        ({"KB_POSTGRES_URL": "postgresql://kb:kb@127.0.0.1:9/kb"}, "postgres_unavailable"),
        ({"KB_MILVUS_URI": "http://127.0.0.1:9"}, "milvus_unavailable"),
    ],
)
def test_a_store_that_stays_down_is_one_line_and_a_json_error(tmp_path, env, kind):
    (tmp_path / "a.md").write_text("# A\n\nThe canteen opens at noon.\n")

    plain = cli("ingest", str(tmp_path), "--kb", "outage", env=env)
    as_json = cli("ingest", str(tmp_path), "--kb", "outage", "--json", env=env)

    assert plain.returncode == 3 and "Traceback" not in plain.stderr
    (line,) = [line for line in plain.stderr.splitlines() if line.startswith("Error:")]
    assert "unreachable" in line and ("kb-assets services up" in line)
    assert as_json.returncode == 3 and json.loads(as_json.stdout)["error"]["kind"] == kind
    assert "Traceback" not in as_json.stderr
    debug = cli("--debug", "ingest", str(tmp_path), "--kb", "outage", env=env)
    assert "Traceback" in debug.stderr  # the traceback, when asked for


def test_an_ingest_waits_out_a_postgres_restart(tmp_path, kb_home, settings, catalog):
    from kb_assets.launch.ingest import ingest
    from kb_assets.services import ensure_postgres, stop_postgres

    (tmp_path / "a.md").write_text("# A\n\nThe night bus leaves at half past one.\n")
    dsn = catalog.dsn
    stop_postgres(kb_home)
    restart = threading.Timer(1.5, lambda: ensure_postgres(kb_home, "wheel"))
    restart.start()
    try:
        report = ingest([tmp_path], "outage-restart", settings)
    finally:
        restart.join()
    assert catalog.dsn == dsn
    assert report.as_json()["documents"]["new"] == 1 and report.failures == []


def test_a_second_identical_ingest_waits_for_the_first_and_skips_what_it_finished(tmp_path, catalog):
    for i in range(4):
        (tmp_path / f"n{i}.md").write_text(f"# Note {i}\n\nLocker {i} belongs to the night shift.\n")
    command = [sys.executable, "-m", "kb_assets.cli", "ingest", str(tmp_path), "--kb", "twice-waits", "--json"]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    time.sleep(0.5)
    second = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    reports = [json.loads(child.communicate(timeout=600)[0]) for child in (first, second)]

    worked = [r for r in reports if r["runIds"]]
    assert len(worked) == 1 and worked[0]["documents"]["new"] == 4  # one of them did the work ...
    (idle,) = [r for r in reports if not r["runIds"]]
    assert idle["documents"] == {"new": 0, "changed": 0, "unchanged": 4, "deleted": 0, "failed": 0}  # ... once
    assert all(d.status == "published" for d in catalog.list_documents(["twice-waits"]))


def test_a_postgres_that_is_shutting_down_is_the_same_one_line_error(tmp_path, kb_home):
    """A server told to stop while a client still holds a connection refuses new ones ("the database system
    is shutting down"): the ingest says so in one line, exit 3, and a JSON error."""
    import signal

    import psycopg2

    from kb_assets.services import ensure_postgres, postgres_status, stop_postgres

    other = kb_home / "shutting-down"
    dsn = ensure_postgres(other, "wheel")
    holder = psycopg2.connect(dsn)  # a smart shutdown waits for it
    try:
        os.kill(postgres_status(other)["pid"], signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until it refuses new connections
            try:
                psycopg2.connect(dsn, connect_timeout=5).close()
                time.sleep(0.2)
            except psycopg2.OperationalError as error:
                assert "shutting down" in str(error)
                break
        (tmp_path / "a.md").write_text("# A\n\nThe depot closes at ten.\n")

        plain = cli("ingest", str(tmp_path), "--kb", "outage", env={"KB_POSTGRES_URL": dsn})
        as_json = cli("ingest", str(tmp_path), "--kb", "outage", "--json", env={"KB_POSTGRES_URL": dsn})
    finally:
        holder.close()
        stop_postgres(other)

    assert plain.returncode == 3 and "Traceback" not in plain.stderr
    (line,) = [line for line in plain.stderr.splitlines() if line.strip()]
    assert line.startswith("Error: Postgres is shutting down (") and "KB_POSTGRES_URL" in line
    assert as_json.returncode == 3 and json.loads(as_json.stdout)["error"]["kind"] == "postgres_unavailable"
