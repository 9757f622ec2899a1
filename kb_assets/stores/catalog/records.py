"""The catalog's document row as a Python value."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

DOCUMENT_COLUMNS = (
    "document_id",
    "knowledge_base_id",
    "source_path",
    "source_uri",
    "title",
    "version",
    "size_bytes",
    "mime",
    "source_kind",
    "object_key",
    "status",
    "error",
    "page_count",
    "chunk_count",
    "published_version",
    "collection_name",
    "last_run_id",
    "updated_at",
    "step_versions",
    "failed_step",
    "term_count",
    "source_root",
    "partition_key",
    "published_run_id",
    "metadata",
)


@dataclass
class Document:
    document_id: str
    knowledge_base_id: str
    source_path: str
    source_uri: str
    title: str | None
    version: str | None
    size_bytes: int | None
    mime: str | None
    source_kind: str | None
    object_key: str | None
    status: str
    error: str | None
    page_count: int | None
    chunk_count: int | None
    published_version: str | None
    collection_name: str | None
    last_run_id: str | None
    updated_at: datetime | None = None  # timestamptz
    step_versions: dict | None = None  # step -> version of its current output (kb_assets.pipeline.versions)
    failed_step: str | None = None  # "step@version" a failed document failed at
    term_count: int | None = None  # its published chunks' length in BM25 terms; None: no statistics kept
    source_root: str = ""  # the canonical folder or s3:// prefix its source_path is relative to
    partition_key: str | None = None  # its readable Dagster partition key (kb_assets.keys)
    published_run_id: str | None = None  # the run that last wrote its entities into the collection
    metadata: dict | None = None  # title, organisation, period, kind read from content (kb_assets.structure.metadata)

    @property
    def serves_last_good_version(self) -> bool:
        """A newer version of the file failed (or is still pending) while an older one stays published."""
        return bool(self.published_version) and self.published_version != self.version
