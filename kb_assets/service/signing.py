"""Short-lived signed URLs of page and figure images and of documents' original files.

An ``<img>`` (or a link) cannot send ``Authorization: Bearer``, so the service hands out URLs that carry
their own proof: ``/v1/assets/<key>?k=<key id>&e=<expiry>&s=<signature>`` (an image) or
``/v1/documents/<id>/file?k=...`` (an original, subject ``files/<id>``), where the signature is an
HMAC-SHA256 (``KB_URL_SIGNING_SECRET``) of the key id, the subject (asset key) and the expiry (unix seconds,
``KB_URL_TTL_SECONDS`` ahead). The key id is an HMAC under the same secret of the caller's key
fingerprint, so a leaked URL gives no way to test guesses of a weak API key offline. The asset route
accepts such a URL until it expires, while that API key is still configured and may still read the
asset's document. A signature or key id that is not lower-case hex of the right length is refused.

Without ``KB_URL_SIGNING_SECRET`` a random secret is drawn per process: URLs then work only against the
process that signed them. Several replicas behind one address must share one secret.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from urllib.parse import quote, urlencode

from kb_assets.lib.json_types import JsonObject
from kb_assets.retrieval.rows import ASSETS_PATH
from kb_assets.service.auth import ApiKeys, Caller

URL_FIELDS = ("pageImageUrl", "figureImageUrl", "imageUrl")
SIGNATURE = re.compile(r"[0-9a-f]{64}")
KEY_ID = re.compile(r"[0-9a-f]{32}")


def file_subject(document_id: str) -> str:
    """What a signed URL of a document's original file signs (never an asset key: those start with
    ``pages/`` or ``figures/``)."""
    return f"files/{document_id}"


class UrlSigner:
    def __init__(self, secret: str = "", ttl_seconds: int = 300):
        self.secret = secret.encode() if secret else secrets.token_bytes(32)
        self.ttl_seconds = ttl_seconds

    def _signature(self, key_id: str, asset_key: str, expires: int) -> str:
        message = f"{key_id}\n{asset_key}\n{expires}".encode("utf-8", "surrogatepass")
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()

    def key_id(self, caller: Caller) -> str:
        """The caller's id in URLs: an HMAC of its key fingerprint under the secret."""
        return hmac.new(self.secret, f"key id\n{caller.key_id}".encode(), hashlib.sha256).hexdigest()[:32]

    def sign(self, asset_key: str, caller: Caller, now: float | None = None) -> str:
        """The signed URL (path and query) of a stored image for this caller."""
        return f"{ASSETS_PATH}/{quote(asset_key)}?{self.query(asset_key, caller, now)}"

    def sign_file(self, document_id: str, caller: Caller, now: float | None = None) -> str:
        """The signed URL of a document's original file for this caller."""
        return f"/v1/documents/{quote(document_id)}/file?{self.query(file_subject(document_id), caller, now)}"

    def query(self, subject: str, caller: Caller, now: float | None = None) -> str:
        """``k=<key id>&e=<expiry>&s=<signature>`` of ``subject`` for this caller."""
        expires = int(now if now is not None else time.time()) + self.ttl_seconds
        key_id = self.key_id(caller)
        return urlencode({"k": key_id, "e": expires, "s": self._signature(key_id, subject, expires)})

    def verify(
        self, asset_key: str, key_id: str | None, expires: str | None, signature: str | None, now: float | None = None
    ) -> bool:
        """True while the URL is unexpired and its signature is ours; False for any malformed part."""
        if not (
            isinstance(key_id, str)
            and KEY_ID.fullmatch(key_id)
            and isinstance(signature, str)
            and SIGNATURE.fullmatch(signature)
            and isinstance(expires, str)
        ):
            return False
        try:
            at = int(expires)
        except (TypeError, ValueError):
            return False
        if at < (now if now is not None else time.time()):
            return False
        return hmac.compare_digest(self._signature(key_id, asset_key, at).encode(), signature.encode())

    def caller(
        self, keys: ApiKeys, asset_key: str, key_id: str | None, expires: str | None, signature: str | None
    ) -> Caller | None:
        """The caller a valid URL was signed for, while its API key is still configured; else None."""
        if key_id is None or not self.verify(asset_key, key_id, expires, signature):
            return None
        return next((c for c in keys.callers() if hmac.compare_digest(self.key_id(c), key_id)), None)

    def sign_url(self, url: str | None, caller: Caller) -> str | None:
        """A ``/v1/assets/<key>`` URL signed for the caller (other values unchanged)."""
        prefix = ASSETS_PATH + "/"
        if not url or not url.startswith(prefix) or "?" in url:
            return url
        return self.sign(url[len(prefix) :], caller)

    def sign_rows(self, rows: list[JsonObject], caller: Caller) -> list[JsonObject]:
        """Search results (or page records) with their image URLs signed for the caller, in place."""
        for row in rows:
            for name in URL_FIELDS:
                if row.get(name):
                    row[name] = self.sign_url(row[name], caller)
        return rows
