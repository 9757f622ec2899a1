"""Embedded services the code starts itself under a state dir (``KB_HOME``): Postgres and Milvus Lite."""

from kb_assets.services.milvus import ensure_milvus, milvus_client, milvus_status, stop_milvus
from kb_assets.services.postgres import ensure_postgres, postgres_status, stop_postgres

__all__ = [
    "ensure_postgres",
    "stop_postgres",
    "postgres_status",
    "ensure_milvus",
    "stop_milvus",
    "milvus_status",
    "milvus_client",
]
