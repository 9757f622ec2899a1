"""The Dagster definitions of kb-assets: assets with their checks, the ingest job, the watched-folder
sensor and schedule, resources."""

import dagster as dg

from kb_assets.defs.assets import ASSETS
from kb_assets.defs.jobs import ingest_documents
from kb_assets.defs.resources import build_resources
from kb_assets.defs.schedules import incremental_update_schedule
from kb_assets.defs.sensors import watched_folders_sensor
from kb_assets.settings import Settings


def make_definitions(settings: Settings | None = None) -> dg.Definitions:
    return dg.Definitions(assets=ASSETS, jobs=[ingest_documents], sensors=[watched_folders_sensor],
                          schedules=[incremental_update_schedule], resources=build_resources(settings))


defs = make_definitions()
