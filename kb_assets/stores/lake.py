"""The lake: Parquet files of the chunks and embeddings tables (polars), local or on S3, each file holding
the rows of many documents: what one run (or one slice of it) wrote.

A file is never changed once written; its name starts with a sequence number (nanoseconds), and the
footer records which documents it holds (their row counts) and which it deletes. A document's rows are
those of the newest file that names it (none when that file deletes it): that is the manifest, read
from the footers of the table's files (each read once per process). ``batch()`` gathers a run's writes
and deletes into one file per table; outside a batch every write or delete is a file of its own.
Superseded and deleted rows stay in older files until compaction merges files: size-tiered, so that a
row is rewritten about log4(table / ``TIER_BYTES``) times over the table's life, not once every few
runs. Files fall in tiers by size (under ``TIER_BYTES``; then each tier four times the last); a tier
with more than ``MAX_FILES`` files is merged, and so is a file whose dead rows pass a quarter of its
rows (with the small files of the lowest tier, cheap to take along). A merged file keeps the
deletions that still hide rows in files left out. Files written in the last ``COMPACT_AFTER_S``
seconds are left to the next compaction (a concurrent writer's file may still be on its way).

The schemas of the lake tables are declared once, by the stage that makes their rows
(``chunking/schema.py``, ``embedding/schema.py``).
"""

from __future__ import annotations

import io
import json
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import polars as pl

from kb_assets.chunking.schema import CHUNKS_SCHEMA
from kb_assets.embedding.schema import EMBEDDINGS_SCHEMA
from kb_assets.stores.paths import root_path, write_atomically

TABLES = {"chunks": CHUNKS_SCHEMA, "embeddings": EMBEDDINGS_SCHEMA}


# columns added after files were written: what an older file's rows hold for them
ADDED_COLUMNS = {"pipeline_version": "1"}

MAX_FILES = 4  # a size tier with more files than this (old enough) is merged
TIER_BYTES = 1024 * 1024  # files under this size are the lowest tier; each tier above is 4x the last
COMPACT_AFTER_S = 10.0  # files younger than this are not compacted yet
ROW_GROUP_ROWS = 4096  # rows sorted by document: a filtered read of a large file skips the other groups
CACHED_FILE_BYTES = 32 * 1024 * 1024  # files up to this size are read whole and kept (a few of them)
CACHED_FILES = 4
DOCUMENTS_KEY, DELETED_KEY = "kb_assets.documents", "kb_assets.deleted"
_FILE_NAME = re.compile(r"^(\d{20})-[0-9a-f]+\.parquet$")


@dataclass(frozen=True)
class LakeFile:
    """One file of a table: its sequence number (0: a legacy file of one document, named by it), the
    documents it holds (rows each) and those it deletes."""

    name: str
    sequence: int
    size: int
    documents: dict[str, int]
    deleted: tuple[str, ...]


class Lake:
    def __init__(self, url: str, storage_options: dict | None = None):
        self.url = url
        self.root = root_path(url, storage_options)
        self._footers: dict[str, LakeFile] = {}  # (table/name) -> its footer: files never change
        self._frames: OrderedDict[str, pl.DataFrame] = OrderedDict()  # small files read whole, newest last
        self._manifests: dict[str, tuple[tuple[str, ...], dict[str, LakeFile]]] = {}  # by table, of these files
        self._pending: dict[str, dict[str, pl.DataFrame | None]] | None = None  # a batch: None deletes
        self._depth = 0
        self._lock = threading.RLock()

    # writing -------------------------------------------------------------------------------------
    @contextmanager
    def batch(self) -> Iterator[None]:
        """Gather the writes and deletes of this block (of this Lake object) into one file per table,
        written when the outermost block ends (also on an error: what was written stands). Reads within
        the block see them."""
        with self._lock:
            self._depth += 1
            if self._pending is None:
                self._pending = {}
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    self.flush()
                    self._pending = None

    def flush(self) -> list[str]:
        """Write what the batch gathered so far (one file per table) and compact where due; the names written."""
        with self._lock:
            pending, self._pending = self._pending or {}, ({} if self._pending is not None else None)
        written = []
        for table, changes in pending.items():
            if changes:
                written.append(self._write_file(table, changes))
                self.compact(table)
        return written

    def write(self, table: str, document_id: str, frame: pl.DataFrame) -> None:
        """Replace one document's rows of a table (validated against the table's schema)."""
        expected = TABLES[table]
        if frame.schema != expected:
            raise ValueError(f"lake table {table}: frame schema {dict(frame.schema)} is not {dict(expected)}")
        self._change(table, document_id, frame)

    def delete(self, table: str, document_id: str) -> None:
        """Remove one document's rows (a no-op when it has none); compaction removes them from the files."""
        if self._pending is None and not self.exists(table, document_id):
            return
        self._change(table, document_id, None)

    def _change(self, table: str, document_id: str, frame: pl.DataFrame | None) -> None:
        with self._lock:
            if self._pending is not None:
                self._pending.setdefault(table, {})[document_id] = frame
                return
        self._write_file(table, {document_id: frame})

    def _write_file(self, table: str, changes: dict[str, pl.DataFrame | None]) -> str:
        frames = [frame for frame in changes.values() if frame is not None]
        rows = pl.concat(frames) if frames else pl.DataFrame(schema=TABLES[table])
        rows = rows.sort("document_id", maintain_order=True)
        documents = {d: f.height for d, f in changes.items() if f is not None}
        deleted = sorted(d for d, f in changes.items() if f is None)
        return self._put(table, time.time_ns(), rows, documents, deleted)

    def _put(self, table: str, sequence: int, rows: pl.DataFrame, documents: dict[str, int], deleted: list) -> str:
        name = f"{sequence:020d}-{uuid.uuid4().hex[:12]}.parquet"
        buffer = io.BytesIO()
        rows.write_parquet(
            buffer,
            row_group_size=ROW_GROUP_ROWS,
            metadata={DOCUMENTS_KEY: json.dumps(documents), DELETED_KEY: json.dumps(deleted)},
        )
        data = buffer.getvalue()
        write_atomically(self.root / table / name, data)
        with self._lock:
            self._footers[f"{table}/{name}"] = LakeFile(name, sequence, len(data), documents, tuple(deleted))
        return name

    # the manifest --------------------------------------------------------------------------------
    def files(self, table: str) -> list[LakeFile]:
        """The table's files, oldest first (one listing; footers read once per process)."""
        folder = self.root / table
        try:
            listed = folder.fs.ls(folder.path, detail=True)
        except FileNotFoundError:
            return []
        files = []
        for entry in listed:
            name = str(entry["name"]).rstrip("/").rsplit("/", 1)[-1]
            if entry.get("type") == "directory" or not name.endswith(".parquet") or name.startswith("."):
                continue
            footer = self._footer(table, name, int(entry.get("size") or 0))
            if footer is not None:
                files.append(footer)
        return sorted(files, key=lambda f: (f.sequence, f.name))

    def _footer(self, table: str, name: str, size: int) -> LakeFile | None:
        key = f"{table}/{name}"
        with self._lock:
            if key in self._footers:
                return self._footers[key]
        match = _FILE_NAME.match(name)
        if match is None:  # a legacy file: one document's rows, named by it
            footer = LakeFile(name, 0, size, {name.removesuffix(".parquet"): -1}, ())
        else:
            try:
                with (self.root / table / name).open("rb") as handle:
                    metadata = pl.read_parquet_metadata(handle)
            except FileNotFoundError:  # compacted away since the listing
                return None
            footer = LakeFile(
                name,
                int(match.group(1)),
                size,
                json.loads(metadata.get(DOCUMENTS_KEY, "{}")),
                tuple(json.loads(metadata.get(DELETED_KEY, "[]"))),
            )
        with self._lock:
            self._footers[key] = footer
        return footer

    def manifest(self, table: str, files: list[LakeFile] | None = None) -> dict[str, LakeFile]:
        """Which file holds each document's rows (the newest file that names it, unless it deletes it)."""
        files = files if files is not None else self.files(table)
        names = tuple(f.name for f in files)
        with self._lock:
            known = self._manifests.get(table)
        if known is not None and known[0] == names:  # the same files as last time: the same answer
            return known[1]
        holder: dict[str, LakeFile | None] = {}
        for file in files:
            for document_id in file.documents:
                holder[document_id] = file
            for document_id in file.deleted:
                holder[document_id] = None
        manifest = {d: f for d, f in holder.items() if f is not None}
        with self._lock:
            self._manifests[table] = (names, manifest)
        return manifest

    # reading -------------------------------------------------------------------------------------
    def read(self, table: str, document_id: str) -> pl.DataFrame:
        """One document's rows, or an empty frame of the table's schema."""
        with self._lock:
            if self._pending is not None and document_id in self._pending.get(table, {}):
                frame = self._pending[table][document_id]
                return frame.clone() if frame is not None else pl.DataFrame(schema=TABLES[table])
        for _ in range(3):  # a file compacted away between the listing and the read: list again
            file = self.manifest(table).get(document_id)
            if file is None:
                return pl.DataFrame(schema=TABLES[table])
            try:
                return self._rows(table, file, document_id)
            except FileNotFoundError:
                with self._lock:
                    self._footers.pop(f"{table}/{file.name}", None)
        raise RuntimeError(f"lake table {table}: the file of document {document_id} keeps disappearing")

    def _rows(self, table: str, file: LakeFile, document_id: str) -> pl.DataFrame:
        if file.documents.get(document_id) == -1:  # a legacy file: that document's rows alone
            return self._conform(table, self._whole(table, file))
        if file.size > CACHED_FILE_BYTES:
            import pyarrow.parquet as pq  # type: ignore[import-untyped]

            with (self.root / table / file.name).open("rb") as handle:
                part = pq.read_table(handle, filters=[("document_id", "=", document_id)])
            return self._conform(table, pl.from_arrow(part))  # type: ignore[arg-type]
        return self._conform(table, self._whole(table, file).filter(pl.col("document_id") == document_id))

    def _whole(self, table: str, file: LakeFile) -> pl.DataFrame:
        key = f"{table}/{file.name}"
        with self._lock:
            if key in self._frames:
                self._frames.move_to_end(key)
                return self._frames[key]
        frame = pl.read_parquet(io.BytesIO((self.root / table / file.name).read_bytes()))
        with self._lock:
            self._frames[key] = frame
            while len(self._frames) > CACHED_FILES:
                self._frames.popitem(last=False)
        return frame

    @staticmethod
    def _conform(table: str, frame: pl.DataFrame) -> pl.DataFrame:
        schema = TABLES[table]
        # files written before a column was added read with its default (pipeline versions: version 1) or empty
        missing = [
            pl.lit(ADDED_COLUMNS.get(name), dtype).alias(name)
            for name, dtype in schema.items()
            if name not in frame.columns
        ]
        return frame.with_columns(missing).select(list(schema)).cast(schema)

    def exists(self, table: str, document_id: str) -> bool:
        with self._lock:
            if self._pending is not None and document_id in self._pending.get(table, {}):
                return self._pending[table][document_id] is not None
        return document_id in self.manifest(table)

    def document_ids(self, table: str) -> list[str]:
        ids = set(self.manifest(table))
        with self._lock:
            for document_id, frame in ((self._pending or {}).get(table) or {}).items():
                (ids.add if frame is not None else ids.discard)(document_id)
        return sorted(ids)

    # compaction ----------------------------------------------------------------------------------
    def dead_rows(self, table: str) -> tuple[int, int]:
        """(rows of superseded or deleted documents still in files, all rows) of a table."""
        files = self.files(table)
        live = self.manifest(table, files)
        total = dead = 0
        for file in files:
            for document_id, rows in file.documents.items():
                total += max(rows, 0)
                if live.get(document_id) is not file:
                    dead += max(rows, 0)
        return dead, total

    def compact(self, table: str, force: bool = False) -> int:
        """Merge the table's files that are due (older than ``COMPACT_AFTER_S``): a size tier of more than
        ``MAX_FILES`` files, a file whose dead rows pass a quarter of its rows, with the lowest tier's
        files (``force``: every file holding dead rows or deletions). Returns how many files were removed."""
        files = self.files(table)
        horizon = time.time_ns() - int(COMPACT_AFTER_S * 1e9)
        old = [f for f in files if f.sequence <= horizon]
        live = self.manifest(table, files)
        merging = _due_files(old, live, force)
        names = {f.name for f in merging}
        named_elsewhere = {d for f in files if f.name not in names for d in f.documents}
        # a deletion still hides rows of a file left out: the merged file keeps it
        deleted = sorted({d for f in merging for d in f.deleted if d not in live and d in named_elsewhere})
        dropped = any(d not in deleted for f in merging for d in f.deleted)
        dead = any(live.get(d) is not f for f in merging for d in f.documents)
        if not (len(merging) >= 2 or (merging and (dead or dropped))):
            return 0
        keep = {d: f for d, f in live.items() if f.name in names}
        try:
            parts = [self._rows(table, f, d) for d, f in sorted(keep.items())]
        except FileNotFoundError:  # another process is compacting the same files: leave it to that one
            return 0
        merged = pl.concat(parts) if parts else pl.DataFrame(schema=TABLES[table])
        counts = {d: part.height for d, part in zip(sorted(keep), parts, strict=True)}
        if counts or deleted:  # as old as the newest merged file (still older than the files after it); never 0,
            # the sequence of a legacy file of one document, which would be read whole for each of its documents
            self._put(table, max(1, *(f.sequence for f in merging)), merged, counts, deleted)
        for file in merging:
            try:
                (self.root / table / file.name).unlink()
            except FileNotFoundError:  # another process compacted it too
                pass
            with self._lock:
                self._footers.pop(f"{table}/{file.name}", None)
                self._frames.pop(f"{table}/{file.name}", None)
        return len(merging)


def size_tier(size: int) -> int:
    """0 under ``TIER_BYTES``; then 1, 2, ... for each further factor of four."""
    tier, bound = 0, TIER_BYTES
    while size >= bound:
        tier, bound = tier + 1, bound * 4
    return tier


def _due_files(old: list[LakeFile], live: dict[str, LakeFile], force: bool) -> list[LakeFile]:
    """The files of ``old`` to merge now (oldest first); none when nothing is due."""

    def mostly_dead(file: LakeFile) -> bool:
        rows = sum(max(r, 0) for r in file.documents.values())
        dead = sum(max(r, 0) for d, r in file.documents.items() if live.get(d) is not file)
        return dead * 4 > rows if not force else bool(dead or file.deleted)

    tiers: dict[int, list[LakeFile]] = {}
    for file in old:
        tiers.setdefault(size_tier(file.size), []).append(file)
    due = {f.name for f in old if mostly_dead(f)}
    due |= {f.name for tier in tiers.values() if len(tier) > MAX_FILES for f in tier}
    if due:  # the lowest tier's small files come along
        due |= {f.name for f in tiers.get(0, [])}
    return [f for f in old if f.name in due]
