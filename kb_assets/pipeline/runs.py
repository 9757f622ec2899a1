"""The runs an ingest (or a migration) executes: the planned runs of the ``ingest_documents`` job.

``KB_CONCURRENT_RUNS`` (default 1) says how many run at once:

- 1: one after the other, in this process (the models load once; ``launch.run_plans``);
- N > 1 on an instance whose run coordinator queues runs and whose daemon is alive (a production
  ``dagster.yaml``), when every run materializes every step (the queue cannot take an asset
  selection): each range is submitted to the run queue (``dagster job launch``) and the daemon
  launches them within its concurrency limits; ingest waits for them;
- N > 1 otherwise (the embedded profile, no daemon, or runs that start at a later step): N spawned
  worker processes, each executing its runs in process (``launch.execute``, on a job it builds once).

A run is described by its tags (``RunPlan.tags``): ``kb/from_step`` is the step it starts at. A run in
which a document failed fails, with exactly that document's partitions failed (``defs/document_steps.py``).
Every run is a run of the instance, visible in ``dagster dev``. Concurrent runs on the same documents
are safe: each step of each document holds the document's lock (``Catalog.document_lock``).
"""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import dagster as dg

from kb_assets.defs import launch
from kb_assets.defs.launch import QUIET_RUN_CONFIG, dagster_instance  # noqa: F401  (one of each: launch's)
from kb_assets.pipeline.planning import RunPlan
from kb_assets.settings import Settings, dagster_child_environment
from kb_assets.stores.catalog import Catalog

DAEMON_HEARTBEAT_S = 120  # a daemon whose last heartbeat is older than this is not running
QUEUED_RUN_TIMEOUT_S = 6 * 3600  # ingest gives up waiting for a queued run after this long
FROM_STEP_TAG = "kb/from_step"

JOBS: dict[Settings, dg.JobDefinition] = {}


def ingest_job(settings: Settings) -> dg.JobDefinition:
    """The ``ingest_documents`` job of these settings (built once per process)."""
    if settings not in JOBS:
        from kb_assets.definitions import make_definitions  # loads every asset: import on use

        JOBS[settings] = make_definitions(settings).resolve_job_def("ingest_documents")
    return JOBS[settings]


def run_tagged(settings: Settings, tags: dict[str, str]) -> str:
    """Execute one run in this process (a worker's): the job from the step its tags name; its run id."""
    return launch.execute(
        ingest_job(settings), dagster_instance(settings), tags, launch.selection(tags.get(FROM_STEP_TAG, "raw_files"))
    ).run_id


def has_live_daemon(instance: dg.DagsterInstance) -> bool:
    """The instance queues runs (QueuedRunCoordinator) and a daemon heartbeat is recent."""
    if type(instance.run_coordinator).__name__ != "QueuedRunCoordinator":
        return False
    now = time.time()
    return any(now - beat.timestamp < DAEMON_HEARTBEAT_S for beat in instance.get_daemon_heartbeats().values())


def execute_runs(ranges: list[dict[str, str]], settings: Settings, done: Callable[[str], None]) -> list[str]:
    """Execute one run per range (its tags; ``kb/from_step``: where it starts, else every step),
    ``settings.concurrent_runs`` at a time; ``done(run_id)`` after each. Returns the run ids in the
    order of ``ranges``."""
    workers = min(settings.concurrent_runs, len(ranges))
    if workers <= 1:
        run_ids = []
        for tags in ranges:
            run_ids.append(run_tagged(settings, tags))
            done(run_ids[-1])
        return run_ids
    instance = dagster_instance(settings)
    if has_live_daemon(instance) and all(tags.get(FROM_STEP_TAG, "raw_files") == "raw_files" for tags in ranges):
        return submit_to_queue(ranges, settings, instance, done)
    by_future = {}
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for n, tags in enumerate(ranges):
            by_future[pool.submit(run_tagged, settings, tags)] = n
        run_ids = [""] * len(ranges)
        for future in as_completed(by_future):
            run_ids[by_future[future]] = future.result()
            done(run_ids[by_future[future]])
    return run_ids


def submit_to_queue(
    ranges: list[dict[str, str]], settings: Settings, instance: dg.DagsterInstance, done: Callable[[str], None]
) -> list[str]:
    """Submit each range to the instance's run queue (the daemon launches them) and wait for all."""
    dagster = Path(sys.executable).with_name("dagster")
    pending = []
    for tags in ranges:
        run_id = str(uuid.uuid4())
        subprocess.run(
            [
                str(dagster),
                "job",
                "launch",
                "-m",
                "kb_assets.definitions",
                "-a",
                "defs",
                "-j",
                "ingest_documents",
                "--tags",
                json.dumps(tags),
                "--run-id",
                run_id,
            ],
            check=True,
            capture_output=True,
            text=True,
            env=dagster_child_environment(settings),
        )
        pending.append(run_id)
    ordered = list(pending)
    deadline = time.monotonic() + QUEUED_RUN_TIMEOUT_S
    while pending and time.monotonic() < deadline:
        for run_id in list(pending):
            run = instance.get_run_by_id(run_id)
            if run is not None and run.is_finished:
                pending.remove(run_id)
                done(run_id)
        if pending:
            time.sleep(1.0)
    return ordered


def run_plans(
    settings: Settings,
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    catalog: Catalog,
    plans: list[RunPlan],
    progress: Callable[[str], None] = lambda message: None,
) -> list[str]:
    """Execute the planned runs, ``settings.concurrent_runs`` at a time: one at a time in this process
    (``launch.run_plans``), or the batch runs concurrently (``execute_runs``) and then, in this process,
    the planned retries."""
    batch = [plan for plan in plans if not plan.alone]
    if settings.concurrent_runs <= 1 or len(batch) <= 1:
        return launch.run_plans(defs, instance, catalog, plans, progress)
    total = sum(len(p.documents) for p in batch)
    finished: list[str] = []

    def done(run_id: str) -> None:
        finished.append(run_id)
        docs = catalog.documents_of_run(run_id)
        progress(
            f"runs {len(finished)}/{len(batch)} ({total} documents): "
            f"last run {sum(d.status == 'published' for d in docs)} "
            f"published, {sum(d.status == 'failed' for d in docs)} failed"
        )

    run_ids = execute_runs([plan.tags() for plan in batch], settings, done)
    return run_ids + launch.run_plans(defs, instance, catalog, [p for p in plans if p.alone], progress)
