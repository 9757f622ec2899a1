"""``kb-assets``: ingest, search, serve, and inspect documents, pages, chunks and lineage.

One module per group of commands (``ingest``, ``search``, ``documents``, ``admin``); ``common`` holds what
they share, ``errors`` turns expected failures into one line.
"""

from __future__ import annotations

import click

from kb_assets.cli import admin, documents, ingest, search
from kb_assets.cli.errors import KbAssetsGroup
from kb_assets.lib.logs import quiet_libraries
from kb_assets.settings import Settings


@click.group(cls=KbAssetsGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the traceback of an expected failure too.")
@click.version_option(package_name="kb-assets", prog_name="kb-assets")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """kb-assets: a page-aware RAG knowledge base kept in step with its documents by Dagster."""
    ctx.meta["kb_debug"] = debug
    quiet_libraries(debug)  # pymilvus' per-call tracebacks only under --debug
    try:
        ctx.obj = Settings.from_env()  # the environment, read once for the command
    except ValueError as error:
        raise click.ClickException(str(error)) from None


for command in (
    ingest.ingest,
    search.search,
    search.evaluate,
    search.serve,
    documents.docs,
    ingest.roots,
    ingest.relocate,
    documents.pages,
    documents.chunks,
    documents.lineage,
    admin.collections,
    admin.migrate,
    admin.verify,
    admin.services,
):
    main.add_command(command)
