"""Scanning sources: local folders and s3:// prefixes, into the files (with ids and hashes) to register.

A scan treats every entry on its own: an entry that cannot be named (a file name that is not UTF-8),
stat-ed or read, a symlink that leaves the scanned folder or loops, a FIFO, socket or device becomes a
:class:`ScanFailure` with the reason, and the scan goes on. Symlinks inside the folder are followed.
Each given path is placed in a source root (``kb_assets.pipeline.identity``); the scan's scopes say what it covered,
so only documents inside them can be found gone. ``kb_assets.pipeline.planning`` registers what a scan found.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from kb_assets.lib.json_types import JsonObject
from kb_assets.pipeline.identity import canonical_s3_root, contains, document_id_for, place
from kb_assets.stores.catalog import Catalog
from kb_assets.stores.paths import is_s3, list_objects, source_path

IGNORED_NAMES = {".DS_Store", "Thumbs.db"}
READ_CHUNK = 1 << 20
NOT_REGULAR = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


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
    uri: str  # what raw_files reads: an absolute local path or an s3:// URI
    source_path: str  # relative to source_root
    document_id: str
    sha256: str
    size: int
    etag: str = ""  # s3://: the ETag whose bytes this scan hashed (remembered for the next scan)
    source_root: str = ""  # the canonical folder or s3:// prefix of its identity (kb_assets.pipeline.identity)


@dataclass
class ScanFailure:
    """An entry the scan could not take; the others go on."""

    source_uri: str  # its path; bytes that are not UTF-8 are shown escaped (\xff)
    reason: str
    document_id: str | None = None  # when it can be named: its document is not purged for it

    def as_json(self) -> JsonObject:
        return {"documentId": self.document_id, "sourceUri": self.source_uri, "reason": self.reason}


@dataclass
class Scope:
    """What one given path covered: everything under ``source_root`` whose source path is ``path`` or lies
    under it ("" for the whole root). Only documents inside a scanned scope can be found gone."""

    source_root: str
    path: str = ""

    def holds(self, doc) -> bool:
        return doc.source_root == self.source_root and (not self.path or contains(self.path, doc.source_path))


@dataclass
class Scan:
    files: list[SourceFile] = field(default_factory=list)
    scopes: list[Scope] = field(default_factory=list)
    failures: list[ScanFailure] = field(default_factory=list)

    @property
    def present(self) -> set[str]:
        """Documents whose source is still there (read, or there but unreadable this time)."""
        return {f.document_id for f in self.files} | {f.document_id for f in self.failures if f.document_id}


class _Ids:
    """Document ids of (root, path) pairs: the catalog's where the document exists (ids never change),
    else the id a new document gets."""

    def __init__(self, knowledge_base_id: str, catalog: Catalog | None):
        self.knowledge_base_id, self.catalog = knowledge_base_id, catalog
        self.known: dict[tuple[str, str], str] = {}
        self.loaded: set[str] = set()

    def load(self, source_root: str) -> None:
        """The ids of every document registered under this root (one query a root)."""
        if self.catalog is not None and source_root not in self.loaded:
            self.loaded.add(source_root)
            self.known.update(
                {
                    (source_root, path): document_id
                    for path, document_id in self.catalog.document_ids_under(
                        self.knowledge_base_id, source_root
                    ).items()
                }
            )

    def __call__(self, source_root: str, source_path: str) -> str:
        return self.known.get((source_root, source_path)) or document_id_for(
            self.knowledge_base_id, source_root, source_path
        )


def scan(
    sources: list[Path | str],
    knowledge_base_id: str,
    catalog: Catalog | None = None,
    storage_options: dict | None = None,
) -> Scan:
    """Files under the given folders, files or s3:// prefixes (hidden entries skipped) with their ids and
    hashes. Each given path is placed in a source root (``identity.place``: a root of the knowledge base
    that holds it, else its own); a path that holds roots of the knowledge base raises
    ``identity.OverlappingRoots``, and one that does not exist is an error (its documents would otherwise
    all be purged); every entry below a root succeeds or fails on its own. With the ``catalog``, existing
    documents keep their ids; S3 sources need it (ETags of what was hashed before) and the AWS
    ``storage_options``."""
    result = Scan()
    roots = catalog.source_roots(knowledge_base_id) if catalog is not None else []
    ids = _Ids(knowledge_base_id, catalog)
    for source in sources:
        if is_s3(str(source)):
            _scan_bucket(
                canonical_s3_root(str(source)), knowledge_base_id, roots, ids, catalog, storage_options, result
            )
        else:
            _scan_folder(Path(source), knowledge_base_id, roots, ids, result)
    return result


# local folders --------------------------------------------------------------------------------------
def _scan_folder(given: Path, knowledge_base_id: str, roots: list[str], ids: _Ids, result: Scan) -> None:
    given = Path(os.path.abspath(given.expanduser()))
    if os.path.isdir(given):
        real = given.resolve()
        root, scope = place(str(real), knowledge_base_id, roots)
        walk_from = real
    elif os.path.lexists(given):
        # a file named on its own: read even through a symlink (it was named); its folder is its root
        real = given.parent.resolve() / given.name
        root, scope = place(str(real.parent), knowledge_base_id, roots)
        scope = f"{scope}/{given.name}" if scope else given.name
        walk_from = None
    else:
        raise FileNotFoundError(f"{given}: no such file or folder")
    ids.load(root)
    result.scopes.append(Scope(root, scope))
    if walk_from is None:
        _take_file(Path(root), real, ids, result)
    else:
        _walk(Path(root), walk_from, walk_from, frozenset({walk_from}), ids, result)


def _walk(root: Path, top: Path, folder: Path, ancestors: frozenset[Path], ids: _Ids, result: Scan) -> None:
    """Every entry below ``folder`` in name order, named relative to ``root``; a symlink may not leave
    ``top`` (the folder given to ingest); ``ancestors`` are the real paths of the folders above (a symlink
    to one of them is a loop)."""
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
            info = os.stat(path)  # follows symlinks: a loop or a dangling link fails here
        except OSError as error:
            if not _vanished(path, error):
                result.failures.append(_link_failure(root, path, error, ids))
            continue
        real = Path(os.path.realpath(path))
        if entry.is_symlink() and not (real == top or top in real.parents):
            result.failures.append(
                ScanFailure(
                    _shown(path),
                    f"symlink leaves the ingested folder ({_shown(Path(os.readlink(path)))}): not followed",
                    _document_id(root, path, ids),
                )
            )
            continue
        if stat.S_ISDIR(info.st_mode):
            if real in ancestors:
                result.failures.append(
                    ScanFailure(_shown(path), f"symlink loop: points to {_shown(real)}, a folder above it")
                )
            else:
                _walk(root, top, path, ancestors | {real}, ids, result)
            continue
        _take_file(root, path, ids, result, info)


def _take_file(root: Path, path: Path, ids: _Ids, result: Scan, info: os.stat_result | None = None) -> None:
    """Hash one file (or record why it cannot be read)."""
    relative = path.relative_to(root).as_posix()
    if not _is_utf8(relative):
        result.failures.append(ScanFailure(_shown(path), "file name is not valid UTF-8: rename it"))
        return
    document_id = ids(str(root), relative)
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
            result.failures.append(
                _link_failure(root, path, error, ids)
                if error.errno in (errno.ELOOP, errno.ENOENT)
                else ScanFailure(_shown(path), f"cannot read: {_os_reason(error)}", document_id)
            )
        return
    result.files.append(SourceFile(str(path), relative, document_id, sha, size, source_root=str(root)))


class _NotRegular(Exception):
    pass


def _link_failure(root: Path, path: Path, error: OSError, ids: _Ids) -> ScanFailure:
    """Why stat (which follows symlinks) failed, said for what the entry is."""
    document_id = _document_id(root, path, ids)
    if error.errno == errno.ELOOP:
        return ScanFailure(_shown(path), "symlink loop: it never reaches a file", document_id)
    if error.errno == errno.ENOENT and os.path.islink(path):
        return ScanFailure(
            _shown(path), f"broken symlink: {_shown(Path(os.readlink(path)))} does not exist", document_id
        )
    return ScanFailure(_shown(path), f"cannot stat: {_os_reason(error)}", document_id)


def _vanished(path: Path, error: OSError) -> bool:
    """Deleted between the listing and the read: gone, not a failure."""
    return error.errno == errno.ENOENT and not os.path.islink(path)


def _document_id(root: Path, path: Path, ids: _Ids) -> str | None:
    relative = path.relative_to(root).as_posix()
    return ids(str(root), relative) if _is_utf8(relative) else None


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
def _scan_bucket(
    url: str,
    knowledge_base_id: str,
    roots: list[str],
    ids: _Ids,
    catalog: Catalog | None,
    storage_options: dict | None,
    result: Scan,
) -> None:
    """Objects under an s3:// prefix, listed page by page. An object whose listed ETag is the one its
    published version was hashed from is not downloaded; new and changed ones are read and hashed."""
    if catalog is None:
        raise ValueError(f"{url}: scanning object storage needs the catalog (the ETags seen before)")
    pages = list_objects(url, storage_options)
    first = next(pages, [])
    single = len(first) == 1 and first[0].url == url  # the URL names one object: its folder is its root
    root, scope = place(url.rsplit("/", 1)[0] if single else url, knowledge_base_id, roots)
    if single:
        name = url.rsplit("/", 1)[1]
        scope = f"{scope}/{name}" if scope else name
    ids.load(root)
    result.scopes.append(Scope(root, scope))
    for page in itertools.chain([first], pages):
        listed = [item for item in page if not _hidden(item.relative)]
        names = {item.url: item.url[len(root) + 1 :] for item in listed}
        by_url = {item.url: ids(root, names[item.url]) for item in listed}
        known = catalog.get_documents(list(by_url.values()))
        seen = catalog.source_etags(list(by_url.values()))
        for item in listed:
            document_id, relative = by_url[item.url], names[item.url]
            doc = known.get(document_id)
            if (
                doc is not None
                and doc.version is not None
                and doc.status == "published"
                and seen.get(document_id) == (item.etag, doc.version)
            ):
                result.files.append(
                    SourceFile(item.url, relative, document_id, doc.version, item.size, source_root=root)
                )
                continue
            try:
                with source_path(item.url, storage_options).open("rb") as stream:
                    sha, size = sha256_stream(stream)
            except FileNotFoundError:
                continue  # deleted between the listing and the read: gone
            except OSError as error:
                result.failures.append(ScanFailure(item.url, f"cannot read object: {error}", document_id))
                continue
            result.files.append(
                SourceFile(item.url, relative, document_id, sha, size, etag=item.etag, source_root=root)
            )


def _hidden(relative: str) -> bool:
    parts = relative.split("/")
    return parts[-1] in IGNORED_NAMES or any(part.startswith(".") for part in parts)
