"""Commands that register sources: ingest, the source roots of knowledge bases, relocating a moved root."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kb_assets.cli.common import emit, knowledge_base_names, log_runs, pass_settings, stores_of
from kb_assets.cli.errors import EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE
from kb_assets.lib.json_types import JsonObject
from kb_assets.retrieval.strategies import DEFAULT_STRATEGY
from kb_assets.settings import Settings

STRATEGY_HELP = f"Default: KB_SEARCH_STRATEGY, else {DEFAULT_STRATEGY}."
EXIT_STATUS_HELP = f"""\b
Exit status:
  {EXIT_OK}  nothing failed in this run (a quarantined file that has not changed since
     it failed is one QUARANTINED line on stderr, not a failure: --strict makes it one)
  {EXIT_FAILED}  a document failed in this run (or, with --strict, one is quarantined)
  {EXIT_USAGE}  a usage error
  {EXIT_UNAVAILABLE}  a store (Postgres, Milvus, S3) is unreachable or refuses the credentials"""


@click.command(epilog=EXIT_STATUS_HELP)
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--kb", "knowledge_base_id", required=True, help="Knowledge base to ingest into.", callback=knowledge_base_names
)
@click.option("--retry-failed", is_flag=True, help="Run documents again that failed before and have not changed.")
@click.option(
    "--strict",
    is_flag=True,
    help=f"Exit {EXIT_FAILED} when any document under PATHS is quarantined, not only when one failed in this run.",
)
@click.option("--json", "as_json", is_flag=True, help="Print only JSON.")
@pass_settings
def ingest(
    settings: Settings,
    paths: tuple[str, ...],
    knowledge_base_id: str,
    retry_failed: bool,
    strict: bool,
    as_json: bool,
) -> None:
    """Register files under PATHS (folders, files or s3://bucket/prefix) as documents of KB, materialize
    new/changed ones, purge gone ones. A file that failed before and has not changed is reported as still
    failing, not run again, unless --retry-failed. On a terminal, a progress bar shows documents done /
    total, pages/s and the time left."""
    from kb_assets.cli.progress import ingest_progress
    from kb_assets.launch import runner
    from kb_assets.pipeline.identity import OverlappingRoots

    sources = [p if p.startswith(("s3://", "s3a://")) else Path(p) for p in paths]
    log = log_runs(settings)
    warm = not click.get_current_context().meta.get("kb_debug")  # --debug: here, its events on stderr
    try:
        with ingest_progress(as_json) as (say, documents):
            data = (
                runner.ingest_remotely(settings, sources, knowledge_base_id, retry_failed, say, documents)
                if warm
                else None
            )
            if data is None:  # no runner took it: ingest in this process (loading what its runs need)
                from kb_assets.launch.ingest import ingest as run_ingest

                report = run_ingest(
                    sources, knowledge_base_id, settings, progress=say, retry_failed=retry_failed, documents=documents
                )
                data = {**report.as_json(), "warmRunner": False}
                if warm:
                    runner.start(settings)  # the next ingest finds what its runs load loaded
            else:
                data["warmRunner"] = True
    except (FileNotFoundError, OverlappingRoots) as error:
        raise click.ClickException(str(error)) from None
    except runner.RunnerError as error:
        if error.name in ("FileNotFoundError", "OverlappingRoots"):
            raise click.ClickException(str(error)) from None
        raise

    def render(d: JsonObject) -> None:
        counts = d["documents"]
        click.echo(f"ingested into {knowledge_base_id}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
        click.echo(f"published: alias {d['published']['alias']} -> {d['published']['collection']}")
        for warning in d["warnings"]:
            click.echo(f"warning: {warning}", err=True)

    emit(data, as_json, render)
    for failure in data["failures"]:  # one line each on stderr, also with --json (stdout holds the JSON)
        reason = " ".join(str(failure["reason"]).split())
        if failure.get("stillFailing"):  # known: it failed before and its file has not changed since
            again = "unchanged since it failed; --retry-failed runs it again"
            click.echo(f"QUARANTINED {failure['sourceUri']}: {reason} ({again})", err=True)
        else:
            click.echo(f"FAILED {failure['sourceUri']}: {reason} (run log: {log})", err=True)
    sys.exit(ingest_exit_status(data["failures"], strict))


def ingest_exit_status(failures: list[JsonObject], strict: bool) -> int:
    """What a script reads: a document failed in this run (or, ``strict``, any is quarantined)."""
    failed_now = any(not failure.get("stillFailing") for failure in failures)
    return EXIT_FAILED if failed_now or (strict and failures) else EXIT_OK


@click.command()
@click.option("--kb", "knowledge_base_ids", multiple=True, callback=knowledge_base_names)
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def roots(settings: Settings, knowledge_base_ids: tuple[str, ...], as_json: bool) -> None:
    """The source roots (folders, s3:// prefixes) each knowledge base holds documents from, with counts."""
    summary = stores_of(settings).catalog.root_summary(list(knowledge_base_ids) or None)
    data = {"roots": [row.as_json() for row in summary]}

    def render(d: JsonObject) -> None:
        for row in d["roots"]:
            counts = ", ".join(f"{n} {status}" for status, n in row["documents"].items())
            click.echo(f"{row['knowledgeBaseId']}  {row['sourceRoot']}  ({counts})")

    emit(data, as_json, render)


@click.command()
@click.argument("old_root")
@click.argument("new_root")
@click.option(
    "--kb",
    "knowledge_base_id",
    required=True,
    help="The knowledge base whose root moved.",
    callback=knowledge_base_names,
)
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def relocate(settings: Settings, old_root: str, new_root: str, knowledge_base_id: str, as_json: bool) -> None:
    """Tell KB that the files of OLD_ROOT now live under NEW_ROOT (same relative paths): the documents keep
    their ids, versions, partitions and everything published, and the next ingest of NEW_ROOT finds them
    unchanged. Without it, ingesting NEW_ROOT would make new documents."""
    from kb_assets.pipeline.identity import relocation

    catalog = stores_of(settings).catalog
    with catalog.registration_lock():
        try:
            old, new = relocation(knowledge_base_id, old_root, new_root, catalog.source_roots(knowledge_base_id))
        except ValueError as error:
            raise click.ClickException(str(error)) from None
        moved = catalog.relocate_root(knowledge_base_id, old, new)
    emit(
        {"knowledgeBaseId": knowledge_base_id, "from": old, "to": new, "documents": moved},
        as_json,
        lambda d: click.echo(f"{knowledge_base_id}: {d['documents']} documents moved from {d['from']} to {d['to']}"),
    )
