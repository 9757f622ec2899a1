"""Dagster resources: every connection and setting, built from environment variables (see Settings)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import dagster as dg
from pymilvus import MilvusClient

from kb_assets.embedding.model import EmbeddingModel, short_model_name
from kb_assets.index.collections import EmbeddingSpec
from kb_assets.services import ensure_milvus, ensure_postgres
from kb_assets.settings import Settings
from kb_assets.storage.catalog import Catalog
from kb_assets.storage.lake import Lake
from kb_assets.storage.objects import ObjectStore
from kb_assets.structure.endpoint import EndpointSummarizer, summarizer_from_settings


@lru_cache(maxsize=8)
def _catalog(home: str, postgres_url: str, binaries: str) -> Catalog:
    catalog = Catalog(postgres_url or ensure_postgres(Path(home), binaries))
    catalog.ensure_schema()
    return catalog


# pymilvus pings every 10 s; gRPC servers (milvus-lite's included) answer pings more often than every
# 5 minutes without calls with GOAWAY "too_many_pings": ping as rarely as the server accepts
GRPC_OPTIONS = {"grpc.keepalive_time_ms": 360_000, "grpc.keepalive_permit_without_calls": False}


@lru_cache(maxsize=8)
def _milvus(home: str, uri: str) -> MilvusClient:
    return MilvusClient(uri=uri or ensure_milvus(Path(home)), timeout=30, grpc_options=GRPC_OPTIONS)


@lru_cache(maxsize=4)
def _model(model_id: str, batch_size: int) -> EmbeddingModel:
    return EmbeddingModel(model_id, batch_size=batch_size)


class CatalogResource(dg.ConfigurableResource):
    """Postgres, the source of record (embedded under KB_HOME unless KB_POSTGRES_URL is set)."""

    home: str
    postgres_url: str = ""
    postgres_binaries: str = "auto"

    def catalog(self) -> Catalog:
        return _catalog(self.home, self.postgres_url, self.postgres_binaries)


class ObjectStoreResource(dg.ConfigurableResource):
    """Original files and images: a folder or s3://bucket/prefix (KB_OBJECT_STORE_URL).

    S3 credentials come from the standard AWS_* variables; AWS_ENDPOINT_URL names a non-AWS server.
    """

    url: str
    endpoint_url: str = ""

    def store(self) -> ObjectStore:
        return ObjectStore(self.url, s3_options(self.endpoint_url))


class LakeResource(dg.ConfigurableResource):
    """Parquet tables per document partition: a folder or s3://bucket/prefix (KB_LAKE_URL)."""

    url: str
    endpoint_url: str = ""

    def lake(self) -> Lake:
        return Lake(self.url, s3_options(self.endpoint_url))


def s3_options(endpoint_url: str) -> dict:
    return {"endpoint_url": endpoint_url} if endpoint_url else {}


class MilvusResource(dg.ConfigurableResource):
    """Milvus (embedded Milvus Lite server under KB_HOME unless KB_MILVUS_URI is set) and its alias."""

    home: str
    uri: str = ""
    alias: str = "kb_chunks"

    def client(self) -> MilvusClient:
        return _milvus(self.home, self.uri)


class EmbeddingModelResource(dg.ConfigurableResource):
    """The embedding model (KB_EMBEDDING_MODEL), loaded once per process, offline."""

    model: str = "all-MiniLM-L6-v2"
    batch_size: int = 32

    def load(self) -> EmbeddingModel:
        return _model(self.model, self.batch_size)

    def spec(self) -> EmbeddingSpec:
        model = self.load()
        return EmbeddingSpec(model=self.model, dimension=model.dimension, languages=tuple(model.languages),
                             short_name=short_model_name(self.model))


class SummarizerResource(dg.ConfigurableResource):
    """The optional page summarizer behind an OpenAI-compatible endpoint (KB_SUMMARIZER_URL,
    KB_SUMMARIZER_MODEL, KB_SUMMARIZER_API_KEY); unset: rule-based summaries only."""

    url: str = ""
    model: str = ""
    api_key: str = ""
    timeout_seconds: float = 10.0

    def summarizer(self) -> EndpointSummarizer | None:
        """A fresh summarizer per run: a failure stops its calls for the rest of that run only."""
        return summarizer_from_settings(self.url, self.model, self.api_key, self.timeout_seconds)


def build_resources(settings: Settings | None = None) -> dict[str, dg.ConfigurableResource]:
    settings = settings or Settings.from_env()
    home = str(settings.home)
    return {
        "catalog": CatalogResource(home=home, postgres_url=settings.postgres_url or "",
                                   postgres_binaries=settings.postgres_binaries),
        "object_store": ObjectStoreResource(url=settings.object_store_url,
                                            endpoint_url=settings.storage_options.get("endpoint_url", "")),
        "lake": LakeResource(url=settings.lake_url, endpoint_url=settings.storage_options.get("endpoint_url", "")),
        "milvus": MilvusResource(home=home, uri=settings.milvus_uri or "", alias=settings.alias),
        "embedding_model": EmbeddingModelResource(model=settings.embedding_model,
                                                  batch_size=settings.embedding_batch_size),
        "summarizer": SummarizerResource(url=settings.summarizer_url, model=settings.summarizer_model,
                                         api_key=settings.summarizer_api_key,
                                         timeout_seconds=settings.summarizer_timeout_seconds),
    }
