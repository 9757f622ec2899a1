"""Runs of the ``ingest_documents`` job over ranges of partitions, as ``kb-assets ingest`` launches them.

``KB_CONCURRENT_RUNS`` (default 1) says how many run at once:

- 1: one after the other, in this process (the models load once);
- N > 1 on an instance whose run coordinator queues runs and whose daemon is alive (a production
  ``dagster.yaml``): each range is submitted to the run queue (``dagster job launch``) and the daemon
  launches them within its concurrency limits; ingest waits for them;
- N > 1 otherwise (the embedded profile, no daemon): N worker processes, each executing its ranges
  in process, one after the other (each worker loads the models once).

Every run is a run of the instance, visible in ``dagster dev``. Concurrent runs on the same
documents are safe: each step of each document holds the document's lock (``Catalog.document_lock``).
"""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import time
import uuid
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Callable

import dagster as dg

from kb_assets.settings import Settings, dagster_child_environment

# step events still go to the instance (the UI shows them); the terminal shows progress lines
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
DAEMON_HEARTBEAT_S = 120          # a daemon whose last heartbeat is older than this is not running
QUEUED_RUN_TIMEOUT_S = 6 * 3600   # ingest gives up waiting for a queued run after this long

_JOBS: dict[Settings, object] = {}


def ingest_job(settings: Settings):
    """The ``ingest_documents`` job of these settings (built once per process)."""
    if settings not in _JOBS:
        from kb_assets.definitions import make_definitions  # loads every asset: import on use

        _JOBS[settings] = make_definitions(settings).resolve_job_def("ingest_documents")
    return _JOBS[settings]


def dagster_instance(settings: Settings) -> dg.DagsterInstance:
    """The instance at ``settings.dagster_home``, shared with ``dagster dev`` (SQLite unless its
    dagster.yaml says otherwise)."""
    home = settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text("telemetry:\n  enabled: false\n")
    return dg.DagsterInstance.from_config(str(home))


def run_in_process(settings: Settings, tags: dict[str, str]) -> str:
    """Execute one run of the job in this process; its run id (failures are recorded per document)."""
    result = ingest_job(settings).execute_in_process(instance=dagster_instance(settings), raise_on_error=False,
                                                     run_config=QUIET_RUN_CONFIG, tags=tags)
    return result.run_id


def has_live_daemon(instance: dg.DagsterInstance) -> bool:
    """The instance queues runs (QueuedRunCoordinator) and a daemon heartbeat is recent."""
    if type(instance.run_coordinator).__name__ != "QueuedRunCoordinator":
        return False
    now = time.time()
    return any(now - beat.timestamp < DAEMON_HEARTBEAT_S for beat in instance.get_daemon_heartbeats().values())


def execute_runs(ranges: list[dict[str, str]], settings: Settings, done: Callable[[str], None]) -> list[str]:
    """Execute one run per range (its tags), ``settings.concurrent_runs`` at a time; ``done(run_id)``
    after each. Returns the run ids in completion order."""
    instance = dagster_instance(settings)
    workers = min(settings.concurrent_runs, len(ranges))
    run_ids: list[str] = []
    if workers <= 1:
        for tags in ranges:
            run_ids.append(run_in_process(settings, tags))
            done(run_ids[-1])
    elif has_live_daemon(instance):
        run_ids = submit_to_queue(ranges, settings, instance, done)
    else:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            for future in as_completed([pool.submit(run_in_process, settings, tags) for tags in ranges]):
                run_ids.append(future.result())
                done(run_ids[-1])
    return run_ids


def submit_to_queue(ranges: list[dict[str, str]], settings: Settings, instance: dg.DagsterInstance,
                    done: Callable[[str], None]) -> list[str]:
    """Submit each range to the instance's run queue (the daemon launches them) and wait for all."""
    dagster = Path(sys.executable).with_name("dagster")
    pending = []
    for tags in ranges:
        run_id = str(uuid.uuid4())
        subprocess.run([str(dagster), "job", "launch", "-m", "kb_assets.definitions", "-a", "defs",
                        "-j", "ingest_documents", "--tags", json.dumps(tags), "--run-id", run_id],
                       check=True, capture_output=True, text=True, env=dagster_child_environment(settings))
        pending.append(run_id)
    finished: list[str] = []
    deadline = time.monotonic() + QUEUED_RUN_TIMEOUT_S
    while pending and time.monotonic() < deadline:
        for run_id in list(pending):
            run = instance.get_run_by_id(run_id)
            if run is not None and run.is_finished:
                pending.remove(run_id)
                finished.append(run_id)
                done(run_id)
        if pending:
            time.sleep(1.0)
    return finished + pending
