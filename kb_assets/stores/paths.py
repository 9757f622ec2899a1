"""One path abstraction for the object store and the lake: a local folder or s3://, through UPath."""

from __future__ import annotations

import uuid

from upath import UPath


def root_path(url: str, storage_options: dict | None = None) -> UPath:
    """The root of a store; local folders are created, s3:// URLs get the AWS_* options.

    On S3 the listing cache is off: other processes (parallel runs, the API) write and delete lake and
    object-store files, and s3fs would otherwise answer listings and ``exists`` from a stale cache forever.
    """
    if url.startswith(("s3://", "s3a://")):
        return UPath(url, **{"use_listings_cache": False, **(storage_options or {})})
    path = UPath(url)
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_atomically(path: UPath, data: bytes) -> None:
    """Write bytes so that readers never see half a file (temp + rename locally; S3 puts are atomic)."""
    if path.protocol in ("", "file", "local"):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_bytes(data)
        tmp.rename(path)
    else:
        path.write_bytes(data)
