"""Commands that show what the stores hold: documents, pages, chunks and a chunk's lineage."""

from __future__ import annotations

from collections.abc import Callable

import click

from kb_assets.cli.common import (
    document_json,
    emit,
    find_document,
    knowledge_base_names,
    known_knowledge_bases,
    pass_settings,
    stores_of,
)
from kb_assets.cli.render import labelled
from kb_assets.lib.json_types import JsonObject
from kb_assets.retrieval.strategies import DEFAULT_STRATEGY
from kb_assets.settings import Settings

STRATEGY_HELP = f"Default: KB_SEARCH_STRATEGY, else {DEFAULT_STRATEGY}."


@click.command()
@click.option("--kb", "knowledge_base_ids", multiple=True, callback=knowledge_base_names)
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def docs(settings: Settings, knowledge_base_ids: tuple[str, ...], as_json: bool) -> None:
    """Documents with their status, version, pages and chunks; which step is stale (a newer pipeline
    version or embedding spec) and why; where a newer file failed, that its last good version serves.
    partitionKey is the document's Dagster partition key; metadata: its organisation, period and kind as
    read from its content."""
    from kb_assets.pipeline.migration import migration_due
    from kb_assets.pipeline.planning import stale_documents
    from kb_assets.pipeline.versions import step_versions

    stores = stores_of(settings)
    catalog = stores.catalog
    known_knowledge_bases(catalog, knowledge_base_ids)
    documents = catalog.list_documents(list(knowledge_base_ids) or None)
    migrating = migration_due(stores.milvus, stores.catalog, settings.alias, settings.embedding_model) is not None
    stale = stale_documents(
        documents, step_versions(settings), {c.name: c.model for c in catalog.collections()}, migrating
    )
    data = {"documents": [document_json(d, stale.get(d.document_id)) for d in documents]}

    def render(d: JsonObject) -> None:
        for doc in d["documents"]:
            click.echo(
                f"{doc['status']:<9} {doc['partitionKey'] or doc['sourcePath']}  {counts(doc)}{doc['documentId']}"
                + (f"\n          {doc['error']}" if doc["error"] else "")
            )
            if described := labelled(doc["metadata"]):
                click.echo(f"          {described}")
            if doc["notice"]:
                click.echo(f"          {doc['notice']}")
            if doc["stale"] and doc["status"] != "failed":
                click.echo(
                    f"          stale from {doc['stale']['step']}: {doc['stale']['reason']}"
                    + (" (collection migration)" if doc["stale"]["migration"] else "")
                )

    emit(data, as_json, render)


def counts(doc: dict) -> str:
    """A document's pages and chunks where known (a document that failed or waits has none yet)."""
    known = [f"{name}={doc[name]}" for name in ("pages", "chunks") if doc[name] is not None]
    return "".join(f"{part} " for part in known) + (" " if known else "")


@click.command()
@click.argument("document")
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def pages(settings: Settings, document: str, as_json: bool) -> None:
    """Page records of a document (id, source path or file path): label, parser, mode, summary, text."""
    catalog = stores_of(settings).catalog
    doc = find_document(catalog, document)
    records = [
        {
            "pageIndex": p["page_index"],
            "pageLabel": p["page_label"],
            "parser": p["parser"],
            "mode": p["mode"],
            "version": p["version"],
            "summary": p["summary"],
            "keywords": p["keywords"],
            "text": p["text"],
            "imageKey": p["image_key"],
            "runId": p["run_id"],
        }
        for p in catalog.read_pages(doc.document_id)
    ]
    emit_records(
        doc.document_id,
        "pages",
        records,
        lambda p: (
            f"page {p['pageIndex'] + 1} (index {p['pageIndex']}, label {p['pageLabel']}) "
            f"{p['parser']}/{p['mode']}: {p['summary']}"
        ),
        as_json,
    )


@click.command()
@click.argument("document")
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def chunks(settings: Settings, document: str, as_json: bool) -> None:
    """Chunk records of a document: content, embeddingInput, page range, section."""
    from kb_assets.pipeline.lineage import chunk_records

    stores = stores_of(settings)
    doc = find_document(stores.catalog, document)
    emit_records(
        doc.document_id,
        "chunks",
        chunk_records(stores.lake.read("chunks", doc.document_id)),
        lambda c: (
            f"#{c['chunkIndex']} p{c['pageIndex'] + 1} [{c['kind']}] {c['sectionTitle'] or ''}: "
            f"{' '.join(c['content'].split())[:120]}"
        ),
        as_json,
    )


def emit_records(
    document_id: str, name: str, records: list[JsonObject], line: Callable[[JsonObject], str], as_json: bool
) -> None:
    """A document's records: ``{"documentId": ..., name: records}`` as JSON, else one line a record."""

    def render(data: JsonObject) -> None:
        for record in data[name]:
            click.echo(line(record))

    emit({"documentId": document_id, name: records}, as_json, render)


@click.command()
@click.argument("chunk_id")
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def lineage(settings: Settings, chunk_id: str, as_json: bool) -> None:
    """Which page of which version of which file a chunk came from, and which runs wrote it."""
    from kb_assets.pipeline.lineage import ChunkNotFound, chunk_lineage

    stores = stores_of(settings)
    try:
        data = chunk_lineage(chunk_id, stores.catalog, stores.lake, stores.milvus, settings.alias)
    except ChunkNotFound as error:
        raise click.ClickException(str(error)) from None

    def render(d: JsonObject) -> None:
        doc = d["document"]
        click.echo(f"chunk {d['chunkId']} (#{d['chunkIndex']}, section {d['sectionTitle']})")
        click.echo(f"  pages {d['pageIndex'] + 1}-{d['pageEnd'] + 1} of {doc['title']} ({doc['sourceUri']})")
        click.echo(f"  version {doc['version']} (current {doc['currentVersion']}, {doc['status']})")
        click.echo(f"  runs: chunks {d['runIds']['chunks']}, pages {d['runIds']['pages']}")
        click.echo(f"  verified: {d['verified']}")

    emit(data, as_json, render)
