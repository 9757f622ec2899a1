"""The definitions a run needs, and nothing else: the assets, their checks, the jobs, the stores resource, the
executor and the loggers of one configuration; no sensor, no schedule.

``kb-assets ingest`` (and every run the launch layer starts in process) executes its jobs from these, so it
builds neither the sensors nor the schedules (nor their closures over the settings); the code location
(``kb_assets/definitions.py``) is these merged with the sensors and schedules, so the daemon's and the UI's
runs find the same jobs.
"""

import dagster as dg

from kb_assets.defs.assets import ASSETS
from kb_assets.defs.collections import COLLECTION_ASSETS
from kb_assets.defs.document_assets import versioned
from kb_assets.defs.jobs import JOBS
from kb_assets.defs.loggers import run_file_logger
from kb_assets.defs.provenance import SOURCE_FILES
from kb_assets.defs.resources import build_resources
from kb_assets.settings import Settings


def job_definitions(settings: Settings) -> dg.Definitions:
    # the executor of every run, UI materializations of an asset selection included: in process, like
    # ingest (the multiprocess default starts a process per step, each loading the code and models again)
    return dg.Definitions(
        assets=[SOURCE_FILES, *versioned(ASSETS, settings), *COLLECTION_ASSETS],
        jobs=JOBS,
        executor=dg.in_process_executor,
        resources=build_resources(settings),
        # the console (Dagster's default) for runs from the UI and the daemon; run_file for kb-assets' own
        loggers={"console": dg.colored_console_logger, "run_file": run_file_logger},
    )
