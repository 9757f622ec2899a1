"""Postgres URLs in the forms libpq (psycopg2) and SQLAlchemy read."""

from __future__ import annotations

_POSTGRES_SCHEMES = ("postgresql", "postgres")


def libpq_url(url: str) -> str:
    """A Postgres URL as libpq (psycopg2) reads it.

    Managed Postgres consoles hand out ``postgres://`` or ``postgresql://``; SQLAlchemy users write
    ``postgresql+psycopg2://`` or ``postgresql+psycopg://``: all name the same server.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.split("+", 1)[0].lower() not in _POSTGRES_SCHEMES:
        raise ValueError(f"not a Postgres URL (postgresql://user@host:port/db): {_redacted(url)}")
    return f"postgresql://{rest}"


def sqlalchemy_postgres_url(url: str) -> str:
    """The same URL for SQLAlchemy with psycopg2, which dagster-postgres installs (SQLAlchemy 2.1 maps a
    bare ``postgresql://`` to psycopg 3, which is not installed)."""
    return "postgresql+psycopg2://" + libpq_url(url).partition("://")[2]


def _redacted(url: str) -> str:
    """A URL without its password, for error messages."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    return f"{scheme}{sep}{userinfo.split(':', 1)[0]}:***@{host}"
