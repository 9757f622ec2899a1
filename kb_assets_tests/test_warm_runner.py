"""The warm ingest runner (``launch/runner.py``): after an ingest, a process keeps what runs load, and the
next `kb-assets ingest` of the same settings and code hands its work to it (the same report, one Dagster run
in the instance); a failure there is the command's one line; other settings make it stand aside; it stops on
`services down`-style stops and after its idle time. The runner is a real process on the session's stores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace

import pytest

pytestmark = pytest.mark.slow


def cli(*args: str, idle: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kb_assets.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "KB_RUNNER_IDLE_SECONDS": str(idle)},
        timeout=600,
    )


def wait_for(condition, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the runner did not get there in time"
        time.sleep(0.2)


def test_a_second_ingest_runs_in_the_warm_runner_and_is_one_dagster_run(tmp_path, settings, catalog):
    from kb_assets.launch import runner
    from kb_assets.launch.instance import dagster_instance

    warm = replace(settings, runner_idle_seconds=60)  # the settings the commands below have
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Ferry\n\nThe ferry leaves at seven.\n")
    (folder / "b.md").write_text("# Tram\n\nThe tram stops at midnight.\n")
    try:
        first = json.loads(cli("ingest", str(folder), "--kb", "warm", "--json", idle=60).stdout)
        assert first["warmRunner"] is False and first["documents"]["new"] == 2
        wait_for(lambda: runner.socket_path(warm).exists())  # started, warmed up, listening
        pid = runner.running(warm)
        assert pid is not None

        (folder / "a.md").write_text("# Ferry\n\nThe ferry leaves at eight now.\n")
        done = cli("ingest", str(folder), "--kb", "warm", "--json", idle=60)
        second = json.loads(done.stdout)
        assert done.returncode == 0 and second["warmRunner"] is True
        assert second["documents"] == {"new": 0, "changed": 1, "unchanged": 1, "deleted": 0, "failed": 0}
        (run_id,) = second["runIds"]
        run = dagster_instance(settings).get_run_by_id(run_id)
        assert run.job_name == "ingest_documents" and run.is_success
        assert run.tags["kb/process"].startswith(f"{pid}.")  # the runner's run
        changed = [d for d in catalog.list_documents(["warm"]) if d.source_path.endswith("a.md")]
        assert changed[0].status == "published" and changed[0].last_run_id == run_id

        missing = cli("ingest", str(tmp_path / "no-such-folder"), "--kb", "warm", idle=60)
        assert missing.returncode == 1 and "Traceback" not in missing.stderr
        assert [line for line in missing.stderr.splitlines() if line.startswith("Error:")]
        assert runner.running(warm) == pid  # a failed ingest leaves it serving

        other = cli("ingest", str(folder), "--kb", "warm", "--json", idle=61)  # other settings: it stands aside
        assert json.loads(other.stdout)["warmRunner"] is False
        wait_for(lambda: runner.running(warm) != pid, timeout_s=60)
    finally:
        for idle in (60, 61):
            runner.stop(replace(settings, runner_idle_seconds=idle))


def test_a_runner_exits_after_its_idle_time(tmp_path, settings):
    from kb_assets.launch import runner

    short = replace(settings, runner_idle_seconds=3)
    (tmp_path / "c.md").write_text("# Bus\n\nThe bus is late.\n")
    try:
        assert cli("ingest", str(tmp_path), "--kb", "warm-idle", idle=3).returncode == 0
        wait_for(lambda: runner.running(short) is not None)
        wait_for(lambda: runner.running(short) is None)  # warmed up, waited 3 s for nothing, gone
        assert not runner.socket_path(short).exists()
    finally:
        runner.stop(short)


def test_a_run_the_folder_sensor_launches_is_executed_by_the_warm_runner(tmp_path, settings, catalog):
    """The sensor's run request, under a real ``dagster-daemon`` (queue, run launcher), is handed to the warm
    runner an ingest started (settings alike but for KB_WATCH, which only the sensor reads): the run is the
    runner's (its process tag), succeeds, and publishes the edited file; no run process of its own."""
    import dagster as dg

    from kb_assets.launch import runner
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.settings import dagster_child_environment
    from kb_assets_tests.test_migration_daemon import REPO_ROOT, stop

    warm = replace(settings, runner_idle_seconds=120)
    folder = tmp_path / "watched"
    folder.mkdir()
    note = folder / "kiln.md"
    note.write_text("# Kiln\n\nThe kiln is fired on Mondays.\n")
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(
        f"load_from:\n  - python_module:\n      module_name: kb_assets.definitions\n"
        f"      working_directory: {REPO_ROOT}\n"
    )
    env = {
        **dagster_child_environment(settings),
        "KB_RUNNER_IDLE_SECONDS": "120",
        "KB_WATCH": f"warm-launch={folder}",
        "KB_WATCH_INTERVAL_SECONDS": "5",
        "PYTHONPATH": str(REPO_ROOT),
        "DAGSTER_DISABLE_TELEMETRY": "1",
    }
    log = (tmp_path / "daemon.log").open("w")
    daemon = None
    instance = dagster_instance(settings)
    try:
        assert cli("ingest", str(folder), "--kb", "warm-launch", idle=120).returncode == 0
        wait_for(lambda: runner.socket_path(warm).exists())
        pid = runner.running(warm)
        daemon = subprocess.Popen(
            [
                os.path.join(os.path.dirname(sys.executable), "dagster-daemon"),
                "run",
                "-w",
                str(workspace),
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        note.write_text("# Kiln\n\nThe kiln is fired on Tuesdays now.\n")
        doc = next(d for d in catalog.list_documents(["warm-launch"]) if d.source_path == "kiln.md")
        launched: list[dg.DagsterRun] = []

        def published() -> bool:
            runs = instance.get_runs(dg.RunsFilter(tags={"dagster/sensor_name": "watched_folders_sensor"}))
            launched[:] = [r for r in runs if r.tags.get("dagster/asset_partition_range_start") == doc.partition_key]
            return bool(launched) and launched[0].is_finished

        wait_for(published, timeout_s=300)
        run = launched[0]
        assert run.is_success, (tmp_path / "daemon.log").read_text()[-3000:]
        assert run.tags["kb/process"].startswith(f"{pid}.")  # the runner executed it
        assert catalog.get_document(doc.document_id).last_run_id == run.run_id
        assert runner.running(warm) == pid  # the same runner, still serving
    finally:
        if daemon is not None:
            stop(daemon)
        log.close()
        instance.wipe_daemon_heartbeats()  # no later ingest takes the stopped daemon for a live one
        runner.stop(warm)
