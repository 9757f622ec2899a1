"""Document identity: which source root a path belongs to, the document id, and the readable partition key.

A document is (knowledge base, source root, path under the root). The root is what was ingested: the
resolved real path of a folder (a file named on its own: its folder), or a normalised ``s3://bucket/prefix``.
Two folders that hold the same relative path are two documents; a path given to ``ingest`` that lies inside
a root the knowledge base already has is scanned as part of that root (only what lies under the given path
can be purged); a path that holds roots of the knowledge base is refused (:class:`OverlappingRoots`), and
a root that moved is relocated (``kb-assets relocate``), never purged and ingested again.

Ids are assigned once, when a document is first registered, and never change: rows made before roots
were part of the identity keep theirs. The partition key is what people read in the Dagster UI:
``kb/root-name/relative/path.md``, at most :data:`MAX_KEY_CHARS` characters, with a short hash only where
the plain key would be cut, changed by normalisation, or taken.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import unicodedata
from collections.abc import Set as AbstractSet
from pathlib import Path

from kb_assets.stores.paths import is_s3

MAX_KEY_CHARS = 100
HASH_CHARS = 6
_UNSAFE = re.compile(r"[^\w.\-/]+")  # \w: letters and digits of any script, and _


def document_id_for(knowledge_base_id: str, source_root: str, source_path: str) -> str:
    """The id of a document first registered under this root (stable: stored, never recomputed)."""
    digest = hashlib.sha256(f"{knowledge_base_id}\x00{source_root}\x00{source_path}".encode()).hexdigest()
    return f"doc-{digest[:24]}"


def canonical_s3_root(url: str) -> str:
    """``s3://bucket//a/b/`` (or ``s3a://``) -> ``s3://bucket/a/b``: one spelling per prefix."""
    bucket, _, prefix = url.split("://", 1)[1].partition("/")
    parts = [part for part in prefix.split("/") if part]
    return "/".join([f"s3://{bucket}", *parts])


def contains(outer: str, inner: str) -> bool:
    """Whether root or path ``inner`` is ``outer`` or lies under it (both canonical)."""
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


class OverlappingRoots(ValueError):
    """A path given to ingest holds folders that are roots of the knowledge base already."""

    def __init__(self, knowledge_base_id: str, given: str, inner: list[str]):
        self.given, self.inner = given, inner
        shown = ", ".join(inner[:3]) + (f" and {len(inner) - 3} more" if len(inner) > 3 else "")
        super().__init__(
            f"{given}: knowledge base {knowledge_base_id!r} already has documents from {shown}, inside this "
            f"folder; ingest that folder as before, ingest this one into another knowledge base, or move those "
            f"documents under it with `kb-assets relocate --kb {knowledge_base_id} OLD_ROOT NEW_ROOT`"
        )


def place(given: str, knowledge_base_id: str, roots: list[str]) -> tuple[str, str]:
    """The root a canonical path given to ingest belongs to, and the scope under it that the scan covers
    ("" for all of it): an existing root that holds the path, else the path itself (a file: its folder).
    A path that holds other roots of the knowledge base is refused."""
    holder = max((root for root in roots if contains(root, given)), key=len, default=None)
    if holder is not None:
        return holder, "" if holder == given else given[len(holder.rstrip("/")) + 1 :]
    inner = sorted(root for root in roots if contains(given, root))
    if inner:
        raise OverlappingRoots(knowledge_base_id, given, inner)
    return given, ""


def root_label(source_root: str) -> str:
    """The last name of a root (``/srv/docs`` -> ``docs``, ``s3://bucket`` -> ``bucket``)."""
    name = (
        posixpath.basename(source_root.rstrip("/"))
        if not source_root.startswith("s3://")
        else source_root[len("s3://") :].rstrip("/").rsplit("/", 1)[-1]
    )
    return name or "root"


def readable_key(
    knowledge_base_id: str, source_root: str, source_path: str, document_id: str, taken: AbstractSet[str] = frozenset()
) -> str:
    """The partition key people read: ``kb/root-name/relative/path``, normalised to characters that Dagster
    and URLs take, at most MAX_KEY_CHARS long; a short hash of the document id is appended where the plain
    key was cut or changed by normalisation, or is ``taken`` by another document."""
    plain = f"{knowledge_base_id}/{root_label(source_root)}/{source_path}"
    key = _normalised(plain)
    tag = hashlib.sha256(document_id.encode()).hexdigest()[:HASH_CHARS]
    if key != plain or len(key) > MAX_KEY_CHARS or key in taken:
        room = MAX_KEY_CHARS - HASH_CHARS - 1
        key = f"{_cut(key, room)}~{tag}"
    return key


def _normalised(key: str) -> str:
    """Unicode NFC; runs of other characters become ``_``; no empty, ``.`` or ``..`` segments (Dagster
    refuses ``...`` in a key)."""
    key = _UNSAFE.sub("_", unicodedata.normalize("NFC", key))
    segments = [re.sub(r"\.{2,}", ".", segment) for segment in key.split("/")]
    return "/".join(segment if segment not in ("", ".") else "_" for segment in segments)


def _cut(key: str, room: int) -> str:
    """At most ``room`` characters: the start and the end (the file name) of a long key."""
    if len(key) <= room:
        return key
    tail = room // 2
    return f"{key[: room - tail - 1]}_{key[-tail:]}"


def canonical_root(given: str) -> str:
    """A root as identities hold it: a local folder's resolved real path, or a normalised s3:// prefix."""
    if is_s3(given):
        return canonical_s3_root(given)
    return str(Path(given).expanduser().resolve())


def relocation(knowledge_base_id: str, old: str, new: str, roots: list[str]) -> tuple[str, str]:
    """The canonical (old, new) roots of a move, checked: ``old`` is a root of the knowledge base, and
    ``new`` neither is one nor overlaps one (a local ``new`` must exist). ValueError says what is wrong."""
    if is_s3(old):
        old = canonical_s3_root(old)
    elif old not in roots:
        old = str(Path(old).expanduser().absolute())  # the old folder is usually gone: no resolve
    if old not in roots:
        listed = ", ".join(roots) or "none"
        raise ValueError(f"{old} is not a source root of knowledge base {knowledge_base_id!r} (its roots: {listed})")
    new = canonical_root(new)
    if not is_s3(new) and not Path(new).is_dir():
        raise ValueError(f"{new}: no such folder (move the files first, then relocate)")
    clash = [root for root in roots if root != old and (contains(root, new) or contains(new, root))]
    if clash:
        raise ValueError(f"{new} overlaps the root(s) {', '.join(clash)} of knowledge base {knowledge_base_id!r}")
    return old, new
