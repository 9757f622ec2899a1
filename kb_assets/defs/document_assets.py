"""What every document asset is: partitioned per document (or hash bucket), backfilled in batches of
runs, in the group ``knowledge_base``, guarded by a blocking data-quality check (``checks.py``), with its
pipeline version as its code version (``versioned``). The assets themselves: ``assets.py`` (one step a
document) and ``publish_assets.py`` (the embeddings and the collection, one step).
"""

import warnings
from collections.abc import Callable
from typing import Any

import dagster as dg

from kb_assets.defs.partitions import PartitionedAsset, documents_partitions
from kb_assets.pipeline.versions import step_versions
from kb_assets.settings import Settings

# The backfill policy is what batches many documents into one run; its beta notice is known
warnings.filterwarnings("ignore", category=dg.BetaWarning)

# A backfill launched from the UI is cut into runs of at most this many contiguous partitions (one run
# pod each on Kubernetes), as `kb-assets ingest` and the sensor cut theirs at KB_RUN_BATCH_SIZE; this
# is that setting's default (definitions are built before any setting is read).
BACKFILL_PARTITIONS_PER_RUN = Settings.run_batch_size

COMMON = PartitionedAsset(
    partitions_def=documents_partitions,
    backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=BACKFILL_PARTITIONS_PER_RUN),
    group_name="knowledge_base",
)


def document_step(
    kinds: set[str],
    check: tuple[str, str] | None = None,
    after: dg.AssetsDefinition | dg.AssetSpec | None = None,
    op_tags: dict[str, str] | None = None,
) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """The decorator of a document asset: partitioned per document, backfilled in batches, after the step
    ``after``, guarded by the blocking data-quality check ``check`` (its name and description)."""

    def decorate(body: Callable[..., Any]) -> dg.AssetsDefinition:
        specs = [dg.AssetCheckSpec(check[0], asset=body.__name__, blocking=True, description=check[1])] if check else []
        return dg.asset(
            **COMMON,
            deps=[after] if after is not None else None,
            kinds=kinds,
            check_specs=specs or None,
            op_tags=op_tags,
        )(body)

    return decorate


def document_spec(
    name: str, after: dg.AssetSpec | dg.AssetsDefinition | str, kinds: set[str], description: str
) -> dg.AssetSpec:
    """A document asset of a multi-asset step (``embed_and_publish``)."""
    return dg.AssetSpec(
        name,
        deps=[after],
        kinds=kinds,
        group_name=COMMON["group_name"],
        partitions_def=documents_partitions,
        description=description,
    )


def versioned(assets: list[dg.AssetsDefinition], settings: Settings) -> list[dg.AssetsDefinition]:
    """The document assets with their pipeline versions as code versions (``pipeline.versions.step_versions``;
    ``page_images``, off the pipeline, has none)."""
    versions = step_versions(settings)
    return [
        asset.map_asset_specs(
            lambda spec: spec.replace_attributes(
                code_version=versions.get(spec.key.to_user_string(), spec.code_version)
            )
        )
        for asset in assets
    ]
