"""The runs an ingest (or a migration) executes: the planned runs of the ``ingest_documents`` job.

``KB_CONCURRENT_RUNS`` (default 1) says how many run at once:

- 1: one after the other, in this process (the models load once; ``run_in_order``);
- N > 1 on an instance whose run coordinator queues runs and whose daemon is alive (a production
  ``dagster.yaml``), when every run materializes every step (the queue cannot take an asset
  selection): each range is submitted to the run queue (``dagster job launch``) and the daemon
  launches them within its concurrency limits; ingest waits for them;
- N > 1 otherwise (the embedded profile, no daemon, or runs that start at a later step): N spawned
  worker processes, each executing its runs in process (``execute``, on the definitions it builds once).

A run is described by its tags (``RunPlan.tags``): ``kb/from_step`` is the step it starts at. A run in
which a document failed fails, with exactly that document's partitions failed (``defs/document_steps.py``):
no run of its own is needed. Every run is a run of the instance, visible in ``dagster dev``. Concurrent
runs on the same documents are safe: each step of each document holds the document's lock
(``Catalog.document_lock``).
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

from kb_assets.launch.instance import PROCESS_TAG, dagster_instance, definitions
from kb_assets.lib.processes import process_token
from kb_assets.pipeline.planning import FROM_STEP_TAG, RunPlan
from kb_assets.pipeline.versions import selection
from kb_assets.settings import Settings, dagster_child_environment
from kb_assets.stores.catalog import Catalog

# step events still go to the instance (the UI shows them); the terminal shows progress lines and, with a
# log file (Settings.runs_log), nothing of Dagster's own: its events (and tracebacks) go to the file
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
DAEMON_HEARTBEAT_S = 120  # a daemon whose last heartbeat is older than this is not running
QUEUED_RUN_TIMEOUT_S = 6 * 3600  # ingest gives up waiting for a queued run after this long
Progress = Callable[[str], None]


def execute(
    job: dg.JobDefinition,
    instance: dg.DagsterInstance,
    tags: dict[str, str],
    asset_selection: tuple[str, ...] | None = None,
    run_config: dict | None = None,
    log_file: Path | None = None,
):
    """One in-process run, tagged with this process; errors are the run's (never raised here). Its events
    go to ``log_file`` (``Settings.runs_log``), else warnings and errors to the console."""
    logging = {"loggers": {"run_file": {"config": {"path": str(log_file)}}}} if log_file else QUIET_RUN_CONFIG
    return job.execute_in_process(
        instance=instance,
        raise_on_error=False,
        run_config={**logging, **(run_config or {})},
        tags={**tags, PROCESS_TAG: process_token()},
        asset_selection=[dg.AssetKey(key) for key in asset_selection] if asset_selection else None,
    )


def run_in_order(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    catalog: Catalog,
    plans: list[RunPlan],
    progress: Progress = lambda message: None,
    log_file: Path | None = None,
) -> list[str]:
    """Execute the planned runs of the document job, one after the other, in this process."""
    job = defs.resolve_job_def("ingest_documents")
    run_ids, done, total = [], 0, sum(len(p.documents) for p in plans)
    for plan in plans:
        run_ids.append(execute(job, instance, plan.tags(), selection(plan.step), log_file=log_file).run_id)
        done += len(plan.documents)
        docs = catalog.get_documents([d.document_id for d in plan.documents]).values()
        progress(
            f"documents {done}/{total} (from {plan.step}): "
            f"{sum(d.status == 'published' for d in docs)} published, {sum(d.status == 'failed' for d in docs)} failed"
        )
    return run_ids


def run_tagged(settings: Settings, tags: dict[str, str]) -> str:
    """Execute one run in this process (a worker's): the job from the step its tags name; its run id."""
    job = definitions(settings).resolve_job_def("ingest_documents")
    step = tags.get(FROM_STEP_TAG, "raw_files")
    return execute(job, dagster_instance(settings), tags, selection(step), log_file=settings.runs_log).run_id


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
    progress: Progress = lambda message: None,
) -> list[str]:
    """Execute the planned runs, ``settings.concurrent_runs`` at a time: one at a time in this process
    (``run_in_order``), or the batch runs concurrently (``execute_runs``) and then, in this process,
    the planned retries."""
    batch = [plan for plan in plans if not plan.alone]
    if settings.concurrent_runs <= 1 or len(batch) <= 1:
        return run_in_order(defs, instance, catalog, plans, progress, settings.runs_log)
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
    alone = [p for p in plans if p.alone]
    return run_ids + run_in_order(defs, instance, catalog, alone, progress, settings.runs_log)
