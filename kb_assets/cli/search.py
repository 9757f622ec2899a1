"""Commands that search: search, eval (page-hit figures of a question set) and serve (the HTTP service)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from kb_assets.cli.common import (
    emit,
    knowledge_base_names,
    known_knowledge_bases,
    metadata_filter,
    pass_settings,
    stores_of,
)
from kb_assets.lib.json_types import JsonObject
from kb_assets.retrieval.strategies import DEFAULT_STRATEGY, STRATEGIES
from kb_assets.settings import Settings

if TYPE_CHECKING:
    from kb_assets.retrieval.baseline import NaiveBaseline

STRATEGY_HELP = f"Default: KB_SEARCH_STRATEGY, else {DEFAULT_STRATEGY}."


@click.command()
@click.argument("query")
@click.option(
    "--kb", "knowledge_base_ids", multiple=True, help="Knowledge base(s); default all.", callback=knowledge_base_names
)
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 100))
@click.option("--min-score", type=float, default=None, help="Drop results below this score (then no page fallback).")
@click.option("--strategy", type=click.Choice(STRATEGIES), default=None, help=STRATEGY_HELP)
@click.option("--period", callback=metadata_filter, help='Only documents of this period: "FY2022", "Q2 FY2023".')
@click.option("--kind", callback=metadata_filter, help='Only documents of this kind: "annual report", "10-Q".')
@click.option("--organisation", callback=metadata_filter, help="Only documents whose organisation's name holds this.")
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def search(
    settings: Settings,
    query: str,
    knowledge_base_ids: tuple[str, ...],
    limit: int,
    min_score: float | None,
    strategy: str | None,
    period: str | None,
    kind: str | None,
    organisation: str | None,
    as_json: bool,
) -> None:
    """Search the published knowledge base(s): the same code path as POST /v1/kb/search. Each result shows
    its document's organisation, period and kind when they were read from its content, and the passage a
    reader should read (its context: the window of its page chosen for the question), the question's words
    marked on a terminal."""
    from kb_assets.retrieval.search import SearchRequest
    from kb_assets.service.api import make_searcher, one_thread_per_query

    known_knowledge_bases(stores_of(settings).catalog, knowledge_base_ids)
    settings = one_thread_per_query(settings)
    searcher = make_searcher(settings)
    try:
        filters = {"period": period, "kind": kind, "organisation": organisation}
        kbs = list(knowledge_base_ids) or None
        response = searcher.search(
            SearchRequest(query, kbs, limit, min_score, strategy, filters if any(filters.values()) else None)
        )
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    finally:
        searcher.close()

    def render(d: JsonObject) -> None:
        for warning in d["warnings"]:
            click.echo(f"warning: {warning}", err=True)
        if not d["results"]:
            click.echo("no results")
        for line in result_lines(d["results"], query, strategy or searcher.config.strategy):
            click.echo(line)

    emit(response.as_json(), as_json, render)


def result_lines(rows: list[dict], query: str, strategy: str) -> list[str]:
    """What ``search`` prints of its results: a head line a result (rank, document, page, section, the score,
    named: the chunk's own where pages are ranked, ``pageindex``), the document's labelled metadata, then its
    passage (``context``: paragraphs a line each, tables in columns; the question's words marked on a
    terminal), or which result above holds it (``retrieval/overlap.py``)."""
    from kb_assets.cli.render import labelled, passage_lines
    from kb_assets.retrieval.overlap import covered_by

    terminal = sys.stdout.isatty()
    width = max(40, shutil.get_terminal_size((100, 24)).columns - 3) if terminal else None
    scores = [r["score"] for r in rows if r["score"] is not None]
    by_page = strategy == "pageindex"
    lines = []
    if by_page and scores != sorted(scores, reverse=True):
        lines.append("(ranked by page: a page's relevance orders the results; each shows its chunk's own score)")
    for rank, r in enumerate(rows, 1):
        page = f"page {r['pageIndex'] + 1}" + (
            f" (printed {r['pageLabel']})" if r.get("pageLabel") and r["pageLabel"] != str(r["pageIndex"] + 1) else ""
        )
        score = (
            "from page text, no score"
            if r["score"] is None
            else f"{'chunk score' if by_page else 'score'} {r['score']:.3f}"
        )
        section = f" § {r['sectionTitle']}" if r.get("sectionTitle") else ""
        if rank > 1:
            lines.append("")
        lines.append(f"{rank}. {r['documentTitle']} — {page}{section} [{score}]")
        if about := labelled(r.get("documentMetadata")):
            lines.append(f"   {about}")
        holder = covered_by(rows, rank - 1)
        if holder is not None:
            lines.append(f"   (its passage is in result {holder + 1}'s above)")
            continue
        for line in passage_lines(r.get("context") or r["content"], width):
            lines.append(f"   {marked(line, query) if terminal else line}")
    return lines


def marked(text: str, query: str) -> str:
    """The text with the question's words in bold (on a terminal), found as search finds them: the page's
    marks in the command line."""
    from kb_assets.retrieval.context import occurrences, question_terms

    spans = sorted(span for found in occurrences(question_terms(query), text).values() for span in found)
    out, at = [], 0
    for start, end in spans:
        if end <= at:
            continue
        start = max(start, at)
        out += [text[at:start], click.style(text[start:end], bold=True, underline=True)]
        at = end
    return "".join(out) + text[at:]


@click.command("eval")
@click.argument("questions", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--kb",
    "knowledge_base_ids",
    multiple=True,
    help="Only questions of these knowledge bases.",
    callback=knowledge_base_names,
)
@click.option("--strategy", type=click.Choice(STRATEGIES), default=None, help=STRATEGY_HELP)
@click.option("--baseline", is_flag=True, help="Also score the naive chunk-RAG baseline on the same pages.")
@click.option("--json", "as_json", is_flag=True)
@pass_settings
def evaluate(
    settings: Settings,
    questions: Path,
    knowledge_base_ids: tuple[str, ...],
    strategy: str | None,
    baseline: bool,
    as_json: bool,
) -> None:
    """Page-hit@1/@5, MRR and latency p50/p95 of labelled questions. QUESTIONS: one JSON object a line,
    {"kb", "query", "file", "pages": [first, last]} and optionally "answer" (a phrase the returned text
    holds: answer@1/@5) and "lang"."""
    from kb_assets.retrieval.evaluation import evaluate as score
    from kb_assets.retrieval.evaluation import load_questions
    from kb_assets.retrieval.search import SearchRequest
    from kb_assets.service.api import make_searcher, one_thread_per_query

    try:
        rows = [q for q in load_questions(questions) if not knowledge_base_ids or q["kb"] in knowledge_base_ids]
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    settings = one_thread_per_query(settings)
    searcher = make_searcher(settings)
    strategy = strategy or searcher.config.strategy
    searcher.warm_up()
    from kb_assets.retrieval import search_version

    data = {
        "strategy": strategy,
        "searchVersion": search_version(),
        "scores": score(
            lambda q: searcher.search(SearchRequest(q["query"], [q["kb"]], 10, None, strategy)).results, rows
        ),
    }
    searcher.close()
    if baseline:
        naive = naive_baseline(settings, sorted({q["kb"] for q in rows}))
        data["baseline"] = score(lambda q: naive.search(q["query"], [q["kb"]], 10), rows)

    def render(d: JsonObject) -> None:
        for name in ("scores", "baseline"):
            if name not in d:
                continue
            label = f"kb-assets {d['strategy']} (search {d['searchVersion']})" if name == "scores" else "naive baseline"
            click.echo(f"{label}:")
            for kb, s in d[name].items():
                if s.get("questions"):
                    click.echo(
                        f"  {kb:<12} n={s['questions']:<4} hit@1 {s['hit@1']:.3f}  hit@5 {s['hit@5']:.3f}  "
                        f"MRR {s['mrr']:.3f}  p50 {s['latencyP50Ms']} ms  p95 {s['latencyP95Ms']} ms"
                    )

    emit(data, as_json, render)


def naive_baseline(settings: Settings, knowledge_base_ids: list[str]) -> NaiveBaseline:
    """The naive chunk-RAG baseline over the published pages of these knowledge bases."""
    from kb_assets.retrieval.baseline import NaiveBaseline

    stores = stores_of(settings)
    documents = [
        ({"knowledgeBaseId": d.knowledge_base_id, "sourceUri": d.source_uri}, stores.catalog.read_pages(d.document_id))
        for d in stores.catalog.list_documents(knowledge_base_ids)
        if d.status == "published"
    ]
    return NaiveBaseline(stores.model(), documents)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True)
@pass_settings
def serve(settings: Settings, host: str, port: int) -> None:
    """Serve POST /v1/kb/search and friends (OpenAPI at /docs); without KB_API_KEYS only on 127.0.0.1.
    Requests must name an allowed Host: loopback names, KB_PUBLIC_URL's host, KB_ALLOWED_HOSTS."""
    from kb_assets.service import lean
    from kb_assets.service.auth import HostPolicy, is_loopback

    def refuse(reason: str) -> NoReturn:
        click.echo(f"Error: {reason}", err=True)
        raise SystemExit(2)

    if not settings.api_keys and not is_loopback(host):
        refuse(f"without KB_API_KEYS the service answers 127.0.0.1 only: set KB_API_KEYS to serve on {host}")
    try:
        hosts = HostPolicy.from_settings(settings)
    except ValueError as error:
        refuse(str(error))
    if not is_loopback(host) and not (hosts.any or hosts.names):
        click.echo(
            f"Warning: KB_PUBLIC_URL and KB_ALLOWED_HOSTS are unset: requests to {host} that name "
            "a host other than a loopback one answer 421",
            err=True,
        )
    lean.refuse()
    import uvicorn

    from kb_assets.service.api import create_app, one_thread_per_query
    from kb_assets.service.server import server_config

    app = create_app(one_thread_per_query(settings))
    uvicorn.Server(server_config(app, host, port, settings.body_timeout_s)).run()
