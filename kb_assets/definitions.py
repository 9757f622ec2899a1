"""The Dagster definitions of kb-assets, assembled from ``defs/`` for one configuration.

``defs`` is built when Dagster loads the code location, from the environment read once there;
``kb-assets ingest`` builds the same definitions from the settings it already has.
"""

import dagster as dg

from kb_assets.defs.assets import ASSETS, versioned
from kb_assets.defs.collections import COLLECTION_ASSETS
from kb_assets.defs.jobs import JOBS
from kb_assets.defs.loggers import run_file_logger
from kb_assets.defs.resources import build_resources
from kb_assets.defs.schedules import build_incremental_update_schedule
from kb_assets.defs.sensors import build_collection_migration_sensor, build_watched_folders_sensor
from kb_assets.settings import Settings


def make_definitions(settings: Settings) -> dg.Definitions:
    # the executor of every run, UI materializations of an asset selection included: in process, like
    # ingest (the multiprocess default starts a process per step, each loading the code and models again)
    return dg.Definitions(
        assets=[*versioned(ASSETS, settings), *COLLECTION_ASSETS],
        jobs=JOBS,
        executor=dg.in_process_executor,
        sensors=[build_watched_folders_sensor(settings), build_collection_migration_sensor(settings)],
        schedules=[build_incremental_update_schedule(settings)],
        resources=build_resources(settings),
        # the console (Dagster's default) for runs from the UI and the daemon; run_file for kb-assets' own
        loggers={"console": dg.colored_console_logger, "run_file": run_file_logger},
    )


@dg.definitions
def defs() -> dg.Definitions:
    return make_definitions(Settings.from_env())
