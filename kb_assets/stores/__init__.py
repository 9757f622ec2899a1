"""The stores below Dagster, built from settings by one constructor: the Postgres catalog (source of
record), the object store, the lake, the Milvus vector index and the model loader.

The one path from settings to every client: the Dagster resource ``stores`` is a ``Stores``, and so are
what the command line, the sensors, the retrieval service, migration and verify use. Connections are
opened once per process and shared, so a ``Stores`` is cheap to build again; ``Stores.shared`` builds it
once per process for what runs read, so a run that ``kb-assets ingest`` executes in its process gets the
stores ingest built.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from pymilvus import MilvusClient

from kb_assets.lib.logs import quiet_libraries
from kb_assets.settings import ParseOptions, Settings
from kb_assets.settings.declare import run_values
from kb_assets.stores.catalog import Catalog
from kb_assets.stores.models import embedding_spec, load_model
from kb_assets.stores.objects import ObjectStore
from kb_assets.stores.vectors import EmbeddingSpec

quiet_libraries()  # pymilvus set its loggers' levels as it was imported: one line an outage, not a traceback a call

if TYPE_CHECKING:
    from kb_assets.chunking.contextual import EndpointContextualizer
    from kb_assets.embedding.model import EmbeddingModel
    from kb_assets.stores.lake import Lake
    from kb_assets.structure.endpoint import EndpointSummarizer


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


_RESTORED: set[tuple[Path, str]] = set()  # (home, alias) checked by this process


def restore_once(stores: Stores, client: MilvusClient) -> None:
    """``restore.restore_published`` once per process and home, under a lock shared with other processes."""
    key = (stores.settings.home.absolute(), stores.alias)
    if key in _RESTORED:
        return
    from kb_assets.services.local import locked
    from kb_assets.stores.restore import missing_published, restore_published

    if missing_published(stores.catalog, client, stores.alias) is not None:
        with locked(key[0] / "milvus-restore.lock"):
            restore_published(stores.catalog, stores.lake, client, stores.alias)
    _RESTORED.add(key)


_SHARED: OrderedDict[tuple, Stores] = OrderedDict()  # by what runs read of their settings, newest last
SHARED_AT_MOST = 8


class Stores:
    """Every store of one configuration; each is opened on first use."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.alias = settings.alias

    @classmethod
    def shared(cls, settings: Settings) -> Stores:
        """This process's stores for what runs read of ``settings`` (``run_values``), built on first use:
        ``kb-assets ingest`` and the runs it executes in its process (the resource ``stores``) share one."""
        key = run_values(settings)
        if key not in _SHARED:
            _SHARED[key] = cls(settings)
            while len(_SHARED) > SHARED_AT_MOST:
                _SHARED.popitem(last=False)
        _SHARED.move_to_end(key)
        return _SHARED[key]

    @cached_property
    def catalog(self) -> Catalog:
        s = self.settings
        return open_catalog(s.home, s.postgres_url, s.postgres_binaries)

    @cached_property
    def objects(self) -> ObjectStore:
        return ObjectStore(self.settings.object_store_url, self.settings.storage_options())

    @cached_property
    def lake(self) -> Lake:
        from kb_assets.stores.lake import Lake  # polars: ~40 MB the retrieval service needs only for lineage

        return Lake(self.settings.lake_url, self.settings.storage_options())

    @cached_property
    def milvus(self) -> MilvusClient:
        """A client of Milvus; on the embedded engine, the published collection is rebuilt from the lake
        first when the engine lacks it (``restore.py``: a Milvus Lite 3.x ``KB_HOME``, lost data)."""
        client = open_milvus(self.settings.home, self.settings.milvus_uri)
        if self.settings.milvus_uri is None:
            restore_once(self, client)
        return client

    def model(self, model_id: str | None = None) -> EmbeddingModel:
        """The embedding model (default: the configured KB_EMBEDDING_MODEL) on the configured encoder,
        loaded once per process."""
        s = self.settings
        return load_model(
            model_id or s.embedding_model, s.embedding_batch_size, s.encoder, s.cache_dir, s.encoder_threads
        )

    def embedding_spec(self) -> EmbeddingSpec:
        """The configured model's spec: what names its collection."""
        return embedding_spec(self.model())

    def milvus_at(self, uri: str) -> MilvusClient:
        """A client of a Milvus server that came back on another URI (the embedded server restarted)."""
        return open_milvus(self.settings.home, uri)

    def catalog_with_timeout(self, statement_timeout_ms: int) -> Catalog:
        """The catalog with another statement timeout (the service bounds every query)."""
        return Catalog(self.catalog.dsn, statement_timeout_ms=statement_timeout_ms)

    def catalog_at(self, dsn: str, statement_timeout_ms: int) -> Catalog:
        """After Postgres came back on another address (the embedded one restarted on another port): the catalog
        there, in place of this one's, and one with the service's statement timeout, returned."""
        self.__dict__["catalog"] = Catalog(dsn)  # Stores.catalog is a cached property
        return Catalog(dsn, statement_timeout_ms=statement_timeout_ms)

    def parse_options(self) -> ParseOptions:
        """What a parse may take and do, with this process's scratch folder."""
        from kb_assets.lib.scratch import scratch_dir

        return replace(self.settings.parse, scratch_dir=scratch_dir(self.settings.scratch_root))

    def summarizer(self) -> EndpointSummarizer | None:
        """A fresh page summarizer per run (a failure stops its calls for that run only); None: rule-based."""
        from kb_assets.structure.endpoint import summarizer_from_settings

        s = self.settings.summarizer
        return summarizer_from_settings(s.url, s.model, s.api_key, s.timeout_seconds)

    def contextualizer(self) -> EndpointContextualizer | None:
        """A fresh chunk contextualizer per run; None when none is configured."""
        from kb_assets.chunking.contextual import contextualizer_from_settings

        s = self.settings.chunk_context
        return contextualizer_from_settings(
            s.url, s.model, s.api_key, s.timeout_seconds, self.settings.chunk_context_concurrency
        )
