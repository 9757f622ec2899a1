"""The run launcher of the embedded instance: Dagster's default one, except that a run is handed to the warm
ingest runner (``runner.py``) when one answers for the same settings and code, so that a run the folder
sensor, the schedule or the UI launches does not start a process that loads the code location, docling,
great-expectations and the encoder again (30.1 s for one edited file, against ~3 s warm).

``dagster.yaml`` (the one ``instance.py`` writes into a new ``DAGSTER_HOME``, and the repository root's) names
it. The daemon (or the webserver) calls ``launch_run`` with a run it created (``STARTING``); the runner answers
at once that it took the run and executes it in its process (the same run, its events in the same instance,
tagged with the runner's process like the runs it executes for ``kb-assets ingest``). When no runner answers
(none started, another one busy with an ingest, other settings), the run goes the default way (a process of
its own, from the code location's gRPC server), and a runner is started for the next one: the first launched
run after the runner's idle time (``KB_RUNNER_IDLE_SECONDS``) is a cold one.
"""

from __future__ import annotations

import logging

import dagster as dg

from kb_assets.defs.dagster_internals import RunLaunchContext
from kb_assets.launch import runner
from kb_assets.settings import Settings

log = logging.getLogger("kb_assets.run_launcher")


class WarmRunLauncher(dg.DefaultRunLauncher):
    """Launch a run in the warm ingest runner when one serves these settings, else as Dagster does."""

    def launch_run(self, context: RunLaunchContext) -> None:
        run = context.dagster_run
        settings = Settings.from_env()  # the settings of this process (the daemon's, the webserver's)
        if runner.hand_over(settings, run.run_id):
            log.info("run %s handed to the warm ingest runner", run.run_id)
            return
        super().launch_run(context)
        runner.start(settings)  # the next launched run finds one (it finds out itself whether one runs)
