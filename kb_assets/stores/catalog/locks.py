"""Advisory locks in the catalog: what makes concurrent ingests, sensor ticks and runs on the same
documents safe. A writer holds a document's lock while it writes that document's outputs (one step
of one document); a second writer of the same document waits, then finds the outputs current and
skips. Registration (scan, register, add partitions, purge) is serialized per catalog, and a whole
ingest per knowledge base.

Session-level locks on a connection of their own, without a statement timeout (a wait may last as
long as the other writer's step); closing the connection releases the lock, also when the process dies.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kb_assets.stores.catalog.connection import CatalogConnection, connect_with_retries, one_row

DOCUMENT_LOCKS = 0x6B620001  # first key of a document's lock (the second: a hash of its id)
REGISTRATION_LOCK = 0x6B620002
INGEST_LOCKS = 0x6B620003  # first key of a knowledge base's ingest lock


def lock_key(name: str) -> int:
    """A signed 32-bit key of a name (collisions only make unrelated documents wait for each other)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big", signed=True)


class CatalogLocks(CatalogConnection):
    @contextmanager
    def _advisory_lock(self, space: int, key: int, waiting: Callable[[], None] | None = None) -> Iterator[None]:
        """Hold the lock (``waiting()`` is called first when another holder makes this one wait)."""
        conn = connect_with_retries(self.dsn, options="-c statement_timeout=0")
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SELECT pg_try_advisory_lock(%s, %s)", (space, key))
                if not one_row(cur)[0]:
                    if waiting is not None:
                        waiting()
                    cur.execute("SELECT pg_advisory_lock(%s, %s)", (space, key))
            yield
        finally:
            conn.close()

    @contextmanager
    def ingest_lock(self, knowledge_base_id: str, waiting: Callable[[], None] | None = None) -> Iterator[None]:
        """Hold for a whole ingest of a knowledge base: a second ingest of it waits, then finds what the
        first one finished current and skips it."""
        with self._advisory_lock(INGEST_LOCKS, lock_key(knowledge_base_id), waiting):
            yield

    @contextmanager
    def document_lock(self, document_id: str) -> Iterator[None]:
        """Hold the document's lock while writing its outputs; another writer of it waits."""
        with self._advisory_lock(DOCUMENT_LOCKS, lock_key(document_id)):
            yield

    @contextmanager
    def registration_lock(self) -> Iterator[None]:
        """Hold while registering scanned files, adding their partitions and purging: one ingest or
        sensor tick at a time (two would add the same partition keys)."""
        with self._advisory_lock(REGISTRATION_LOCK, 0):
            yield
