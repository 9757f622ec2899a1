"""``kb-assets``: ingest, search, serve, and inspect documents, pages, chunks and lineage."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from kb_assets.cli.errors import KbAssetsGroup
from kb_assets.retrieval.strategies import DEFAULT_STRATEGY, STRATEGIES
from kb_assets.settings import Settings

STRATEGY_HELP = f"Default: KB_SEARCH_STRATEGY, else {DEFAULT_STRATEGY}."


def emit(data, as_json: bool, render) -> None:
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))
    else:
        render(data)


def _stores(settings: Settings):
    from kb_assets.stores import Stores

    return Stores(settings)


pass_settings = click.make_pass_decorator(Settings)


def knowledge_base_names(ctx, param, value):
    """Callback of ``--kb``: every name must match ``kb_assets/lib/names.py``'s pattern."""
    from kb_assets.lib.names import validate_knowledge_base_id

    try:
        for name in value if isinstance(value, tuple) else () if value is None else (value,):
            validate_knowledge_base_id(name)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None
    return value


@click.group(cls=KbAssetsGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the traceback of an expected failure too.")
@click.version_option(package_name="kb-assets", prog_name="kb-assets")
@click.pass_context
def main(ctx: click.Context, debug: bool):
    """kb-assets: a page-aware RAG knowledge base kept in step with its documents by Dagster."""
    ctx.meta["kb_debug"] = debug
    try:
        ctx.obj = Settings.from_env()        # the environment, read once for the command
    except ValueError as error:
        raise click.ClickException(str(error)) from None


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--kb", "knowledge_base_id", required=True, help="Knowledge base to ingest into.",
              callback=knowledge_base_names)
@click.option("--json", "as_json", is_flag=True, help="Print only JSON.")
@pass_settings
def ingest(settings, paths, knowledge_base_id, as_json):
    """Register files under PATHS (folders, files or s3://bucket/prefix) as documents of KB, materialize
    new/changed ones, purge gone ones."""
    from kb_assets.pipeline.ingest import ingest as run_ingest

    progress = (lambda message: None) if as_json else (lambda message: click.echo(message, err=True))
    sources = [p if p.startswith(("s3://", "s3a://")) else Path(p) for p in paths]
    from kb_assets.pipeline.identity import OverlappingRoots

    try:
        report = run_ingest(sources, knowledge_base_id, settings, progress=progress)
    except (FileNotFoundError, OverlappingRoots) as error:
        raise click.ClickException(str(error)) from None
    data = report.as_json()

    def render(d):
        counts = d["documents"]
        click.echo(f"ingested into {knowledge_base_id}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
        for failure in d["failures"]:
            click.echo(f"  FAILED {failure['sourceUri']}: {failure['reason']}")
        click.echo(f"published: alias {d['published']['alias']} -> {d['published']['collection']}")
        for warning in d["warnings"]:
            click.echo(f"warning: {warning}", err=True)

    emit(data, as_json, render)
    sys.exit(1 if report.failures else 0)


@main.command()
@click.argument("query")
@click.option("--kb", "knowledge_base_ids", multiple=True, help="Knowledge base(s); default all.",
              callback=knowledge_base_names)
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 100))
@click.option("--min-score", type=float, default=None, help="Drop results below this score (then no page fallback).")
@click.option("--strategy", type=click.Choice(STRATEGIES), default=None, help=STRATEGY_HELP)
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def search(settings, query, knowledge_base_ids, limit, min_score, strategy, as_json):
    """Search the published knowledge base(s): the same code path as POST /v1/kb/search."""
    from kb_assets.service.api import make_searcher, one_thread_per_query
    from kb_assets.retrieval.search import SearchRequest

    settings = one_thread_per_query(settings)
    searcher = make_searcher(settings)
    try:
        response = searcher.search(SearchRequest(query, list(knowledge_base_ids) or None, limit, min_score, strategy))
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    finally:
        searcher.close()

    def render(d):
        for warning in d["warnings"]:
            click.echo(f"warning: {warning}", err=True)
        if not d["results"]:
            click.echo("no results")
        for rank, r in enumerate(d["results"], 1):
            page = f"page {r['pageIndex'] + 1}" + (f" (printed {r['pageLabel']})" if r.get("pageLabel") and
                                                   r["pageLabel"] != str(r["pageIndex"] + 1) else "")
            score = "fallback" if r["score"] is None else f"{r['score']:.3f}"
            section = f" § {r['sectionTitle']}" if r.get("sectionTitle") else ""
            click.echo(f"{rank}. [{score}] {r['documentTitle']} — {page}{section}")
            snippet = " ".join(r["content"].split())
            click.echo(f"   {snippet[:220]}{'…' if len(snippet) > 220 else ''}")

    emit(response.as_json(), as_json, render)


@main.command("eval")
@click.argument("questions", type=click.Path(exists=True, path_type=Path))
@click.option("--kb", "knowledge_base_ids", multiple=True, help="Only questions of these knowledge bases.",
              callback=knowledge_base_names)
@click.option("--strategy", type=click.Choice(STRATEGIES), default=None, help=STRATEGY_HELP)
@click.option("--baseline", is_flag=True, help="Also score the naive chunk-RAG baseline on the same pages.")
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def evaluate(settings, questions, knowledge_base_ids, strategy, baseline, as_json):
    """Page-hit@1/@5, MRR and latency p50/p95 of labelled questions (see shared/eval/README.md)."""
    from kb_assets.service.api import make_searcher, one_thread_per_query
    from kb_assets.retrieval.evaluation import evaluate as score
    from kb_assets.retrieval.evaluation import load_questions
    from kb_assets.retrieval.search import SearchRequest

    try:
        rows = [q for q in load_questions(questions) if not knowledge_base_ids or q["kb"] in knowledge_base_ids]
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    settings = one_thread_per_query(settings)
    searcher = make_searcher(settings)
    strategy = strategy or searcher.config.strategy
    searcher.warm_up()
    data = {"strategy": strategy, "scores": score(
        lambda q: searcher.search(SearchRequest(q["query"], [q["kb"]], 10, None, strategy)).results, rows)}
    searcher.close()
    if baseline:
        naive = naive_baseline(settings, sorted({q["kb"] for q in rows}))
        data["baseline"] = score(lambda q: naive.search(q["query"], [q["kb"]], 10), rows)

    def render(d):
        for name in ("scores", "baseline"):
            if name not in d:
                continue
            click.echo(f"{'kb-assets ' + d['strategy'] if name == 'scores' else 'naive baseline'}:")
            for kb, s in d[name].items():
                if s.get("questions"):
                    click.echo(f"  {kb:<12} n={s['questions']:<4} hit@1 {s['hit@1']:.3f}  hit@5 {s['hit@5']:.3f}  "
                               f"MRR {s['mrr']:.3f}  p50 {s['latencyP50Ms']} ms  p95 {s['latencyP95Ms']} ms")

    emit(data, as_json, render)


def naive_baseline(settings: Settings, knowledge_base_ids: list[str]):
    """The naive chunk-RAG baseline over the published pages of these knowledge bases."""
    from kb_assets.retrieval.baseline import NaiveBaseline

    stores = _stores(settings)
    documents = [({"knowledgeBaseId": d.knowledge_base_id, "sourceUri": d.source_uri},
                  stores.catalog.read_pages(d.document_id))
                 for d in stores.catalog.list_documents(knowledge_base_ids) if d.status == "published"]
    return NaiveBaseline(stores.model(), documents)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True)
@pass_settings
def serve(settings, host, port):
    """Serve POST /v1/kb/search and friends (OpenAPI at /docs); without KB_API_KEYS only on 127.0.0.1.
    Requests must name an allowed Host: loopback names, KB_PUBLIC_URL's host, KB_ALLOWED_HOSTS."""
    from kb_assets.service import lean
    from kb_assets.service.auth import HostPolicy, is_loopback

    def refuse(reason: str):
        click.echo(f"Error: {reason}", err=True)
        raise SystemExit(2)

    if not settings.api_keys and not is_loopback(host):
        refuse(f"without KB_API_KEYS the service answers 127.0.0.1 only: set KB_API_KEYS to serve on {host}")
    try:
        hosts = HostPolicy.from_settings(settings)
    except ValueError as error:
        refuse(str(error))
    if not is_loopback(host) and not (hosts.any or hosts.names):
        click.echo(f"Warning: KB_PUBLIC_URL and KB_ALLOWED_HOSTS are unset: requests to {host} that name "
                   "a host other than a loopback one answer 421", err=True)
    lean.refuse()
    import uvicorn

    from kb_assets.service.api import create_app, one_thread_per_query

    uvicorn.run(create_app(one_thread_per_query(settings)), host=host, port=port)


def _document_json(doc, stale=None) -> dict:
    from kb_assets.pipeline.verify import last_good_notice

    return {"documentId": doc.document_id, "partitionKey": doc.partition_key, "knowledgeBaseId": doc.knowledge_base_id,
            "sourceUri": doc.source_uri, "sourceRoot": doc.source_root, "sourcePath": doc.source_path, "title": doc.title, "version": doc.version, "status": doc.status,
            "error": doc.error, "pages": doc.page_count, "chunks": doc.chunk_count, "mime": doc.mime,
            "sourceKind": doc.source_kind, "publishedVersion": doc.published_version,
            "servesLastGoodVersion": doc.serves_last_good_version and doc.status == "failed",
            "notice": last_good_notice(doc) if doc.serves_last_good_version and doc.status == "failed" else None,
            "stale": stale.as_json() if stale else None, "stepVersions": doc.step_versions or {}}


@main.command()
@click.option("--kb", "knowledge_base_ids", multiple=True, callback=knowledge_base_names)
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def docs(settings, knowledge_base_ids, as_json):
    """Documents with their status, version, pages and chunks; which step is stale (a newer pipeline
    version or embedding spec) and why; where a newer file failed, that its last good version serves.
    partitionKey is the document's Dagster partition key."""
    from kb_assets.pipeline.migration import migration_due
    from kb_assets.pipeline.planning import stale_documents

    stores = _stores(settings)
    catalog = stores.catalog
    documents = catalog.list_documents(list(knowledge_base_ids) or None)
    migrating = migration_due(stores.milvus, settings.alias, settings.embedding_model) is not None
    stale = stale_documents(documents, settings.step_versions(), {c["name"]: c["model"] for c in catalog.collections()},
                            migrating)
    data = {"documents": [_document_json(d, stale.get(d.document_id)) for d in documents]}

    def render(d):
        for doc in d["documents"]:
            click.echo(f"{doc['status']:<9} {doc['partitionKey'] or doc['sourcePath']}  pages={doc['pages']} "
                       f"chunks={doc['chunks']}  {doc['documentId']}" + (f"\n          {doc['error']}" if doc["error"] else ""))
            if doc["notice"]:
                click.echo(f"          {doc['notice']}")
            if doc["stale"] and doc["status"] != "failed":
                click.echo(f"          stale from {doc['stale']['step']}: {doc['stale']['reason']}"
                           + (" (collection migration)" if doc["stale"]["migration"] else ""))

    emit(data, as_json, render)


@main.command()
@click.option("--kb", "knowledge_base_ids", multiple=True, callback=knowledge_base_names)
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def roots(settings, knowledge_base_ids, as_json):
    """The source roots (folders, s3:// prefixes) each knowledge base holds documents from, with counts."""
    data = {"roots": _stores(settings).catalog.root_summary(list(knowledge_base_ids) or None)}

    def render(d):
        for row in d["roots"]:
            counts = ", ".join(f"{n} {status}" for status, n in row["documents"].items())
            click.echo(f"{row['knowledgeBaseId']}  {row['sourceRoot']}  ({counts})")

    emit(data, as_json, render)


@main.command()
@click.argument("old_root")
@click.argument("new_root")
@click.option("--kb", "knowledge_base_id", required=True, help="The knowledge base whose root moved.",
              callback=knowledge_base_names)
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def relocate(settings, old_root, new_root, knowledge_base_id, as_json):
    """Tell KB that the files of OLD_ROOT now live under NEW_ROOT (same relative paths): the documents keep
    their ids, versions, partitions and everything published, and the next ingest of NEW_ROOT finds them
    unchanged. Without it, ingesting NEW_ROOT would make new documents."""
    from kb_assets.pipeline.identity import relocation

    catalog = _stores(settings).catalog
    with catalog.registration_lock():
        try:
            old, new = relocation(knowledge_base_id, old_root, new_root, catalog.source_roots(knowledge_base_id))
        except ValueError as error:
            raise click.ClickException(str(error)) from None
        moved = catalog.relocate_root(knowledge_base_id, old, new)
    emit({"knowledgeBaseId": knowledge_base_id, "from": old, "to": new, "documents": moved}, as_json,
         lambda d: click.echo(f"{knowledge_base_id}: {d['documents']} documents moved from {d['from']} to {d['to']}"))


def _find(catalog, key):
    """A document by id, by source path as ``ingest`` recorded it, or by a path to its file (relative
    to the current folder or absolute, symlinks followed or not)."""
    path = Path(key).expanduser()
    doc = catalog.find_document(list(dict.fromkeys([key, os.path.abspath(path), str(path.resolve())])))
    if doc is None:
        raise click.ClickException(f"no document {key!r} (give a document id, a source path or the file's path)")
    return doc


@main.command()
@click.argument("document")
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def pages(settings, document, as_json):
    """Page records of a document (id, source path or file path): label, parser, mode, summary, text."""
    catalog = _stores(settings).catalog
    doc = _find(catalog, document)
    data = {"documentId": doc.document_id, "pages": [{
        "pageIndex": p["page_index"], "pageLabel": p["page_label"], "parser": p["parser"], "mode": p["mode"],
        "version": p["version"], "summary": p["summary"], "keywords": p["keywords"], "text": p["text"],
        "imageKey": p["image_key"], "runId": p["run_id"]} for p in catalog.read_pages(doc.document_id)]}

    def render(d):
        for p in d["pages"]:
            click.echo(f"page {p['pageIndex'] + 1} (index {p['pageIndex']}, label {p['pageLabel']}) "
                       f"{p['parser']}/{p['mode']}: {p['summary']}")

    emit(data, as_json, render)


@main.command()
@click.argument("document")
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def chunks(settings, document, as_json):
    """Chunk records of a document: content, embeddingInput, page range, section."""
    stores = _stores(settings)
    doc = _find(stores.catalog, document)
    frame = stores.lake.read("chunks", doc.document_id)
    data = {"documentId": doc.document_id, "chunks": [{
        "chunkId": c["chunk_id"], "chunkIndex": c["chunk_index"], "pageIndex": c["page_index"],
        "pageEnd": c["page_end"], "pageLabel": c["page_label"], "kind": c["kind"],
        "sectionTitle": c["section_title"], "content": c["content"], "embeddingInput": c["embedding_input"],
        "tableHeader": c["table_header"], "imageKey": c["image_key"],
        "documentVersion": c["document_version"], "runId": c["run_id"]} for c in frame.iter_rows(named=True)]}

    def render(d):
        for c in d["chunks"]:
            click.echo(f"#{c['chunkIndex']} p{c['pageIndex'] + 1} [{c['kind']}] {c['sectionTitle'] or ''}: "
                       f"{' '.join(c['content'].split())[:120]}")

    emit(data, as_json, render)


@main.command()
@click.argument("chunk_id")
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def lineage(settings, chunk_id, as_json):
    """Which page of which version of which file a chunk came from, and which runs wrote it."""
    from kb_assets.lineage import ChunkNotFound, chunk_lineage

    stores = _stores(settings)
    try:
        data = chunk_lineage(chunk_id, stores.catalog, stores.lake, stores.milvus, settings.alias)
    except ChunkNotFound as error:
        raise click.ClickException(str(error)) from None

    def render(d):
        doc = d["document"]
        click.echo(f"chunk {d['chunkId']} (#{d['chunkIndex']}, section {d['sectionTitle']})")
        click.echo(f"  pages {d['pageIndex'] + 1}-{d['pageEnd'] + 1} of {doc['title']} ({doc['sourceUri']})")
        click.echo(f"  version {doc['version']} (current {doc['currentVersion']}, {doc['status']})")
        click.echo(f"  runs: chunks {d['runIds']['chunks']}, pages {d['runIds']['pages']}")
        click.echo(f"  verified: {d['verified']}")

    emit(data, as_json, render)


@main.command()
@click.argument("action", required=False, type=click.Choice(["rollback"]))
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def collections(settings, action, as_json):
    """Collection versions (name, model, dimension, state, count, published); `rollback` re-publishes
    the previous version."""
    from kb_assets.stores.vectors import published_collection

    stores = _stores(settings)
    client = stores.milvus
    if action == "rollback":
        from kb_assets.pipeline.migration import rollback

        try:
            rolled = rollback(stores.catalog, client, settings.alias)
        except LookupError as error:
            raise click.ClickException(str(error)) from None
        if not as_json:
            click.echo(f"alias {settings.alias}: {rolled['previous']} -> {rolled['published']}")
    current = published_collection(client, settings.alias)
    data = {"alias": settings.alias, "published": current, "collections": [{
        "name": c["name"], "model": c["model"], "dimension": c["dimension"], "languages": c["languages"],
        "state": c["state"], "count": c["entity_count"], "published": c["name"] == current}
        for c in stores.catalog.collections()]}

    def render(d):
        for c in d["collections"]:
            mark = "*" if c["published"] else " "
            click.echo(f"{mark} {c['name']}  {c['model']} d{c['dimension']}  {c['state']}  {c['count']} entities")

    emit(data, as_json, render)


@main.command()
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def migrate(settings, as_json):
    """Build, validate and publish the collection of the configured embedding spec (KB_EMBEDDING_MODEL):
    the backfill runs and the publish_collection run, in-process (the migration sensor does the same)."""
    from kb_assets.defs import launch
    from kb_assets.pipeline.migration import migration_due
    from kb_assets.stores.vectors import published_collection

    stores = _stores(settings)
    instance = launch.dagster_instance(settings)
    launch.fail_abandoned_runs(instance)
    progress = (lambda message: None) if as_json else (lambda message: click.echo(message, err=True))
    due = migration_due(stores.milvus, settings.alias, settings.embedding_model)
    if due is None:
        data = {"status": "unchanged", "published": published_collection(stores.milvus, settings.alias)}
    else:
        from kb_assets.definitions import make_definitions

        data = launch.migrate(make_definitions(settings), settings, stores, instance, due, progress)

    def render(d):
        click.echo(f"{d['status']}: alias {settings.alias} -> {d['published']}")
        if "quality" in d:
            click.echo(f"  {d['entities']} entities for {d['chunkRows']} chunk rows; golden-query hit@5 "
                       f"new {d['quality']['new']} vs published {d['quality']['published']}")
        for problem in d.get("problems", []):
            click.echo(f"  problem: {problem}")

    emit(data, as_json, render)
    sys.exit(1 if data["status"] == "failed" else 0)


@main.command()
@click.option("--repair", is_flag=True, help="Fix what can be fixed from Postgres and the lake.")
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def verify(settings, repair, as_json):
    """Consistency per document: Postgres rows vs lake rows vs Milvus entities (every entity counted against
    the published chunk rows); exit 1 if inconsistent. --repair runs as a Dagster run (repair_stores)."""
    from kb_assets.pipeline.verify import verify as run_verify

    stores = _stores(settings)
    if repair:
        from kb_assets.definitions import make_definitions
        from kb_assets.defs import launch

        instance = launch.dagster_instance(settings)
        launch.fail_abandoned_runs(instance)
        data = launch.repair(make_definitions(settings), instance)
    else:
        data = run_verify(stores.catalog, stores.lake, stores.milvus, settings.alias)

    def render(d):
        click.echo(("consistent" if d["consistent"] else f"{len(d['problems'])} problems:")
                   + f" ({d['entities']} entities for {d['publishedChunkRows']} published chunk rows)")
        for p in d["problems"]:
            click.echo(f"  {p['documentId']}: {p['problem']}" + (" (repaired)" if p["repaired"] else ""))
        for n in d["notices"]:
            click.echo(f"  notice: {n['notice']}")

    emit(data, as_json, render)
    unrepaired = [p for p in data["problems"] if not p["repaired"]]
    sys.exit(1 if unrepaired else 0)


@main.command()
@click.argument("action", type=click.Choice(["up", "down", "status"]))
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def services(settings, action, as_json):
    """Start, stop or show the embedded Postgres and Milvus Lite server under KB_HOME."""
    from kb_assets import services as svc

    home = settings.home
    home.mkdir(parents=True, exist_ok=True)
    if action == "up":
        if not settings.postgres_url:
            svc.ensure_postgres(home, settings.postgres_binaries)
        if not settings.milvus_uri:
            svc.ensure_milvus(home)
    elif action == "down":
        svc.stop_milvus(home)
        svc.stop_postgres(home)
    data = {"home": str(home),
            "postgres": {"external": settings.postgres_url} if settings.postgres_url else svc.postgres_status(home),
            "milvus": {"external": settings.milvus_uri} if settings.milvus_uri else svc.milvus_status(home)}

    def render(d):
        for name in ("postgres", "milvus"):
            status = d[name]
            state = "external" if "external" in status else ("running" if status.get("running") else "stopped")
            click.echo(f"{name}: {state} {status.get('dsn') or status.get('uri') or status.get('external') or ''}")

    emit(data, as_json, render)

