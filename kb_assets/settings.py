"""Every setting of kb-assets, read once from environment variables.

Unset means the embedded default: all state under one directory, ``KB_HOME`` (default ``./.kb``).
Resources and the command line are built from a :class:`Settings`; nothing deeper reads the environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    home: Path
    postgres_url: str | None = None        # KB_POSTGRES_URL; None starts the embedded Postgres
    milvus_uri: str | None = None          # KB_MILVUS_URI; None starts the embedded Milvus Lite server
    object_store_url: str = ""             # KB_OBJECT_STORE_URL: a folder or s3://bucket/prefix
    lake_url: str = ""                     # KB_LAKE_URL: a folder or s3://bucket/prefix
    embedding_model: str = "all-MiniLM-L6-v2"  # KB_EMBEDDING_MODEL: a model id or a local path
    embedding_batch_size: int = 32         # KB_EMBEDDING_BATCH_SIZE
    alias: str = "kb_chunks"               # KB_MILVUS_ALIAS
    dense_weight: float = 0.82             # KB_DENSE_WEIGHT
    lexical_weight: float = 0.18           # KB_LEXICAL_WEIGHT
    exact_boost: float = 0.05              # KB_EXACT_BOOST
    run_batch_size: int = 50               # KB_RUN_BATCH_SIZE: documents per Dagster run
    api_keys: str = ""                     # KB_API_KEYS: "key1=kbA,kbB;key2=*"
    storage_options: dict = field(default_factory=dict)  # from AWS_* for s3:// URLs
    watch: str = ""                        # KB_WATCH: "kbA=/path/a;kbB=/path/b" folders the sensor keeps current
    watch_interval_seconds: int = 60       # KB_WATCH_INTERVAL_SECONDS: sensor tick interval
    refresh_cron: str = "0 * * * *"        # KB_REFRESH_CRON: the scheduled incremental update
    parse_max_file_bytes: int = 200 * 1024 * 1024   # KB_PARSE_MAX_FILE_BYTES: larger files are refused
    parse_max_pages: int = 5000            # KB_PARSE_MAX_PAGES: PDFs with more pages are refused
    parse_max_unpacked_bytes: int = 1024 ** 3  # KB_PARSE_MAX_UNPACKED_BYTES: DOCX/PPTX/XLSX unpacked size
    ocr_engine: str = "rapidocr"           # KB_OCR_ENGINE: rapidocr (models in its wheel) or tesseract
    ocr_languages: str = "eng+chi_sim"     # KB_OCR_LANGUAGES: tesseract's languages (rapidocr reads zh/ja/en/... at once)
    docling_artifacts_path: str | None = None  # DOCLING_ARTIFACTS_PATH: docling's layout/table models
    summarizer_url: str = ""               # KB_SUMMARIZER_URL: OpenAI-compatible API base; unset: rule-based summaries
    summarizer_model: str = ""             # KB_SUMMARIZER_MODEL
    summarizer_api_key: str = ""           # KB_SUMMARIZER_API_KEY (optional)
    summarizer_timeout_seconds: float = 10.0  # KB_SUMMARIZER_TIMEOUT_SECONDS: per page request

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Settings":
        env = dict(os.environ if env is None else env)
        home = Path(env.get("KB_HOME") or "./.kb").expanduser().resolve()
        return cls(
            home=home,
            postgres_url=env.get("KB_POSTGRES_URL") or None,
            milvus_uri=env.get("KB_MILVUS_URI") or None,
            object_store_url=env.get("KB_OBJECT_STORE_URL") or str(home / "objects"),
            lake_url=env.get("KB_LAKE_URL") or str(home / "lake"),
            embedding_model=env.get("KB_EMBEDDING_MODEL") or cls.embedding_model,
            embedding_batch_size=int(env.get("KB_EMBEDDING_BATCH_SIZE") or cls.embedding_batch_size),
            alias=env.get("KB_MILVUS_ALIAS") or cls.alias,
            dense_weight=float(env.get("KB_DENSE_WEIGHT") or cls.dense_weight),
            lexical_weight=float(env.get("KB_LEXICAL_WEIGHT") or cls.lexical_weight),
            exact_boost=float(env.get("KB_EXACT_BOOST") or cls.exact_boost),
            run_batch_size=int(env.get("KB_RUN_BATCH_SIZE") or cls.run_batch_size),
            api_keys=env.get("KB_API_KEYS") or "",
            storage_options=_s3_storage_options(env),
            watch=env.get("KB_WATCH") or "",
            watch_interval_seconds=int(env.get("KB_WATCH_INTERVAL_SECONDS") or cls.watch_interval_seconds),
            refresh_cron=env.get("KB_REFRESH_CRON") or cls.refresh_cron,
            parse_max_file_bytes=int(env.get("KB_PARSE_MAX_FILE_BYTES") or cls.parse_max_file_bytes),
            parse_max_pages=int(env.get("KB_PARSE_MAX_PAGES") or cls.parse_max_pages),
            parse_max_unpacked_bytes=int(env.get("KB_PARSE_MAX_UNPACKED_BYTES") or cls.parse_max_unpacked_bytes),
            ocr_engine=env.get("KB_OCR_ENGINE") or cls.ocr_engine,
            ocr_languages=env.get("KB_OCR_LANGUAGES") or cls.ocr_languages,
            docling_artifacts_path=env.get("DOCLING_ARTIFACTS_PATH") or None,
            summarizer_url=env.get("KB_SUMMARIZER_URL") or "",
            summarizer_model=env.get("KB_SUMMARIZER_MODEL") or "",
            summarizer_api_key=env.get("KB_SUMMARIZER_API_KEY") or "",
            summarizer_timeout_seconds=float(env.get("KB_SUMMARIZER_TIMEOUT_SECONDS")
                                             or cls.summarizer_timeout_seconds),
        )

    @property
    def dagster_home(self) -> Path:
        return self.home / "dagster"

    def watched_folders(self) -> list[tuple[str, Path]]:
        """(knowledge base, folder) pairs of KB_WATCH."""
        pairs = []
        for item in filter(None, (part.strip() for part in self.watch.split(";"))):
            kb, _, folder = item.partition("=")
            if not kb.strip() or not folder.strip():
                raise ValueError(f"KB_WATCH entry {item!r}: expected KB=FOLDER")
            pairs.append((kb.strip(), Path(folder.strip()).expanduser()))
        return pairs


def _s3_storage_options(env: dict[str, str]) -> dict:
    """fsspec/s3fs options from the standard AWS_* variables (used only for s3:// URLs)."""
    options: dict = {}
    if env.get("AWS_ACCESS_KEY_ID"):
        options["key"] = env["AWS_ACCESS_KEY_ID"]
        options["secret"] = env.get("AWS_SECRET_ACCESS_KEY", "")
    if env.get("AWS_ENDPOINT_URL"):
        options["endpoint_url"] = env["AWS_ENDPOINT_URL"]
    if env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"):
        options["client_kwargs"] = {"region_name": env.get("AWS_REGION") or env["AWS_DEFAULT_REGION"]}
    return options
