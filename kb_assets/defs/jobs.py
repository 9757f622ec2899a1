"""Jobs: the whole graph for a batch (a range) of documents, run in-process by ``kb-assets ingest``."""

import dagster as dg

from kb_assets.defs.assets import ASSETS

ingest_documents = dg.define_asset_job(
    "ingest_documents",
    selection=dg.AssetSelection.assets(*ASSETS),
    description="Materialize every asset for a range of document partitions in one run.",
    executor_def=dg.in_process_executor,
)
