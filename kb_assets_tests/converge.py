"""Bring shared test stores back to current after a test that changed the embedding spec and rolled back."""

from __future__ import annotations


def converge(settings) -> list[str]:
    """Re-materialize every published document that is stale (e.g. after a migration test rolled the alias
    back: the lake holds the other spec's vectors), from its first stale step, as a sensor tick would; the
    run ids. Tests that change shared stores call it so the rest of the session starts from current stores."""
    from kb_assets.definitions import make_definitions
    from kb_assets.defs.partitions import documents_partitions
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.launch.runs import run_in_order
    from kb_assets.pipeline.planning import plan_runs, stale_documents
    from kb_assets.pipeline.versions import step_versions
    from kb_assets.stores import Stores

    catalog = Stores(settings).catalog
    docs = [d for d in catalog.list_documents() if d.status == "published"]
    stale = stale_documents(
        docs, step_versions(settings), {c.name: c.model for c in catalog.collections()}, migrating=False
    )
    instance = dagster_instance(settings)
    plans = plan_runs(
        docs,
        stale,
        instance.get_dynamic_partitions(documents_partitions.name),
        settings.run_batch_size,
        retry_failed=False,
    )
    return run_in_order(make_definitions(settings), instance, catalog, plans)
