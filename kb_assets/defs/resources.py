"""Dagster resources: thin wrappers of the stores layer (``kb_assets.stores``), configured from Settings.

Their configuration is what the Dagster UI shows; secrets (``SECRET_VARIABLES``) set in the environment
are passed as ``dg.EnvVar`` so the UI shows the variable's name, never its value.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from pymilvus import MilvusClient

from kb_assets.embedding.model import EmbeddingModel
from kb_assets.parsing.options import ParseOptions
from kb_assets.settings import S3Settings, Settings
from kb_assets.stores import open_catalog, open_milvus
from kb_assets.stores.catalog import Catalog
from kb_assets.stores.lake import Lake
from kb_assets.stores.models import embedding_spec, load_model
from kb_assets.stores.objects import ObjectStore
from kb_assets.stores.scratch import scratch_dir
from kb_assets.stores.vectors import EmbeddingSpec
from kb_assets.chunking.contextual import EndpointContextualizer, contextualizer_from_settings
from kb_assets.structure.endpoint import EndpointSummarizer, summarizer_from_settings


class CatalogResource(dg.ConfigurableResource):
    """Postgres, the source of record (embedded under KB_HOME unless KB_POSTGRES_URL is set)."""

    home: str
    postgres_url: str = ""
    postgres_binaries: str = "auto"

    def catalog(self) -> Catalog:
        return open_catalog(Path(self.home), self.postgres_url or None, self.postgres_binaries)


class S3Resource(dg.ConfigurableResource):
    """Credentials and endpoint for s3:// stores (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    AWS_ENDPOINT_URL, AWS_REGION), passed to the stores explicitly."""

    access_key_id: str = ""
    secret_access_key: str = ""
    endpoint_url: str = ""
    region: str = ""

    def storage_options(self) -> dict:
        return S3Settings(self.access_key_id, self.secret_access_key, self.endpoint_url, self.region).storage_options()


class ObjectStoreResource(dg.ConfigurableResource):
    """Original files and images: a folder or s3://bucket/prefix (KB_OBJECT_STORE_URL)."""

    url: str
    s3: S3Resource

    def store(self) -> ObjectStore:
        return ObjectStore(self.url, self.s3.storage_options())


class LakeResource(dg.ConfigurableResource):
    """Parquet tables per document partition: a folder or s3://bucket/prefix (KB_LAKE_URL)."""

    url: str
    s3: S3Resource

    def lake(self) -> Lake:
        return Lake(self.url, self.s3.storage_options())


class MilvusResource(dg.ConfigurableResource):
    """Milvus (embedded Milvus Lite server under KB_HOME unless KB_MILVUS_URI is set) and its alias."""

    home: str
    uri: str = ""
    alias: str = "kb_chunks"
    dense_index: str = "hnsw"           # KB_MILVUS_DENSE_INDEX: the dense index of a new collection

    def client(self) -> MilvusClient:
        return open_milvus(Path(self.home), self.uri or None)


class EmbeddingModelResource(dg.ConfigurableResource):
    """The embedding model (KB_EMBEDDING_MODEL) on its encoder (KB_ENCODER: onnx, exported once into
    KB_CACHE_DIR, or torch), loaded once per process, offline; KB_EMBEDDING_SLICE chunks are encoded
    between two publications, KB_MAX_CHUNKS_PER_DOCUMENT bounds a document."""

    model: str = "all-MiniLM-L6-v2"
    batch_size: int = 32
    encoder: str = "onnx"
    cache_dir: str = ""
    slice_size: int = 256
    max_chunks_per_document: int = 20_000

    def load(self, model_id: str | None = None) -> EmbeddingModel:
        """The configured model, or ``model_id`` (another collection's) on the same encoder."""
        return load_model(model_id or self.model, self.batch_size, self.encoder,
                          Path(self.cache_dir) if self.cache_dir else None)

    def spec(self) -> EmbeddingSpec:
        return embedding_spec(self.load())


class ParsingResource(dg.ConfigurableResource):
    """What a parse may take and do (KB_PARSE_*, KB_OCR_LANGUAGES, DOCLING_ARTIFACTS_PATH) and the
    processes it may use (KB_PARSE_WORKERS)."""

    max_file_bytes: int
    max_pages: int
    max_unpacked_bytes: int
    max_image_pixels: int
    ocr_engine: str
    ocr_languages: str
    tessdata_dir: str = ""
    docling_artifacts_path: str = ""
    scratch_root: str = ""               # KB_SCRATCH_DIR: temporary copies of sources, one folder a process
    workers: int = 1

    def options(self) -> ParseOptions:
        config = self.model_dump()
        for name in ("tessdata_dir", "docling_artifacts_path"):
            config[name] = Path(config[name]) if config[name] else None
        root = config.pop("scratch_root")
        return ParseOptions(**config, scratch_dir=scratch_dir(Path(root)) if root else None)


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


class ChunkContextResource(dg.ConfigurableResource):
    """The optional chunk contextualizer behind an OpenAI-compatible endpoint (KB_CHUNK_CONTEXT_URL,
    KB_CHUNK_CONTEXT_MODEL, KB_CHUNK_CONTEXT_API_KEY); unset: chunks are embedded without one."""

    url: str = ""
    model: str = ""
    api_key: str = ""
    timeout_seconds: float = 30.0
    concurrency: int = 4

    def contextualizer(self) -> EndpointContextualizer | None:
        """A fresh contextualizer per run: a failure stops its calls for the rest of that run only."""
        return contextualizer_from_settings(self.url, self.model, self.api_key, self.timeout_seconds,
                                            self.concurrency)


def _secret(settings: Settings, name: str, value: str):
    """A secret set in the environment goes to Dagster as dg.EnvVar (the UI shows its name only)."""
    return dg.EnvVar(name) if name in settings.secrets_from_env else value


def build_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    home = str(settings.home)
    s3 = S3Resource(access_key_id=_secret(settings, "AWS_ACCESS_KEY_ID", settings.s3.access_key_id),
                    secret_access_key=_secret(settings, "AWS_SECRET_ACCESS_KEY", settings.s3.secret_access_key),
                    endpoint_url=settings.s3.endpoint_url, region=settings.s3.region)
    parse = settings.parse
    return {
        "catalog": CatalogResource(home=home, postgres_url=_secret(settings, "KB_POSTGRES_URL", settings.postgres_url or ""),
                                   postgres_binaries=settings.postgres_binaries),
        "object_store": ObjectStoreResource(url=settings.object_store_url, s3=s3),
        "lake": LakeResource(url=settings.lake_url, s3=s3),
        "milvus": MilvusResource(home=home, uri=settings.milvus_uri or "", alias=settings.alias,
                                 dense_index=settings.milvus_dense_index),
        "embedding_model": EmbeddingModelResource(model=settings.embedding_model,
                                                  batch_size=settings.embedding_batch_size, encoder=settings.encoder,
                                                  cache_dir=str(settings.cache_dir), slice_size=settings.embedding_slice,
                                                  max_chunks_per_document=settings.max_chunks_per_document),
        "parsing": ParsingResource(max_file_bytes=parse.max_file_bytes, max_pages=parse.max_pages,
                                   max_unpacked_bytes=parse.max_unpacked_bytes,
                                   max_image_pixels=parse.max_image_pixels, ocr_engine=parse.ocr_engine,
                                   ocr_languages=parse.ocr_languages, tessdata_dir=str(parse.tessdata_dir or ""),
                                   docling_artifacts_path=str(parse.docling_artifacts_path or ""),
                                   scratch_root=str(settings.scratch_root), workers=parse.workers),
        "summarizer": SummarizerResource(url=settings.summarizer.url, model=settings.summarizer.model,
                                         api_key=_secret(settings, "KB_SUMMARIZER_API_KEY", settings.summarizer.api_key),
                                         timeout_seconds=settings.summarizer.timeout_seconds),
        "chunk_context": ChunkContextResource(
            url=settings.chunk_context.url, model=settings.chunk_context.model,
            api_key=_secret(settings, "KB_CHUNK_CONTEXT_API_KEY", settings.chunk_context.api_key),
            timeout_seconds=settings.chunk_context.timeout_seconds, concurrency=settings.chunk_context_concurrency),
    }
