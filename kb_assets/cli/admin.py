"""Commands that look after the stores: collections and rollback, migrate, verify and repair, services."""

from __future__ import annotations

import sys

import click

from kb_assets.cli.common import emit, pass_settings, stores_of
from kb_assets.lib.json_types import JsonObject
from kb_assets.retrieval.strategies import DEFAULT_STRATEGY
from kb_assets.settings import Settings

STRATEGY_HELP = f"Default: KB_SEARCH_STRATEGY, else {DEFAULT_STRATEGY}."


@click.command()
@click.argument("action", required=False, type=click.Choice(["rollback"]))
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def collections(settings: Settings, action: str | None, as_json: bool) -> None:
    """Collection versions (name, model, dimension, state, count, published); `rollback` re-publishes
    the previous version."""
    from kb_assets.stores.entities import count_entities
    from kb_assets.stores.vectors import engine, published_collection, size_note

    stores = stores_of(settings)
    client = stores.milvus
    if action == "rollback":
        from kb_assets.pipeline.migration import rollback

        try:
            rolled = rollback(stores.catalog, client, settings.alias)
        except LookupError as error:
            raise click.ClickException(str(error)) from None
        if not as_json:
            click.echo(f"alias {settings.alias}: {rolled.previous} -> {rolled.published}")
    current = published_collection(client, stores.catalog, settings.alias)
    runs_on = engine(client)
    published_count = count_entities(client, current) if current else 0
    data = {
        "alias": settings.alias,
        "engine": runs_on.name,
        "engineMeasuredChunks": runs_on.measured_chunks,
        "sizeNote": size_note(runs_on, published_count or 0),
        "published": current,
        "collections": [
            {
                "name": c.name,
                "model": c.model,
                "dimension": c.dimension,
                "languages": c.languages,
                "state": c.state,
                "count": c.entity_count,
                "published": c.name == current,
            }
            for c in stores.catalog.collections()
        ],
    }

    def render(d: JsonObject) -> None:
        click.echo(f"{d['engine']}: {d['published'] or 'nothing'} published as {d['alias']}")
        if d["sizeNote"]:
            click.echo(f"note: {d['sizeNote']}")
        for c in d["collections"]:
            mark = "*" if c["published"] else " "
            click.echo(f"{mark} {c['name']}  {c['model']} d{c['dimension']}  {c['state']}  {c['count']} entities")

    emit(data, as_json, render)


@click.command()
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def migrate(settings: Settings, as_json: bool) -> None:
    """Build, validate and publish the collection of the configured embedding spec (KB_EMBEDDING_MODEL):
    the backfill runs and the publish_collection run, in-process (the migration sensor does the same)."""
    from kb_assets.launch.instance import dagster_instance, definitions, fail_abandoned_runs
    from kb_assets.launch.store_changes import MigrationReport
    from kb_assets.launch.store_changes import migrate as run_migration
    from kb_assets.pipeline.migration import migration_due
    from kb_assets.stores.vectors import published_collection

    stores = stores_of(settings)
    instance = dagster_instance(settings)
    fail_abandoned_runs(instance)
    progress = (lambda message: None) if as_json else (lambda message: click.echo(message, err=True))
    due = migration_due(stores.milvus, stores.catalog, settings.alias, settings.embedding_model)
    if due is None:
        report = MigrationReport("unchanged", published_collection(stores.milvus, stores.catalog, settings.alias))
    else:
        report = run_migration(definitions(settings), stores, instance, due, progress)
    data = report.as_json()

    def render(d: JsonObject) -> None:
        click.echo(f"{d['status']}: alias {settings.alias} -> {d['published']}")
        if "quality" in d:
            click.echo(
                f"  {d['entities']} entities for {d['chunkRows']} chunk rows; golden-query hit@5 "
                f"new {d['quality']['new']} vs published {d['quality']['published']}"
            )
        for problem in d.get("problems", []):
            click.echo(f"  problem: {problem}")

    emit(data, as_json, render)
    sys.exit(1 if data["status"] == "failed" else 0)


@click.command()
@click.option("--repair", is_flag=True, help="Fix what can be fixed from Postgres and the lake.")
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def verify(settings: Settings, repair: bool, as_json: bool) -> None:
    """Consistency per document: Postgres rows vs lake rows vs Milvus entities (every entity counted against
    the published chunk rows); exit 1 if inconsistent. --repair runs as a Dagster run (repair_stores)."""
    from kb_assets.pipeline.verify import verify as run_verify

    stores = stores_of(settings)
    if repair:
        from kb_assets.launch.instance import dagster_instance, definitions, fail_abandoned_runs
        from kb_assets.launch.store_changes import repair as run_repair

        instance = dagster_instance(settings)
        fail_abandoned_runs(instance)
        data = run_repair(definitions(settings), instance, settings.runs_log).as_json()
    else:
        data = run_verify(stores.catalog, stores.lake, stores.milvus, settings.alias).as_json()

    def render(d: JsonObject) -> None:
        click.echo(
            ("consistent" if d["consistent"] else f"{len(d['problems'])} problems:")
            + f" ({d['entities']} entities for {d['publishedChunkRows']} published chunk rows)"
        )
        for p in d["problems"]:
            click.echo(f"  {p['documentId']}: {p['problem']}" + (" (repaired)" if p["repaired"] else ""))
        for n in d["notices"]:
            click.echo(f"  notice: {n['notice']}")

    emit(data, as_json, render)
    unrepaired = [p for p in data["problems"] if not p["repaired"]]
    sys.exit(1 if unrepaired else 0)


@click.command()
@click.argument("action", type=click.Choice(["up", "down", "status"]))
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def services(settings: Settings, action: str, as_json: bool) -> None:
    """Start, stop or show the embedded Postgres and Milvus Lite server under KB_HOME (and the warm ingest
    runner, which `down` stops too)."""
    from kb_assets import services as svc
    from kb_assets.launch import runner

    home = settings.home
    home.mkdir(parents=True, exist_ok=True)
    if action == "up":
        if not settings.postgres_url:
            svc.ensure_postgres(home, settings.postgres_binaries)
        if not settings.milvus_uri:
            svc.ensure_milvus(home)
    elif action == "down":
        runner.stop(settings)  # first: it may be ingesting (it finishes that)
        svc.stop_milvus(home)
        svc.stop_postgres(home)
    pid = runner.running(settings)
    data = {
        "home": str(home),
        "postgres": {"external": settings.postgres_url} if settings.postgres_url else svc.postgres_status(home),
        "milvus": {"external": settings.milvus_uri} if settings.milvus_uri else svc.milvus_status(home),
        "ingestRunner": {"running": pid is not None, "pid": pid, "idleSeconds": settings.runner_idle_seconds},
    }

    def render(d: JsonObject) -> None:
        for name in ("postgres", "milvus"):
            status = d[name]
            state = "external" if "external" in status else ("running" if status.get("running") else "stopped")
            where = status.get("dsn") or status.get("uri") or status.get("external") or ""
            click.echo(f"{name}: {state} {where}" + (f" ({status['engine']})" if status.get("engine") else ""))
        warm = d["ingestRunner"]
        click.echo(f"ingest runner: {'running (pid ' + str(warm['pid']) + ')' if warm['running'] else 'stopped'}")

    emit(data, as_json, render)
