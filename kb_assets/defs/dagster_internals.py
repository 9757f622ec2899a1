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
from dagster._core.definitions.data_version import (
    CODE_VERSION_TAG,
    DATA_VERSION_IS_USER_PROVIDED_TAG,
    DATA_VERSION_TAG,
    DEFAULT_DATA_VERSION,
    NULL_EVENT_POINTER,
    CachingStaleStatusResolver,
    compute_logical_data_version,
    get_input_data_version_tag,
    get_input_event_pointer_tag,
)
from dagster._core.definitions.job_base import InMemoryJob
from dagster._core.events import AssetMaterializationPlannedData
from dagster._core.execution.api import execute_run
from dagster._core.launcher.base import LaunchRunContext
from dagster._core.loader import LoadingContextForTest
from dagster._core.storage.tags import EXTERNALLY_MANAGED_ASSETS_TAG

# Missing public API: a run tag that tells Dagster not to write asset events of its own, so that a step
# materializes only some partitions of its range (``MaterializeResult`` has no partition; an unyielded
# output skips the steps after it). Dagster's system tag ``dagster/defer_asset_events`` does it.
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
    report_planned(context.instance, context.run, step_key, asset_key, partition_key)


def report_planned(
    instance: dg.DagsterInstance, run: dg.DagsterRun, step_key: str, asset_key: dg.AssetKey, partition_key: str
) -> None:
    """``report_planned_materialization`` for a run other than the one executing (a refusal's: a run that
    records a document refused, created failed)."""
    event = dg.DagsterEvent.build_asset_materialization_planned_event(
        run.job_name, step_key, AssetMaterializationPlannedData(asset_key, partition=partition_key)
    )
    instance.report_dagster_event(event, run.run_id)


# Missing public API: the data provenance Dagster reads a partition's staleness from. Dagster writes it on
# the materializations it records itself (``dagster/code_version``, ``dagster/data_version`` and, per input
# asset, the data version read and a pointer to the event it was read from); the steps of
# ``ingest_documents`` record their own materializations (``DEFER_ASSET_EVENTS_TAG``) and write the same tags,
# computed as Dagster computes them (``compute_logical_data_version``). Public: ``dg.DataVersion`` only.
def provenance_tags(code_version: str, inputs: dict[dg.AssetKey, tuple[int | None, str | None]]) -> dict[str, str]:
    """The tags Dagster gives a materialization it records (``execute_step._build_data_version_tags``): the
    code version, each input's data version and event pointer (``inputs``: asset -> (storage id of the
    event read, its data version); (None, None): none yet), and the data version computed from them."""
    versions = {key: dg.DataVersion(version or DEFAULT_DATA_VERSION.value) for key, (_, version) in inputs.items()}
    tags = {CODE_VERSION_TAG: code_version}
    for key, (storage_id, _) in inputs.items():
        tags[get_input_data_version_tag(key)] = versions[key].value
        tags[get_input_event_pointer_tag(key)] = str(storage_id) if storage_id else NULL_EVENT_POINTER
    tags[DATA_VERSION_TAG] = compute_logical_data_version(code_version, versions).value
    return tags


def observed_version_tags(version: str) -> dict[str, str]:
    """The tags of an observation that reports a source's data version (``ObserveResult(data_version=...)``
    gives Dagster-run observations the same)."""
    return {DATA_VERSION_TAG: version, DATA_VERSION_IS_USER_PROVIDED_TAG: "true"}


def latest_data_versions(
    instance: dg.DagsterInstance, asset_key: dg.AssetKey, partitions: list[str], observed: bool = False
) -> dict[str, tuple[int, str | None]]:
    """Per partition, the storage id and data version of the asset's latest materialization (``observed``: of
    its latest observation, for an external asset): two queries for any number of partitions, as Dagster's
    own data-version cache reads them (``get_latest_tags_by_partition`` is the event storage's)."""
    if not partitions:
        return {}
    event_type = dg.DagsterEventType.ASSET_OBSERVATION if observed else dg.DagsterEventType.ASSET_MATERIALIZATION
    ids = instance.get_latest_storage_id_by_partition(asset_key, event_type, set(partitions))
    tags = instance.event_log_storage.get_latest_tags_by_partition(
        asset_key, event_type, [DATA_VERSION_TAG], list(partitions)
    )
    return {key: (storage_id, tags.get(key, {}).get(DATA_VERSION_TAG)) for key, storage_id in ids.items()}


def stale_status(
    instance: dg.DagsterInstance, defs: dg.Definitions, keys: list[tuple[dg.AssetKey, str]]
) -> dict[tuple[dg.AssetKey, str], tuple[str, list[str]]]:
    """What the UI shows of these partitions (``FRESH``, ``STALE`` — "Unsynced" — or ``MISSING``) and why,
    as Dagster computes it (``CachingStaleStatusResolver``, what the GraphQL ``staleStatus`` reads). Missing
    public API: a stale-status query on the instance."""
    resolver = CachingStaleStatusResolver(instance, defs.resolve_asset_graph(), LoadingContextForTest(instance))
    return {
        (key, partition): (
            resolver.get_status(key, partition).value,
            [cause.reason for cause in resolver.get_stale_causes(key, partition)],
        )
        for key, partition in keys
    }


# Missing public API: a run launcher's argument (``dg.DefaultRunLauncher`` is public, the context it is given
# is not), and executing a run that already exists (created by the daemon, a sensor or the UI) in this
# process: ``execute_job`` creates a new run; Dagster's run workers call ``execute_run`` on a reconstructed
# job, the warm ingest runner calls it on the job it holds loaded (``InMemoryJob``).
RunLaunchContext = LaunchRunContext


def execute_existing_run(job: dg.JobDefinition, run: dg.DagsterRun, instance: dg.DagsterInstance) -> bool:
    """Execute ``run`` (NOT_STARTED or STARTING) in this process, on ``job`` (loaded here, of the same
    definitions as the code location that created the run); whether it succeeded. Its events go to the
    instance, as a run worker's do."""
    return execute_run(InMemoryJob(job), run, instance).success
