"""Every use of Dagster's private API (``dagster._...``) by kb-assets' Python, behind one door.

Dagster 1.13 offers no public API for what is here; each entry says what is missing. A Dagster upgrade
that moves one fails ``test_dagster_internals.py`` by name (it checks every ``dagster._`` name this file
uses), and this file is the one to change. Add a new use here, with what public API it stands for; the
Python modules that name ``dagster._`` are this one alone (a test holds it). The instance YAML files
(``dagster.yaml``, ``deploy/``) name classes too: Dagster offers no other way there.

It sits in ``defs/`` so that the assets (``defs/``) and the launch layer (``launch/``) both reach it.
"""

from __future__ import annotations

import dagster as dg

# Missing public API: a run tag that tells Dagster not to write asset events of its own, so that a step
# materializes only some partitions of its range (``MaterializeResult`` has no partition; an unyielded
# output skips the steps after it). Dagster's system tag ``dagster/defer_asset_events`` does it.
from dagster._core.events import AssetMaterializationPlannedData
from dagster._core.storage.tags import EXTERNALLY_MANAGED_ASSETS_TAG

DEFER_ASSET_EVENTS_TAG = EXTERNALLY_MANAGED_ASSETS_TAG

# Missing public API: a no-op compute log manager for an instance config written from Python (the
# ``compute_logs`` section names a module and a class; Dagster's own no-op manager is private).
NO_COMPUTE_LOGS = {"module": "dagster._core.storage.noop_compute_log_manager", "class": "NoOpComputeLogManager"}


def report_planned_materialization(
    context: dg.AssetExecutionContext, asset_key: dg.AssetKey, partition_key: str
) -> None:
    """Record that this run means to materialize a partition of an asset, as Dagster does at the start of a
    run whose asset events it writes (a partition planned and not materialized by a failed run shows
    failed). Missing public API: a constructor of the planned event (``DagsterEvent`` is public, its
    planned-materialization builder and data are not)."""
    step_key = context.get_step_execution_context().step.key
    event = dg.DagsterEvent.build_asset_materialization_planned_event(
        context.run.job_name, step_key, AssetMaterializationPlannedData(asset_key, partition=partition_key)
    )
    context.instance.report_dagster_event(event, context.run.run_id)
