"""The Dagster definitions of kb-assets, assembled from ``defs/`` for one configuration.

``defs`` is built when Dagster loads the code location, from the environment read once there: what runs
need (``defs/job_definitions.py``: assets, checks, jobs, the stores resource) and the sensors and the
schedule that keep the knowledge base current. ``kb-assets ingest`` runs the same jobs from
``job_definitions`` alone.
"""

import dagster as dg

from kb_assets.defs.job_definitions import job_definitions
from kb_assets.defs.schedules import build_incremental_update_schedule
from kb_assets.defs.sensors import build_collection_migration_sensor, build_watched_folders_sensor
from kb_assets.settings import Settings


def make_definitions(settings: Settings) -> dg.Definitions:
    return dg.Definitions.merge(
        job_definitions(settings),
        dg.Definitions(
            sensors=[build_watched_folders_sensor(settings), build_collection_migration_sensor(settings)],
            schedules=[build_incremental_update_schedule(settings)],
        ),
    )


@dg.definitions
def defs() -> dg.Definitions:
    return make_definitions(Settings.from_env())
