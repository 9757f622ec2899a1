"""Scanning sources: local folders and s3:// prefixes, into the files (with ids and hashes) to register.

A scan treats every entry on its own: an entry that cannot be named (a file name that is not UTF-8),
stat-ed or read, a symlink that leaves the scanned folder or loops, a FIFO, socket or device becomes a
:class:`ScanFailure` with the reason, and the scan goes on. Symlinks inside the folder are followed.
``kb_assets.planning`` registers what a scan found.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from kb_assets.stores.catalog import Catalog
from kb_assets.stores.paths import is_s3, list_objects, source_path

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
