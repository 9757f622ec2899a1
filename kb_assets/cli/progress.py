"""What ``kb-assets ingest`` shows while it runs: on a terminal, the plan and a live bar of documents
done / total, failures, pages/s and the time left (``rich``, on stderr); plain lines when stdout or
stderr is not a terminal; nothing with ``--json``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

from kb_assets.pipeline.progress import DocumentsDone, Watcher

Say = Callable[[str], None]


@contextmanager
def ingest_progress(as_json: bool) -> Iterator[tuple[Say, Watcher | None]]:
    """``(say, documents)``: where progress lines go, and what hears the documents done (None: no bar)."""
    if as_json:
        yield (lambda message: None), None
        return
    if not (sys.stdout.isatty() and sys.stderr.isatty()):  # piped or redirected: plain lines
        yield (lambda message: click.echo(message, err=True)), None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("documents"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failed]} failed  {task.fields[rate]} pages/s  ETA {task.fields[eta]}"),
        console=Console(stderr=True),
    ) as bar:
        task = bar.add_task("documents", total=None, visible=False, failed=0, rate="0.0", eta="-")

        def documents(state: DocumentsDone) -> None:
            bar.update(
                task,
                visible=True,
                total=state.total,
                completed=state.done,
                failed=state.failed,
                rate=f"{state.pages_per_second:.1f}",
                eta=duration(state.eta_seconds),
            )

        yield (lambda message: bar.console.print(message, markup=False, highlight=False)), documents


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}:{rest:02d}" if minutes < 60 else f"{minutes // 60}:{minutes % 60:02d}:{rest:02d}"
