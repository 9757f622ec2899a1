"""One path abstraction for the object store, the lake and sources in object storage: a local folder or
s3://, through UPath (fsspec)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from upath import UPath

S3_SCHEMES = ("s3://", "s3a://")


def is_s3(url: str) -> bool:
    return str(url).startswith(S3_SCHEMES)


def root_path(url: str, storage_options: dict | None = None) -> UPath:
    """The root of a store; local folders are created, s3:// URLs get the AWS_* options.

    On S3 the listing cache is off: other processes (parallel runs, the API) write and delete lake and
    object-store files, and s3fs would otherwise answer listings and ``exists`` from a stale cache forever.
    """
    if is_s3(url):
        return s3_path(url, storage_options)
    path = UPath(url)
    path.mkdir(parents=True, exist_ok=True)
    return path


def s3_path(url: str, storage_options: dict | None = None) -> UPath:
    """An s3:// path with the AWS_* options and no listing cache (nothing is created)."""
    return UPath(url, **{"use_listings_cache": False, **(storage_options or {})})


def source_path(uri: str, storage_options: dict | None = None) -> UPath:
    """A source document to read: an s3:// object (with the AWS_* options) or a local file."""
    return s3_path(uri, storage_options) if is_s3(uri) else UPath(uri)


def write_atomically(path: UPath, data: bytes) -> None:
    """Write bytes so that readers never see half a file (temp + rename locally; S3 puts are atomic)."""
    if path.protocol in ("", "file", "local"):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_bytes(data)
        tmp.rename(path)
    else:
        path.write_bytes(data)


# listing sources in object storage ----------------------------------------------------------------
@dataclass(frozen=True)
class ListedObject:
    url: str  # s3://bucket/key
    relative: str  # the key relative to the listed prefix ('/'-separated)
    etag: str  # without quotes; changes when the bytes change (multipart uploads: per part size too)
    size: int


def list_objects(url: str, storage_options: dict | None = None, page_size: int = 1000) -> Iterator[list[ListedObject]]:
    """The objects under an s3:// prefix, read as a folder (``prefix/``), one page of at most ``page_size``
    keys at a time: each ListObjectsV2 call resumes from the previous page's continuation token (the
    cursor), so a bucket of millions of keys is listed in bounded memory. A URL that names one object
    (and no folder) lists that object, relative to its folder. Folder markers (keys ending in ``/``) are
    not objects."""
    fs = s3_path(url, storage_options).fs
    bucket, key, _ = fs.split_path(url)
    prefix = key.rstrip("/") + "/" if key.rstrip("/") else ""
    cursor: str | None = None
    first = True
    while True:
        request = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": page_size}
        if cursor:
            request["ContinuationToken"] = cursor
        answer = fs.call_s3("list_objects_v2", **request)
        page = [
            ListedObject(
                f"s3://{bucket}/{item['Key']}",
                item["Key"][len(prefix) :],
                str(item.get("ETag", "")).strip('"'),
                int(item.get("Size", 0)),
            )
            for item in answer.get("Contents", [])
            if not item["Key"].endswith("/")
        ]
        if first and not page and not answer.get("IsTruncated") and key.rstrip("/"):
            page = _single_object(fs, bucket, key.rstrip("/"))
        first = False
        yield page
        if not answer.get("IsTruncated"):
            return
        cursor = answer["NextContinuationToken"]


def _single_object(fs, bucket: str, key: str) -> list[ListedObject]:
    try:
        head = fs.call_s3("head_object", Bucket=bucket, Key=key)
    except FileNotFoundError:
        return []
    return [
        ListedObject(
            f"s3://{bucket}/{key}",
            key.rsplit("/", 1)[-1],
            str(head.get("ETag", "")).strip('"'),
            int(head.get("ContentLength", 0)),
        )
    ]
