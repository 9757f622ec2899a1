"""The catalog's rows as Python values: the document, the collection versions, counts per knowledge base
and root (pages and PageIndex nodes are rows by column: ``kb_assets/lib/rows.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from kb_assets.lib.json_types import JsonObject

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


COLLECTION_COLUMNS = (
    "name",
    "alias",
    "schema_version",
    "model",
    "dimension",
    "languages",
    "state",
    "entity_count",
    "created_at",
    "published_at",
)


@dataclass(frozen=True)
class CollectionVersion:
    """A collection of one embedding spec (``collection_versions``)."""

    name: str
    alias: str
    schema_version: int
    model: str
    dimension: int
    languages: list[str]
    state: str  # building | published | retired | failed
    entity_count: int | None
    created_at: datetime
    published_at: datetime | None


@dataclass(frozen=True)
class KnowledgeBaseCount:
    """A knowledge base's documents by status (deleted ones not counted in ``documents``)."""

    knowledge_base_id: str
    documents: int
    published: int
    failed: int
    pending: int


@dataclass(frozen=True)
class RootSummary:
    """How many documents a knowledge base holds from one source root, by status."""

    knowledge_base_id: str
    source_root: str
    documents: dict[str, int]

    def as_json(self) -> JsonObject:
        return {"knowledgeBaseId": self.knowledge_base_id, "sourceRoot": self.source_root, "documents": self.documents}
