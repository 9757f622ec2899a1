"""The service heals the embedded Milvus Lite server it depends on.

When ``KB_MILVUS_URI`` is unset, ``kb-assets serve`` reads the Milvus Lite server it (or an ingest)
started under ``KB_HOME``. If that process dies, searches answer from the page fallback; the watchdog
notices (a check every ``interval_s``, at once after a failed search: ``poke``), starts the server
again on its data dir (``services.ensure_milvus``, which takes the cross-process lock, so an ingest
starting it at the same time is safe), and hands the new URI to ``on_restart``. Failed starts back
off exponentially (``min_backoff_s`` doubling to ``max_backoff_s``). pymilvus clients reconnect to a
server that comes back on the same port; a new port gets a new client.

Postgres needs no watchdog: pooled connections that fail are dropped and the next request connects
again (a restarted server is reached as soon as it accepts connections).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from kb_assets.services import ensure_milvus, milvus_status

log = logging.getLogger("kb_assets.retrieval")


class MilvusWatchdog:
    def __init__(
        self,
        home: Path,
        on_restart: Callable[[str], None],
        interval_s: float = 2.0,
        min_backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
    ):
        self.home = home
        self.on_restart = on_restart
        self.interval_s = interval_s
        self.min_backoff_s, self.max_backoff_s = min_backoff_s, max_backoff_s
        self.restarts = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kb-milvus-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def poke(self) -> None:
        """Check now (a search just failed)."""
        self._wake.set()

    def _run(self) -> None:
        backoff = self.min_backoff_s
        while not self._stop.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop.is_set() or milvus_status(self.home)["running"]:
                continue
            log.warning("the Milvus Lite server under %s is not running: starting it again", self.home)
            try:
                uri = ensure_milvus(self.home)
            except Exception as error:  # keep trying, further apart
                log.warning("Milvus Lite did not start (%s); next try in %.1f s", error, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, self.max_backoff_s)
                continue
            backoff = self.min_backoff_s
            self.restarts += 1
            log.warning("Milvus Lite serves again at %s", uri)
            self.on_restart(uri)
