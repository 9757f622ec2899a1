"""A spec change starts the migration by itself under a real ``dagster-daemon``: the daemon, started with
``KB_EMBEDDING_MODEL=all-MiniLM-L6-v2@256``, ticks ``collection_migration_sensor`` (running by default),
launches the backfill runs and then the ``publish_collection`` run in run subprocesses (the default run
launcher), and the alias moves to the 256-d collection with no other command. The alias is rolled back
afterwards (the rest of the session searches the default spec)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from kb_assets.retrieval.search import SearchRequest
from kb_assets.stores.vectors import published_collection
from kb_assets_tests.converge import converge

pytestmark = pytest.mark.slow

SPEC = "all-MiniLM-L6-v2@256"
SENSOR = "collection_migration_sensor"
WAIT_S = 8 * 60
REPO_ROOT = Path(__file__).resolve().parents[1]


def stop(process: subprocess.Popen) -> None:
    """Stop the daemon and everything it started (its code server, run workers): its process group."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # stragglers of the group (run workers)
    except ProcessLookupError:
        pass
    process.wait()


def stop_log_tails(folder: Path) -> None:
    """Dagster's compute-log capture of the daemon's runs starts ``tail -F`` on files under ``folder`` in
    sessions of their own, which outlive the daemon's process group: stop them too."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"tail") and any(str(folder).encode() in arg for arg in argv):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_the_daemon_migrates_a_changed_spec_by_itself(settings, catalog, milvus_client, tmp_path):
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.pipeline.migration import rollback
    from kb_assets.service.api import make_searcher
    from kb_assets.settings import dagster_child_environment

    folder = tmp_path / "daemon-notes"
    folder.mkdir()
    (folder / "bikes.md").write_text(
        "# Bicycles\n\nBicycles are stored in the locked cage behind the north loading dock.\n"
    )
    (folder / "badges.md").write_text(
        "# Badges\n\nLost badges are replaced by the security office on the ground floor.\n"
    )
    assert not ingest([folder], "daemon-notes", settings).failures
    before = published_collection(milvus_client, catalog, settings.alias)
    assert {c.name: c.model for c in catalog.collections()}[before] != SPEC
    instance = dagster_instance(settings)  # the session's: it knows every document's partition
    started = datetime.now(UTC)

    (tmp_path / "workspace.yaml").write_text(
        f"load_from:\n  - python_module:\n      module_name: kb_assets.definitions\n"
        f"      working_directory: {REPO_ROOT}\n"
    )
    env = {
        **dagster_child_environment(settings),
        "KB_EMBEDDING_MODEL": SPEC,
        "KB_WATCH_INTERVAL_SECONDS": "5",
        "PYTHONPATH": str(REPO_ROOT),
        "DAGSTER_DISABLE_TELEMETRY": "1",
    }
    log = (tmp_path / "daemon.log").open("w")
    daemon = subprocess.Popen(
        [str(Path(sys.executable).with_name("dagster-daemon")), "run", "-w", str(tmp_path / "workspace.yaml")],
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    published = before
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and daemon.poll() is None:
            published = published_collection(milvus_client, catalog, settings.alias)
            if published != before:
                break
            time.sleep(3)
        models = {c.name: c.model for c in catalog.collections()}
        assert models.get(published) == SPEC, (published, (tmp_path / "daemon.log").read_text()[-4000:])

        runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/sensor_name": SENSOR}, created_after=started))
        backfills = [run for run in runs if run.job_name == "ingest_documents"]
        publishes = [run for run in runs if run.job_name == "publish_collection"]
        assert backfills and publishes, [(run.job_name, run.status) for run in runs]
        for _ in range(20):  # the alias swap precedes the end of the publish run
            if all(instance.get_run_by_id(run.run_id).is_finished for run in runs):
                break
            time.sleep(1)
        runs = [instance.get_run_by_id(run.run_id) for run in runs]
        assert all(run.status == dg.DagsterRunStatus.SUCCESS for run in runs), [(r.job_name, r.status) for r in runs]
        assert all(run.tags["kb/migration"] == SPEC for run in runs)
        assert all(run.tags["kb/store_change"] == "migration" for run in runs if run.job_name == "publish_collection")

        answer = make_searcher(replace(settings, embedding_model=SPEC)).search(
            SearchRequest("Where are bicycles stored?", ["daemon-notes"], limit=1)
        )
        assert "locked cage" in answer.results[0]["content"]
    finally:
        stop(daemon)
        stop_log_tails(settings.dagster_home)
        log.close()
        instance.wipe_daemon_heartbeats()  # no later ingest takes the stopped daemon for a live one
        if published_collection(milvus_client, catalog, settings.alias) != before:
            rollback(catalog, milvus_client, settings.alias)
            converge(settings)  # every backfilled document re-encodes from the lake for the published spec
    assert published_collection(milvus_client, catalog, settings.alias) == before
