"""What ``kb-assets ingest``, the watched-folder sensor and the schedule share: scan sources (local folders
and s3:// prefixes), register new and changed files as pending documents, find from which step each
document is stale (``kb_assets.versions``), cut the stale partitions into runs that start at that step,
and find the documents whose files are gone.

A scan treats every entry on its own: an entry that cannot be named (a file name that is not UTF-8),
stat-ed or read, a symlink that leaves the scanned folder or loops, a FIFO, socket or device becomes a
:class:`ScanFailure` with the reason, and the scan goes on. Symlinks inside the folder are followed.

Plain Python over the stores; nothing here knows the Dagster definitions.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path

from kb_assets.stores.catalog import Catalog, Document
from kb_assets.stores.paths import is_s3, list_objects, source_path
from kb_assets.versions import Staleness, staleness

IGNORED_NAMES = {".DS_Store", "Thumbs.db"}
READ_CHUNK = 1 << 20
NOT_REGULAR = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def document_id_for(knowledge_base_id: str, source_path: str) -> str:
    """Stable per (knowledge base, source path relative to the ingested folder or S3 prefix)."""
    digest = hashlib.sha256(f"{knowledge_base_id}\x00{source_path}".encode()).hexdigest()
    return f"doc-{digest[:24]}"


def sha256_bytes(data: bytes) -> str:
    """A document version: the sha256 of its bytes."""
    return hashlib.sha256(data).hexdigest()


def sha256_stream(stream) -> tuple[str, int]:
    """The sha256 and size of a binary stream, read in 1 MiB pieces."""
    digest, size = hashlib.sha256(), 0
    while piece := stream.read(READ_CHUNK):
        digest.update(piece)
        size += len(piece)
    return digest.hexdigest(), size


@dataclass
class SourceFile:
    uri: str                  # what raw_files reads: an absolute local path or an s3:// URI
    source_path: str          # relative to the folder (or S3 prefix) given to ingest
    document_id: str
    sha256: str
    size: int
    etag: str = ""            # s3://: the ETag whose bytes this scan hashed (remembered for the next scan)


@dataclass
class ScanFailure:
    """An entry the scan could not take; the others go on."""

    source_uri: str                  # its path; bytes that are not UTF-8 are shown escaped (\xff)
    reason: str
    document_id: str | None = None   # when it can be named: its document is not purged for it

    def as_json(self) -> dict:
        return {"documentId": self.document_id, "sourceUri": self.source_uri, "reason": self.reason}


@dataclass
class Scan:
    files: list[SourceFile] = field(default_factory=list)
    roots: list[Path | str] = field(default_factory=list)     # local folders (Path) or s3:// prefixes (str)
    failures: list[ScanFailure] = field(default_factory=list)

    @property
    def present(self) -> set[str]:
        """Documents whose source is still there (read, or there but unreadable this time)."""
        return {f.document_id for f in self.files} | {f.document_id for f in self.failures if f.document_id}


def scan(sources: list[Path | str], knowledge_base_id: str, catalog: Catalog | None = None,
         storage_options: dict | None = None) -> Scan:
    """Files under the given folders, files or s3:// prefixes (hidden entries skipped) with their ids and
    hashes. A root that does not exist is an error (its documents would otherwise all be purged); every
    entry below a root succeeds or fails on its own. S3 sources need the ``catalog`` (ETags of what was
    hashed before) and the AWS ``storage_options``."""
    result = Scan()
    for source in sources:
        if is_s3(str(source)):
            _scan_bucket(str(source), knowledge_base_id, catalog, storage_options, result)
        else:
            _scan_folder(Path(source), knowledge_base_id, result)
    return result


# local folders --------------------------------------------------------------------------------------
def _scan_folder(given: Path, knowledge_base_id: str, result: Scan) -> None:
    given = Path(os.path.abspath(given.expanduser()))
    if os.path.isdir(given):
        root = given.resolve()
        result.roots.append(root)
        _walk(root, root, frozenset({root}), knowledge_base_id, result)
    elif os.path.lexists(given):
        root = given.parent.resolve()   # a file named on its own: read even through a symlink (it was named)
        result.roots.append(root / given.name)
        _take_file(root, root / given.name, knowledge_base_id, result)
    else:
        raise FileNotFoundError(f"{given}: no such file or folder")


def _walk(root: Path, folder: Path, ancestors: frozenset[Path], knowledge_base_id: str, result: Scan) -> None:
    """Every entry below ``folder`` in name order; ``ancestors`` are the real paths of the folders above
    (a symlink to one of them is a loop)."""
    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except OSError as error:
        result.failures.append(ScanFailure(_shown(folder), f"cannot list folder: {_os_reason(error)}"))
        return
    for entry in entries:
        path = folder / entry.name
        if entry.name in IGNORED_NAMES or entry.name.startswith("."):
            continue
        if not _is_utf8(entry.name):
            what = "folder" if entry.is_dir(follow_symlinks=False) else "file"
            result.failures.append(ScanFailure(_shown(path), f"{what} name is not valid UTF-8: rename it"))
            continue
        try:
            info = os.stat(path)   # follows symlinks: a loop or a dangling link fails here
        except OSError as error:
            if not _vanished(path, error):
                result.failures.append(_link_failure(root, path, error, knowledge_base_id))
            continue
        real = Path(os.path.realpath(path))
        if entry.is_symlink() and not (real == root or root in real.parents):
            result.failures.append(ScanFailure(
                _shown(path), f"symlink leaves the ingested folder ({_shown(Path(os.readlink(path)))}): not followed",
                _document_id(root, path, knowledge_base_id)))
            continue
        if stat.S_ISDIR(info.st_mode):
            if real in ancestors:
                result.failures.append(ScanFailure(_shown(path), f"symlink loop: points to {_shown(real)}, "
                                                                 "a folder above it"))
            else:
                _walk(root, path, ancestors | {real}, knowledge_base_id, result)
            continue
        _take_file(root, path, knowledge_base_id, result, info)


def _take_file(root: Path, path: Path, knowledge_base_id: str, result: Scan, info: os.stat_result | None = None) -> None:
    """Hash one file (or record why it cannot be read)."""
    relative = path.relative_to(root).as_posix()
    if not _is_utf8(relative):
        result.failures.append(ScanFailure(_shown(path), "file name is not valid UTF-8: rename it"))
        return
    document_id = document_id_for(knowledge_base_id, relative)
    try:
        info = info or os.stat(path)
        kind = next((name for test, name in NOT_REGULAR if test(info.st_mode)), None)
        if kind:
            raise _NotRegular(kind)
        # O_NONBLOCK: a FIFO put in its place meanwhile cannot block the scan; fstat checks what was opened
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as stream:
            kind = next((name for test, name in NOT_REGULAR if test(os.fstat(fd).st_mode)), None)
            if kind:
                raise _NotRegular(kind)
            sha, size = sha256_stream(stream)
    except _NotRegular as error:
        result.failures.append(ScanFailure(_shown(path), f"not a regular file ({error}): skipped", document_id))
        return
    except OSError as error:
        if not _vanished(path, error):
            result.failures.append(_link_failure(root, path, error, knowledge_base_id)
                                   if error.errno in (errno.ELOOP, errno.ENOENT)
                                   else ScanFailure(_shown(path), f"cannot read: {_os_reason(error)}", document_id))
        return
    result.files.append(SourceFile(str(path), relative, document_id, sha, size))


class _NotRegular(Exception):
    pass


def _link_failure(root: Path, path: Path, error: OSError, knowledge_base_id: str) -> ScanFailure:
    """Why stat (which follows symlinks) failed, said for what the entry is."""
    document_id = _document_id(root, path, knowledge_base_id)
    if error.errno == errno.ELOOP:
        return ScanFailure(_shown(path), "symlink loop: it never reaches a file", document_id)
    if error.errno == errno.ENOENT and os.path.islink(path):
        return ScanFailure(_shown(path), f"broken symlink: {_shown(Path(os.readlink(path)))} does not exist",
                           document_id)
    return ScanFailure(_shown(path), f"cannot stat: {_os_reason(error)}", document_id)


def _vanished(path: Path, error: OSError) -> bool:
    """Deleted between the listing and the read: gone, not a failure."""
    return error.errno == errno.ENOENT and not os.path.islink(path)


def _document_id(root: Path, path: Path, knowledge_base_id: str) -> str | None:
    relative = path.relative_to(root).as_posix()
    return document_id_for(knowledge_base_id, relative) if _is_utf8(relative) else None


def _is_utf8(name: str) -> bool:
    """Undecodable bytes of a file name arrive as lone surrogates (Python's surrogateescape)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(path: Path) -> str:
    """A path as people (and JSON, and Postgres) can take it: bytes that are not UTF-8 shown as \\xff."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _os_reason(error: OSError) -> str:
    return error.strerror or str(error)


# s3:// prefixes ------------------------------------------------------------------------------------
def _scan_bucket(url: str, knowledge_base_id: str, catalog: Catalog | None, storage_options: dict | None,
                 result: Scan) -> None:
    """Objects under an s3:// prefix, listed page by page. An object whose listed ETag is the one its
    published version was hashed from is not downloaded; new and changed ones are read and hashed."""
    if catalog is None:
        raise ValueError(f"{url}: scanning object storage needs the catalog (the ETags seen before)")
    root = url.rstrip("/")
    result.roots.append(root)
    for page in list_objects(root, storage_options):
        listed = [item for item in page if not _hidden(item.relative)]
        ids = {item.url: document_id_for(knowledge_base_id, item.relative) for item in listed}
        known = catalog.get_documents(list(ids.values()))
        seen = catalog.source_etags(list(ids.values()))
        for item in listed:
            document_id, doc = ids[item.url], known.get(ids[item.url])
            if doc is not None and doc.status == "published" and seen.get(document_id) == (item.etag, doc.version):
                result.files.append(SourceFile(item.url, item.relative, document_id, doc.version, item.size))
                continue
            try:
                with source_path(item.url, storage_options).open("rb") as stream:
                    sha, size = sha256_stream(stream)
            except FileNotFoundError:
                continue   # deleted between the listing and the read: gone
            except OSError as error:
                result.failures.append(ScanFailure(item.url, f"cannot read object: {error}", document_id))
                continue
            result.files.append(SourceFile(item.url, item.relative, document_id, sha, size, etag=item.etag))


def _hidden(relative: str) -> bool:
    parts = relative.split("/")
    return parts[-1] in IGNORED_NAMES or any(part.startswith(".") for part in parts)


# registering, run ranges, gone documents ---------------------------------------------------------
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
            if previous is not None and previous.status == "published" and previous.version == source.sha256:
                changes.unchanged.append(source.document_id)
            else:
                new = previous is None or previous.status == "deleted"
                (changes.new if new else changes.changed).append(source.document_id)
                catalog.register_document(conn, document_id=source.document_id, knowledge_base_id=knowledge_base_id,
                                          source_path=source.source_path, source_uri=source.uri,
                                          version=source.sha256, size_bytes=source.size)
            if source.etag:
                catalog.record_source_etag(conn, source.document_id, source.etag, source.sha256)
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


def range_tags(start: str, end: str, knowledge_base_id: str) -> dict[str, str]:
    """The tags of a run over a range of document partitions."""
    return {"dagster/asset_partition_range_start": start, "dagster/asset_partition_range_end": end,
            "kb/knowledge_base_id": knowledge_base_id}


@dataclass
class RunPlan:
    """One run: a range of adjacent document partitions, materialized from ``step`` onward."""

    start: str
    end: str
    documents: list[Document]
    step: str
    alone: bool = False             # one document retried alone: if it fails again, so does the run
    migration: str | None = None    # the collection a migration backfill fills

    def tags(self) -> dict[str, str]:
        """Run tags that make the run readable in the UI: knowledge base(s), source paths, first step."""
        first, last = self.documents[0], self.documents[-1]
        kbs = sorted({d.knowledge_base_id for d in self.documents})
        tags = {"kb/knowledge_base_id": ",".join(kbs)[:200], "kb/from_step": self.step,
                "kb/documents": str(len(self.documents)),
                "kb/source": first.source_path[:200] if first is last
                else f"{first.source_path[:95]} .. {last.source_path[:95]}"}
        if self.alone:
            tags["dagster/partition"] = self.start
            tags["kb/retry_alone"] = "true"
        else:
            tags.update({"dagster/asset_partition_range_start": self.start, "dagster/asset_partition_range_end": self.end})
        if self.migration:
            tags["kb/migration"] = self.migration
        return tags

    def key(self) -> str:
        """The same documents at the same versions from the same step give the same key (sensor run keys)."""
        material = f"{self.step}|{self.migration}|" + ",".join(f"{d.document_id}@{d.version}@{d.failed_step}"
                                                               for d in self.documents)
        return hashlib.sha256(material.encode()).hexdigest()[:32]


def stale_documents(docs: list[Document], current: dict[str, str], legacy_models: dict[str, str] | None = None,
                    migrating: bool = True) -> dict[str, Staleness]:
    """Why each of ``docs`` must run again, by document id (current documents left out).
    ``legacy_models``: collection name -> embedding model, for documents published before versions were
    recorded. ``migrating``: whether a collection migration is due; when it is not (the published
    collection has the configured spec, e.g. after a rollback), vectors of another model are simply stale."""
    out = {}
    for doc in docs:
        why = staleness(doc, current, (legacy_models or {}).get(doc.collection_name or ""))
        if why is not None:
            out[doc.document_id] = why if migrating or not why.migration else replace(why, migration=False)
    return out


def plan_runs(docs: list[Document], stale: dict[str, Staleness], ordered_keys: list[str], batch_size: int,
              retry_failed: bool = True, migration: str | None = None) -> list[RunPlan]:
    """Runs for the stale documents: one per contiguous range of partitions that start at the same step
    (at most ``batch_size`` documents); failed documents are retried alone (``retry_failed``; else a
    failure stands until its step's version changes). Stale only by a new embedding spec: a migration's
    backfill, planned only when ``migration`` names the collection it fills."""
    by_id = {d.document_id: d for d in docs}
    groups: dict[str, set[str]] = {}
    plans = []
    for document_id, why in stale.items():
        if why.failed:
            if retry_failed:
                plans.append(RunPlan(document_id, document_id, [by_id[document_id]], why.step, alone=True))
        elif why.migration:
            if migration:
                groups.setdefault("embeddings", set()).add(document_id)
        else:
            groups.setdefault(why.step, set()).add(document_id)
    ranged = []
    for step, selected in groups.items():
        for start, end, _ in contiguous_ranges(ordered_keys, selected, batch_size):
            keys = ordered_keys[ordered_keys.index(start):ordered_keys.index(end) + 1]
            ranged.append(RunPlan(start, end, [by_id[k] for k in keys], step,
                                  migration=migration if step == "embeddings" and any(
                                      stale[k].migration for k in keys) else None))
    order = {key: i for i, key in enumerate(ordered_keys)}
    ranged.sort(key=lambda plan: order.get(plan.start, 0))
    return ranged + plans


def migration_documents(docs: list[Document], stale: dict[str, Staleness], current: dict[str, str]) -> dict[str, Staleness]:
    """The documents a collection migration backfills from the lake: published documents stale only by
    the embedding spec, and failed documents whose last good version still serves (carried over when
    its chunks are still in the lake)."""
    picked = {}
    for doc in docs:
        why = stale.get(doc.document_id)
        if doc.status == "published" and why is not None and why.migration:
            picked[doc.document_id] = why
        elif doc.status == "failed" and doc.published_version and \
                (doc.step_versions or {}).get("milvus_collection") != current["milvus_collection"]:
            picked[doc.document_id] = Staleness("embeddings", "its last good version is carried into the new "
                                                "collection", migration=True)
    return picked


def gone_documents(knowledge_base_id: str, roots: list[Path | str], present: set[str], catalog: Catalog) -> list[Document]:
    """Documents of the knowledge base whose source lay under the given roots and is gone."""
    gone = []
    for doc in catalog.list_documents([knowledge_base_id]):
        if doc.status == "deleted" or doc.document_id in present:
            continue
        if any(_under(doc.source_uri, root) for root in roots):
            gone.append(doc)
    return gone


def _under(source_uri: str, root: Path | str) -> bool:
    if isinstance(root, str) and is_s3(root):
        return source_uri == root or source_uri.startswith(root + "/")
    if is_s3(source_uri):
        return False
    source = Path(source_uri)
    return source == root or Path(root) in source.parents
