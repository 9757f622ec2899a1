"""Dagster instance storage on Postgres that accepts every Postgres URL form.

``DAGSTER_POSTGRES_URL`` comes from a managed Postgres console as ``postgres://`` or ``postgresql://``;
SQLAlchemy 2.1 maps a bare ``postgresql://`` to psycopg 3, which dagster-postgres does not install,
and no longer knows ``postgres://`` at all. The instance configs in ``deploy/`` name this class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster_postgres

from kb_assets.lib.urls import sqlalchemy_postgres_url


class PostgresStorage(dagster_postgres.DagsterPostgresStorage):
    """``DagsterPostgresStorage`` with the URL (or ``postgres_db.scheme``) routed to psycopg2."""

    @classmethod
    def from_config_value(  # type: ignore[override]  # as dagster-postgres's: its own class, not cls
        cls, inst_data: Any, config_value: Mapping[str, Any]
    ) -> dagster_postgres.DagsterPostgresStorage:
        config: Any = dict(config_value)  # Dagster's PostgresStorageConfig, a TypedDict of its private API
        if config.get("postgres_url"):
            config["postgres_url"] = sqlalchemy_postgres_url(config["postgres_url"])
        elif config.get("postgres_db"):
            db = dict(config["postgres_db"])
            db["scheme"] = sqlalchemy_postgres_url(f"{db.get('scheme') or 'postgresql'}://").partition("://")[0]
            config["postgres_db"] = db
        return super().from_config_value(inst_data, config)
