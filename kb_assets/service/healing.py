"""The service heals the embedded stores it depends on: the Milvus engine and Postgres under ``KB_HOME``.

When ``KB_MILVUS_URI`` (``KB_POSTGRES_URL``) is unset, ``kb-assets serve`` reads the Milvus engine (the
Postgres) that it or an ingest started under ``KB_HOME``. If that server stops (killed, or a fast shutdown of
its postmaster), searches go on as they can: from the page fallback without Milvus, from chunks alone without
Postgres (no locating, no page texts). A watchdog per store notices (a check every ``interval_s``, at once
after a request failed on it: ``poke``), starts the server again on its data dir (``ensure_milvus`` /
``ensure_postgres``, which take the cross-process lock, so an ingest starting it at the same time is safe), and
hands the new address to ``on_restart``. Failed starts back off exponentially (``min_backoff_s`` doubling to
``max_backoff_s``). pymilvus clients reconnect to a server that comes back on the same port, as the catalog's
pooled connections do (one that saw an error is dropped); a new port gets a new client or catalog.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from kb_assets.services import ensure_milvus, ensure_postgres, milvus_status, postgres_status

log = logging.getLogger("kb_assets.retrieval")


class Watchdog:
    """Keeps one embedded server running: ``running()`` says whether it is, ``start()`` starts it and returns
    its address, ``on_restart(address)`` hears of each restart."""

    def __init__(
        self,
        name: str,
        running: Callable[[], bool],
        start: Callable[[], str],
        on_restart: Callable[[str], None],
        interval_s: float = 2.0,
        min_backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
    ):
        self.name = name
        self.running, self.start_server, self.on_restart = running, start, on_restart
        self.interval_s = interval_s
        self.min_backoff_s, self.max_backoff_s = min_backoff_s, max_backoff_s
        self.restarts = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"kb-{self.name.lower()}-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def poke(self) -> None:
        """Check now (a request just failed on this store)."""
        self._wake.set()

    def _run(self) -> None:
        backoff = self.min_backoff_s
        while not self._stop.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop.is_set() or self.running():
                continue
            log.warning("the embedded %s is not running: starting it again", self.name)
            try:
                address = self.start_server()
            except Exception as error:  # keep trying, further apart
                log.warning("%s did not start (%s); next try in %.1f s", self.name, error, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, self.max_backoff_s)
                continue
            backoff = self.min_backoff_s
            self.restarts += 1
            log.warning("%s serves again at %s", self.name, address.rpartition("@")[2])
            self.on_restart(address)


def milvus_watchdog(home: Path, on_restart: Callable[[str], None]) -> Watchdog:
    """The watchdog of the embedded Milvus engine under ``home``; ``on_restart`` gets its URI."""
    return Watchdog("Milvus engine", lambda: milvus_status(home)["running"], lambda: ensure_milvus(home), on_restart)


def postgres_watchdog(home: Path, binaries: str, on_restart: Callable[[str], None]) -> Watchdog:
    """The watchdog of the embedded Postgres under ``home``; ``on_restart`` gets its DSN."""
    return Watchdog(
        "Postgres", lambda: postgres_status(home)["running"], lambda: ensure_postgres(home, binaries), on_restart
    )
