"""Postgres, the source of record: documents, pages, PageIndex nodes and collection versions.

- ``connection.py``: the connections (a transaction per write, a read-only pool for the service) and
  the schema (``sql/schema.sql``, applied idempotently on first use);
- ``writes.py``: registrations, updates, pages, nodes, the summary cache, collections, tombstones;
- ``reads.py``: plain reads; ``search_reads.py``: the pooled, statement-timeout-bounded queries of the
  retrieval service; ``locating.py``: the locating index (pages by their titles', summaries' and keywords' words);
- ``records.py``: the document row;
- ``locks.py``: advisory locks that serialize writers of one document, and registrations.

All SQL of the project (but the embedded Postgres's own administration) is in this package.
"""

from __future__ import annotations

from kb_assets.stores.catalog.connection import SCHEMA_FILE
from kb_assets.stores.catalog.locating import CatalogLocating
from kb_assets.stores.catalog.locks import CatalogLocks
from kb_assets.stores.catalog.reads import CatalogReads
from kb_assets.stores.catalog.records import DOCUMENT_COLUMNS, Document
from kb_assets.stores.catalog.search_reads import CatalogSearchReads
from kb_assets.stores.catalog.writes import CatalogWrites

__all__ = ["Catalog", "Document", "DOCUMENT_COLUMNS", "SCHEMA_FILE"]


class Catalog(CatalogWrites, CatalogReads, CatalogSearchReads, CatalogLocating, CatalogLocks):
    """Connections and queries of the Postgres source of record: ``Catalog(dsn, statement_timeout_ms)``."""
