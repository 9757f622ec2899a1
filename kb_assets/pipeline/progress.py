"""Progress of an ingest's runs, document by document, while they run: a thread reads the planned
documents from the catalog (``Catalog.get_documents``) every ``POLL_S`` seconds and reports how many
are done (published or failed by a run that started after the ingest began), their pages and the time
since the runs started. It reads what the steps record, so it sees runs in this process, in worker
processes and in the daemon's run queue alike."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kb_assets.stores.catalog import Catalog

POLL_S = 0.5


@dataclass(frozen=True)
class DocumentsDone:
    done: int
    total: int
    failed: int
    pages: int  # pages of the documents done
    seconds: float  # since the runs started

    @property
    def pages_per_second(self) -> float:
        return self.pages / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """The time left at the pace so far (None before the first document is done)."""
        if not self.done:
            return None
        return (self.total - self.done) * self.seconds / self.done


Watcher = Callable[[DocumentsDone], None]


@contextmanager
def watching(catalog: Catalog, document_ids: list[str], report: Watcher | None) -> Iterator[None]:
    """Report ``DocumentsDone`` of ``document_ids`` to ``report`` while the block runs (and once at its
    end, with every document done); nothing when ``report`` is None or there is no document."""
    if report is None or not document_ids:
        yield
        return
    ids = list(dict.fromkeys(document_ids))
    before = {doc_id: doc.last_run_id for doc_id, doc in catalog.get_documents(ids).items()}
    started, stop = time.monotonic(), threading.Event()

    def poll(final: bool = False) -> None:
        docs = catalog.get_documents(ids).values()
        finished = [
            d
            for d in docs
            if final or (d.last_run_id != before.get(d.document_id) and d.status in ("published", "failed"))
        ]
        report(
            DocumentsDone(
                done=len(finished),
                total=len(ids),
                failed=sum(d.status == "failed" for d in finished),
                pages=sum(d.page_count or 0 for d in finished),
                seconds=time.monotonic() - started,
            )
        )

    def loop() -> None:
        while not stop.wait(POLL_S):
            try:
                poll()
            except Exception:  # a progress line is not worth failing an ingest: the next poll tries again
                continue

    thread = threading.Thread(target=loop, name="kb-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    poll(final=True)  # the runs are over: every document is done
