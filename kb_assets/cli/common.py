"""What every command shares: the settings, JSON or text output, knowledge-base names, finding a document."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from kb_assets.lib.json_types import JsonObject
from kb_assets.settings import Settings

if TYPE_CHECKING:
    from kb_assets.pipeline.versions import Staleness
    from kb_assets.stores import Stores
    from kb_assets.stores.catalog import Catalog, Document

KbNames = TypeVar("KbNames", str, tuple[str, ...], None)  # --kb once, many times, or not given


def emit(data: JsonObject, as_json: bool, render: Callable[[JsonObject], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))
    else:
        render(data)


def log_runs(settings: Settings) -> Path:
    """Where the runs this command launches, and the libraries' warnings, are logged: the file under
    KB_HOME (``Settings.runs_log``), not the terminal; ``kb-assets --debug`` echoes them on stderr
    too. Returns the file's path (the failure lines name it)."""
    import logging

    path = settings.runs_log
    root = logging.getLogger()
    if not any(getattr(h, "kb_runs_log", None) == path for h in root.handlers):  # once a process and file
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.setLevel(logging.WARNING)
        handler.kb_runs_log = path  # type: ignore[attr-defined]
        root.addHandler(handler)  # libraries' warnings (docling, pymilvus): no stray lines on the terminal
    runs = logging.getLogger("kb_assets.runs")
    if click.get_current_context().meta.get("kb_debug") and not runs.handlers:
        echo = logging.StreamHandler()
        runs.addHandler(echo)  # the runs' Dagster events
        root.addHandler(echo)
    return path


def stores_of(settings: Settings) -> Stores:
    from kb_assets.stores import Stores

    return Stores(settings)


pass_settings = click.make_pass_decorator(Settings)


def knowledge_base_names(ctx: click.Context, param: click.Parameter, value: KbNames) -> KbNames:
    """Callback of ``--kb``: every name must match ``kb_assets/lib/names.py``'s pattern."""
    from kb_assets.lib.names import validate_knowledge_base_id

    try:
        names: tuple[str, ...] = value if isinstance(value, tuple) else () if value is None else (value,)
        for name in names:
            validate_knowledge_base_id(name)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None
    return value


def metadata_filter(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Callback of ``search --period/--kind/--organisation``: the API's validation of that field
    (``SearchBody``), its reason in one line naming the option."""
    if value is None:
        return None
    from pydantic import ValidationError

    from kb_assets.service.schemas import SearchBody

    try:
        SearchBody.model_validate({"query": "?", param.name: value})
    except ValidationError as error:
        reason = error.errors()[0]["msg"].removeprefix("Value error, ")
        raise click.ClickException(f"invalid value for {param.opts[0]}: {reason}") from None
    return value


def document_json(doc: Document, stale: Staleness | None = None) -> JsonObject:
    from kb_assets.pipeline.verify import last_good_notice

    return {
        "documentId": doc.document_id,
        "partitionKey": doc.partition_key,
        "knowledgeBaseId": doc.knowledge_base_id,
        "sourceUri": doc.source_uri,
        "sourceRoot": doc.source_root,
        "sourcePath": doc.source_path,
        "title": doc.title,
        "version": doc.version,
        "status": doc.status,
        "error": doc.error,
        "pages": doc.page_count,
        "chunks": doc.chunk_count,
        "mime": doc.mime,
        "sourceKind": doc.source_kind,
        "publishedVersion": doc.published_version,
        "servesLastGoodVersion": doc.serves_last_good_version and doc.status == "failed",
        "notice": last_good_notice(doc) if doc.serves_last_good_version and doc.status == "failed" else None,
        "stale": stale.as_json() if stale else None,
        "stepVersions": doc.step_versions or {},
        "metadata": doc.metadata,
    }


def find_document(catalog: Catalog, key: str) -> Document:
    """A document by id, by source path as ``ingest`` recorded it, or by a path to its file (relative
    to the current folder or absolute, symlinks followed or not)."""
    path = Path(key).expanduser()
    doc = catalog.find_document(list(dict.fromkeys([key, os.path.abspath(path), str(path.resolve())])))
    if doc is None:
        raise click.ClickException(f"no document {key!r} (give a document id, a source path or the file's path)")
    return doc


class UnknownKnowledgeBase(click.ClickException):
    kind = "unknown_knowledge_base"  # the error object's kind with --json


def known_knowledge_bases(catalog: Catalog, knowledge_base_ids: Sequence[str]) -> None:
    """Refuse knowledge bases that hold no document, naming those that do (a typo gets an error, not an
    empty answer): the API's and the MCP tool's words."""
    from kb_assets.retrieval.scope import unknown_knowledge_bases

    if not knowledge_base_ids:
        return
    known = [row.knowledge_base_id for row in catalog.knowledge_base_counts()]
    unknown = sorted(set(knowledge_base_ids) - set(known))
    if unknown:
        raise UnknownKnowledgeBase(
            unknown_knowledge_bases(unknown, known) + " (kb-assets ingest PATH --kb NAME makes one)"
        )
