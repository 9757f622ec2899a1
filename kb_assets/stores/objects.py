"""The object store: original files (content-addressed), page and figure images."""

from __future__ import annotations

from upath import UPath

from kb_assets.stores.paths import root_path, write_atomically


class ObjectStore:
    def __init__(self, url: str, storage_options: dict | None = None):
        self.url = url
        self.root = root_path(url, storage_options)

    @staticmethod
    def original_key(sha256: str, suffix: str) -> str:
        return f"originals/{sha256[:2]}/{sha256}{suffix.lower()}"

    def path(self, key: str) -> UPath:
        return self.root / key

    def put(self, key: str, data: bytes) -> str:
        path = self.path(key)
        if not path.exists():
            write_atomically(path, data)
        return key

    def get(self, key: str) -> bytes:
        return self.path(key).read_bytes()

    def exists(self, key: str) -> bool:
        return self.path(key).exists()

    def delete(self, key: str) -> None:
        path = self.path(key)
        if path.exists():
            path.unlink()

    def delete_prefix(self, prefix: str) -> None:
        path = self.path(prefix)
        if path.exists():
            path.fs.rm(path.path, recursive=True)
