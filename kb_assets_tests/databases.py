"""A database of its own on the session's Postgres server, for tests that give Dagster or a profile one."""

from __future__ import annotations

import psycopg2


def database_on(dsn: str, name: str, fresh: bool = False) -> str:
    """Create database ``name`` on the server of ``dsn`` when missing (``fresh``: drop it first); its URL."""
    conn = psycopg2.connect(dsn)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            if fresh:
                cur.execute(f'DROP DATABASE IF EXISTS "{name}"')
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if cur.fetchone() is None:
                cur.execute(f'CREATE DATABASE "{name}"')
    finally:
        conn.close()
    return dsn.rsplit("/", 1)[0] + f"/{name}"
