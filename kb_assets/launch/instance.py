"""The Dagster instance the command line shares with ``dagster dev``, the job definitions of one
configuration, and the runs a killed process left behind.

Every run the launch layer starts carries the launching process's token (``kb/process``): the next
command marks runs that a killed process left ``STARTED`` as failed (``fail_abandoned_runs``; runs the
daemon launched are its run monitoring's).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import dagster as dg

from kb_assets.defs.dagster_internals import NO_COMPUTE_LOGS
from kb_assets.defs.job_definitions import job_definitions
from kb_assets.lib.processes import orphaned_followers, process_alive, reap
from kb_assets.settings import Settings

PROCESS_TAG = "kb/process"
# the instance config kb-assets writes into a new DAGSTER_HOME: no telemetry; no compute-log capture,
# which starts a `tail -F` (and a watcher process) per run and left tails behind when a run was killed
# (steps log through Dagster's events, which the UI and the run log show); launched runs (sensor, schedule,
# UI) go to the warm ingest runner when one is up (run_launcher.py), dequeued every second, not every 5
EARLIER_CONFIG = f"""telemetry:
  enabled: false
compute_logs:
  module: {NO_COMPUTE_LOGS["module"]}
  class: {NO_COMPUTE_LOGS["class"]}
"""
INSTANCE_CONFIG = (
    EARLIER_CONFIG
    + """run_launcher:
  module: kb_assets.launch.run_launcher
  class: WarmRunLauncher
run_queue:
  dequeue_interval_seconds: 1
"""
)
EARLIER_CONFIGS = ("telemetry:\n  enabled: false\n", EARLIER_CONFIG)  # what earlier versions wrote: brought up to date


def dagster_instance(settings: Settings) -> dg.DagsterInstance:
    """The instance at ``settings.dagster_home``, shared with ``dagster dev`` (SQLite unless its
    dagster.yaml says otherwise)."""
    home = settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists() or config.read_text() in EARLIER_CONFIGS:
        config.write_text(INSTANCE_CONFIG)
    return dg.DagsterInstance.from_config(str(home))


@lru_cache(maxsize=8)
def definitions(settings: Settings) -> dg.Definitions:
    """What runs of these settings need (``job_definitions``: no sensor, no schedule), built once per
    process (they load every asset)."""
    return job_definitions(settings)


def reap_log_followers(instance: dg.DagsterInstance) -> list[int]:
    """Kill the ``tail -F`` processes that killed runs of this instance left following its compute logs
    (an instance that captures them; kb-assets' own does not, ``INSTANCE_CONFIG``); their pids."""
    return reap(orphaned_followers(Path(instance.root_directory)))


def fail_abandoned_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark failed the runs that a process of this host started and that are still STARTED (or STARTING)
    although that process is gone (killed: no handler ran); returns their run ids."""
    failed = []
    for run in instance.get_runs(
        filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING])
    ):
        token = run.tags.get(PROCESS_TAG)
        if token and process_alive(token) is False:
            instance.report_run_failed(
                run,
                message=f"the process that ran this run ({token}) is gone (killed?); "
                "marked failed by the next kb-assets command",
            )
            failed.append(run.run_id)
    return failed
