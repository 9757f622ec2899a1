"""Logging that an operator can read: one line when a store goes away and one when it is back (with how
long it was away), not a line (and a client library's traceback) for every request that met the outage;
libraries' own error logs and tracebacks only under debug logging (``kb-assets --debug``)."""

from __future__ import annotations

import logging
import threading
import time

# loggers of client libraries that log a traceback for every failed call (pymilvus) and set their own
# handlers and levels when imported
CHATTY = ("pymilvus", "pymilvus.milvus_client", "pymilvus.bulk_writer", "pymilvus.decorators")


_DEBUG = [False]  # kb-assets --debug (process-wide, like logging itself)


def quiet_libraries(debug: bool | None = None) -> None:
    """Client libraries' own logs: everything under debug, else nothing (their failures reach the person
    as the command's or the service's own one-line messages). pymilvus sets its levels when it is
    imported, so the stores call this again once they have imported it."""
    if debug is not None:
        _DEBUG[0] = debug
    for name in CHATTY:
        logging.getLogger(name).setLevel(logging.DEBUG if _DEBUG[0] else logging.CRITICAL + 1)


class Outages:
    """Which stores are down, since when: ``failed`` logs the first failure of an outage, ``answered`` its
    end; the failures between are debug lines."""

    def __init__(self, log: logging.Logger):
        self.log = log
        self._down: dict[str, float] = {}
        self._lock = threading.Lock()

    def failed(self, store: str, reason: str) -> None:
        with self._lock:
            first = store not in self._down
            self._down.setdefault(store, time.monotonic())
        if first:
            self.log.warning("%s is unavailable: %s", store, reason)
        else:
            self.log.debug("%s still unavailable: %s", store, reason)

    def answered(self, store: str) -> None:
        with self._lock:
            since = self._down.pop(store, None)
        if since is not None:
            self.log.warning("%s is back after %.1f s", store, time.monotonic() - since)

    def down(self) -> list[str]:
        with self._lock:
            return sorted(self._down)
