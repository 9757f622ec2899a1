"""What ``kb-assets ingest``, the watched-folder sensor and the schedule share: scan folders, register
new and changed files as pending documents, cut the changed partitions into run ranges, and find the
documents whose files are gone.

Plain Python over the stores; nothing here knows the Dagster definitions.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from kb_assets.stores.catalog import Catalog, Document

IGNORED_NAMES = {".DS_Store", "Thumbs.db"}


def document_id_for(knowledge_base_id: str, source_path: str) -> str:
    """Stable per (knowledge base, source path relative to the ingested folder)."""
    digest = hashlib.sha256(f"{knowledge_base_id}\x00{source_path}".encode()).hexdigest()
    return f"doc-{digest[:24]}"


def sha256_bytes(data: bytes) -> str:
    """A document version: the sha256 of its bytes."""
    return hashlib.sha256(data).hexdigest()


@dataclass
class SourceFile:
    path: Path
    source_path: str          # relative to the folder given to ingest
    document_id: str
    sha256: str
    size: int


def scan(paths: list[Path], knowledge_base_id: str) -> tuple[list[SourceFile], list[Path]]:
    """Files under the given paths (hidden files skipped) with their ids and hashes, and the roots."""
    files, roots = [], []
    for given in paths:
        given = given.expanduser().resolve()
        if not given.exists():
            raise FileNotFoundError(f"{given}: no such file or folder")
        root = given if given.is_dir() else given.parent
        roots.append(given)
        candidates = sorted(given.rglob("*")) if given.is_dir() else [given]
        for path in candidates:
            relative = path.relative_to(root)
            if not path.is_file() or path.name in IGNORED_NAMES or any(p.startswith(".") for p in relative.parts):
                continue
            data = path.read_bytes()
            source_path = relative.as_posix()
            files.append(SourceFile(path, source_path, document_id_for(knowledge_base_id, source_path),
                                    sha256_bytes(data), len(data)))
    return files, roots


@dataclass
class Changes:
    """What a scan found against the catalog; changed and new documents are registered pending."""

    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def to_run(self) -> list[str]:
        return [*self.new, *self.changed]


def register_changes(files: list[SourceFile], knowledge_base_id: str, catalog: Catalog) -> Changes:
    """Compare scanned files with the catalog and register the new and changed ones (status pending)."""
    known = catalog.get_documents([f.document_id for f in files])
    changes = Changes()
    with catalog.connect() as conn:
        for source in files:
            previous = known.get(source.document_id)
            if previous is None or previous.status == "deleted" or (
                    previous.status == "pending" and previous.version == source.sha256 and not previous.published_version):
                changes.new.append(source.document_id)    # (or registered by an ingest still running)
            elif previous.version == source.sha256 and previous.status == "published":
                changes.unchanged.append(source.document_id)
                continue
            else:
                changes.changed.append(source.document_id)
            catalog.register_document(conn, document_id=source.document_id, knowledge_base_id=knowledge_base_id,
                                      source_path=source.source_path, source_uri=str(source.path),
                                      version=source.sha256, size_bytes=source.size)
    return changes


def contiguous_ranges(ordered_keys: list[str], selected: set[str], max_size: int) -> list[tuple[str, str, int]]:
    """Runs of selected keys that are adjacent in partition order, cut at max_size: (start, end, count)."""
    ranges, current = [], []
    for key in ordered_keys:
        if key in selected and len(current) < max_size:
            current.append(key)
            continue
        if current:
            ranges.append((current[0], current[-1], len(current)))
        current = [key] if key in selected else []
    if current:
        ranges.append((current[0], current[-1], len(current)))
    return ranges


# partitions: one per document, or hash buckets of document ids (KB_PARTITIONING) ------------------
BUCKET_PREFIX = "bucket-"


def bucket_count(partitioning: str) -> int | None:
    """N of ``buckets:N``; None for ``documents``."""
    kind, _, count = partitioning.partition(":")
    return int(count) if kind == "buckets" else None


def partition_key(document_id: str, partitioning: str) -> str:
    """The partition that holds a document: the document itself, or its hash bucket
    (``bucket-017-of-256``; the key says how many buckets, so a run knows its documents without settings)."""
    count = bucket_count(partitioning)
    if count is None:
        return document_id
    bucket = int.from_bytes(hashlib.sha256(document_id.encode()).digest()[:8], "big") % count
    return f"{BUCKET_PREFIX}{bucket:0{len(str(count - 1))}d}-of-{count}"


def partition_keys(document_ids: list[str], partitioning: str) -> list[str]:
    """The partitions of these documents, each once, in the documents' order."""
    return list(dict.fromkeys(partition_key(d, partitioning) for d in document_ids))


def is_bucket(key: str) -> bool:
    return key.startswith(BUCKET_PREFIX) and "-of-" in key


def run_documents(keys: list[str], run_id: str, catalog: Catalog) -> list[Document]:
    """The documents a run over these partitions works on, in partition order: a document key names
    its document; a bucket key names the bucket's documents that are pending or that this run has
    touched already (a bucket's run processes only its changed documents)."""
    documents = [key for key in keys if not is_bucket(key)]
    found = catalog.get_documents(documents)
    docs = [found[key] for key in documents if key in found]
    buckets = [key for key in keys if is_bucket(key)]
    if buckets:
        wanted, counts = set(buckets), {int(key.rsplit("-of-", 1)[1]) for key in buckets}
        docs += [doc for doc in catalog.documents_of_run(run_id)
                 if any(partition_key(doc.document_id, f"buckets:{n}") in wanted for n in counts)]
    return docs


def range_tags(start: str, end: str, knowledge_base_id: str) -> dict[str, str]:
    """The tags of a run over a range of document partitions."""
    return {"dagster/asset_partition_range_start": start, "dagster/asset_partition_range_end": end,
            "kb/knowledge_base_id": knowledge_base_id}


def gone_documents(knowledge_base_id: str, roots: list[Path], present: set[str], catalog: Catalog) -> list[Document]:
    """Documents of the knowledge base whose source lay under the given roots and is gone."""
    gone = []
    for doc in catalog.list_documents([knowledge_base_id]):
        if doc.status == "deleted" or doc.document_id in present:
            continue
        source = Path(doc.source_uri)
        if any(source == root or root in source.parents for root in roots):
            gone.append(doc)
    return gone
