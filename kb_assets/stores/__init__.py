"""The stores below Dagster, built from settings by one constructor: the Postgres catalog (source of
record), the object store, the lake, the Milvus vector index and the model loader.

Dagster resources wrap these; the command line, the retrieval service, migration and verify use them
directly. Connections are opened once per process and shared, so a ``Stores`` is cheap to build again.
"""

from __future__ import annotations

from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from pymilvus import MilvusClient

from kb_assets.settings import Settings
from kb_assets.stores.catalog import Catalog
from kb_assets.stores.models import load_model
from kb_assets.stores.objects import ObjectStore

if TYPE_CHECKING:
    from kb_assets.stores.lake import Lake


@lru_cache(maxsize=8)
def open_catalog(home: Path, postgres_url: str | None, binaries: str = "auto") -> Catalog:
    """The catalog on KB_POSTGRES_URL, else on the embedded Postgres under ``home`` (started on demand)."""
    from kb_assets.services import ensure_postgres

    catalog = Catalog(postgres_url or ensure_postgres(home, binaries))
    catalog.ensure_schema()
    return catalog


@lru_cache(maxsize=8)
def open_milvus(home: Path, uri: str | None) -> MilvusClient:
    """A client of KB_MILVUS_URI, else of the embedded Milvus Lite server under ``home`` (started on demand)."""
    from kb_assets.services import ensure_milvus, milvus_client

    return milvus_client(uri or ensure_milvus(home))


class Stores:
    """Every store of one configuration; each is opened on first use."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.alias = settings.alias

    @cached_property
    def catalog(self) -> Catalog:
        s = self.settings
        return open_catalog(s.home, s.postgres_url, s.postgres_binaries)

    @cached_property
    def objects(self) -> ObjectStore:
        return ObjectStore(self.settings.object_store_url, self.settings.storage_options())

    @cached_property
    def lake(self) -> "Lake":
        from kb_assets.stores.lake import Lake   # polars: ~40 MB the retrieval service needs only for lineage

        return Lake(self.settings.lake_url, self.settings.storage_options())

    @cached_property
    def milvus(self) -> MilvusClient:
        return open_milvus(self.settings.home, self.settings.milvus_uri)

    def model(self, model_id: str | None = None):
        """The embedding model (default: the configured KB_EMBEDDING_MODEL) on the configured encoder,
        loaded once per process."""
        s = self.settings
        return load_model(model_id or s.embedding_model, s.embedding_batch_size, s.encoder, s.cache_dir,
                          s.encoder_threads)

