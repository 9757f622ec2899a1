"""The Dagster definitions of kb-assets: assets with their checks, the ingest job, resources."""

import dagster as dg

from kb_assets.defs.assets import ASSETS
from kb_assets.defs.jobs import ingest_documents
from kb_assets.defs.resources import build_resources
from kb_assets.settings import Settings


def make_definitions(settings: Settings | None = None) -> dg.Definitions:
    return dg.Definitions(assets=ASSETS, jobs=[ingest_documents], resources=build_resources(settings))


defs = make_definitions()
