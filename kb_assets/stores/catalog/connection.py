"""Connections to the catalog: a transaction per write (``connect``), a pool of read-only connections
for the retrieval service (``reader``), and the schema, applied once on first use."""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg2

from kb_assets.lib.urls import libpq_url

if TYPE_CHECKING:
    import psycopg2.pool

# sql/ stays at the top of the repository; kb_assets/sql links to it, so wheels carry the schema too
SCHEMA_FILE = Path(__file__).resolve().parents[2] / "sql" / "schema.sql"


FRESH_SECONDS = 0.2  # a connection given back this recently is used without a liveness round trip (a stop takes longer)
CONNECT_RETRY_DELAYS_S = (0.5, 1.0, 2.0, 4.0)  # a Postgres restart is waited out for ~8 s, then the error stands
_RETRY_DELAYS: contextvars.ContextVar[tuple[float, ...]] = contextvars.ContextVar("catalog_connect_retries", default=())


@contextmanager
def connect_retries(delays: tuple[float, ...] = CONNECT_RETRY_DELAYS_S) -> Iterator[None]:
    """Within this block (an ingest, its in-process runs), a connect that fails is tried again after each
    delay. Outside it (the retrieval service) a down Postgres fails at once, and the request answers 503."""
    token = _RETRY_DELAYS.set(delays)
    try:
        yield
    finally:
        _RETRY_DELAYS.reset(token)


def connect_with_retries(dsn: str, options: str) -> psycopg2.extensions.connection:
    """A new connection; a refused or timed-out connect is tried again after each delay of ``connect_retries``."""
    for delay in (*_RETRY_DELAYS.get(), None):
        try:
            return psycopg2.connect(dsn, connect_timeout=10, options=options)
        except psycopg2.OperationalError:
            if delay is None:
                raise
            time.sleep(delay)
    raise AssertionError("unreachable")


def one_row(cur) -> tuple:
    """The row of a statement that always returns exactly one (an aggregate, a function call)."""
    row = cur.fetchone()
    if row is None:
        raise RuntimeError(f"no row from a statement that always returns one: {cur.query!r}")
    return row


class CatalogConnection:
    """The DSN and statement timeout of one Postgres catalog, and its connections."""

    _pool: psycopg2.pool.ThreadedConnectionPool | None  # made by the first ``reader``

    def __init__(self, dsn: str, statement_timeout_ms: int = 30_000):
        self.dsn = libpq_url(dsn)
        self.statement_timeout_ms = statement_timeout_ms
        self._schema_applied = False

    @contextmanager
    def connect(self) -> Iterator[psycopg2.extensions.connection]:
        """A connection in a transaction: committed on success, rolled back on error. The connection is
        kept for the thread's next transaction (a new one costs ~10 ms, ~20 a document in a run)."""
        options = f"-c statement_timeout={self.statement_timeout_ms}"
        conn = self.take_connection(options)
        ok = False
        try:
            with conn:
                yield conn
            ok = True
        finally:
            self.give_back_connection(conn, options, ok)

    def _idle(self, options: str) -> list:
        """This thread's idle connections with these options (none inherited across a fork)."""
        local = self.__dict__.setdefault("_local", threading.local())
        if getattr(local, "pid", None) != os.getpid():
            local.pid, local.idle = os.getpid(), {}
        return local.idle.setdefault(options, [])

    def take_connection(self, options: str) -> psycopg2.extensions.connection:
        """An idle connection of this thread that still reaches the server, else a new one. One given back
        within ``FRESH_SECONDS`` is taken as it is; an older one is checked first (one round trip: a run
        takes a connection ~20 times a document, and the checks were 3% of a run of small notes)."""
        idle = self._idle(options)
        while idle:
            conn, returned = idle.pop()
            if not conn.closed and (time.monotonic() - returned < FRESH_SECONDS or _alive(conn)):
                return conn
            conn.close()
        return connect_with_retries(self.dsn, options=options)

    def give_back_connection(self, conn: psycopg2.extensions.connection, options: str, ok: bool = True) -> None:
        """Keep a connection that ended cleanly for the thread's next use (one per options); close the others."""
        idle = self._idle(options)
        if ok and not conn.closed and not idle:
            idle.append((conn, time.monotonic()))
        else:
            conn.close()

    def ensure_schema(self) -> None:
        """Apply ``sql/schema.sql`` (idempotent; serialized by an advisory lock)."""
        if self._schema_applied:
            return
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(4242)")
            cur.execute("SET LOCAL statement_timeout = 0")  # a catalog's one-time migration may take minutes
            cur.execute(SCHEMA_FILE.read_text())
        self._schema_applied = True

    @contextmanager
    def reader(self) -> Iterator[psycopg2.extensions.connection]:
        """A pooled read-only connection for the retrieval service (a fresh connection costs ~7 ms).

        Connecting and every statement are bounded by ``statement_timeout_ms``; a connection that saw an
        error is discarded, and one that died while idle (Postgres restarted) is replaced before use.
        """
        import psycopg2.pool

        with self.__dict__.setdefault("_pool_lock", threading.Lock()):
            pool = getattr(self, "_pool", None)
            if pool is None:
                # psycopg2 keeps at most ``minconn`` idle connections: 4 stay open, up to 32 in use at once
                pool = self._pool = psycopg2.pool.ThreadedConnectionPool(
                    4,
                    32,
                    self.dsn,
                    connect_timeout=max(1, -(-self.statement_timeout_ms // 1000)),
                    # no JIT: a search's reads are short, and compiling one costs ~1 s (locate_pages planned
                    # above jit_above_cost spent 1.07 s of 1.2 s compiling, at 41,620 chunks; docs/retrieval-log.md)
                    # nor parallel workers: each of its reads is a few thousand rows, a worker's start costs more
                    options=f"-c statement_timeout={self.statement_timeout_ms} -c jit=off "
                    "-c max_parallel_workers_per_gather=0",
                )
        conn = pool.getconn()
        for _ in range(8):  # idle connections of a server that restarted are dead: drop them, take others
            try:
                if not conn.autocommit:
                    conn.set_session(readonly=True, autocommit=True)
                if _alive(conn):
                    break
            except psycopg2.Error:
                pass
            pool.putconn(conn, close=True)
            conn = pool.getconn()
        broken = False
        try:
            yield conn
        except Exception:
            broken = True
            raise
        finally:
            pool.putconn(conn, close=broken or conn.closed != 0)

    def close_pool(self) -> None:
        with self.__dict__.setdefault("_pool_lock", threading.Lock()):
            pool = getattr(self, "_pool", None)
            if pool is not None:
                pool.closeall()
                self._pool = None


def _alive(conn) -> bool:
    """The connection still reaches its server (one round trip; a closed or broken one is not)."""
    if conn.closed:
        return False
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
        return True
    except psycopg2.Error:
        return False
