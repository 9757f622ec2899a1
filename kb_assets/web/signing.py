"""Short-lived signed URLs of page and figure images.

An ``<img>`` cannot send ``Authorization: Bearer``, so the service hands out image URLs that carry their
own proof: ``/v1/assets/<key>?k=<key id>&e=<expiry>&s=<signature>``, where the signature is an
HMAC-SHA256 (``KB_URL_SIGNING_SECRET``) of the caller's key id (a fingerprint of its API key), the
asset key and the expiry (unix seconds, ``KB_URL_TTL_SECONDS`` ahead). The asset route accepts such a
URL until it expires, while that API key is still configured and may still read the asset's document.

Without ``KB_URL_SIGNING_SECRET`` a random secret is drawn per process: URLs then work only against the
process that signed them. Several replicas behind one address must share one secret.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from urllib.parse import quote, urlencode

from kb_assets.retrieval.auth import Caller
from kb_assets.retrieval.rows import ASSETS_PATH

URL_FIELDS = ("pageImageUrl", "figureImageUrl", "imageUrl")


class UrlSigner:
    def __init__(self, secret: str = "", ttl_seconds: int = 300):
        self.secret = secret.encode() if secret else secrets.token_bytes(32)
        self.ttl_seconds = ttl_seconds

    def _signature(self, key_id: str, asset_key: str, expires: int) -> str:
        message = f"{key_id}\n{asset_key}\n{expires}".encode()
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()

    def sign(self, asset_key: str, caller: Caller, now: float | None = None) -> str:
        """The signed URL (path and query) of a stored image for this caller."""
        expires = int(now if now is not None else time.time()) + self.ttl_seconds
        query = urlencode({"k": caller.key_id, "e": expires, "s": self._signature(caller.key_id, asset_key, expires)})
        return f"{ASSETS_PATH}/{quote(asset_key)}?{query}"

    def verify(self, asset_key: str, key_id: str, expires: str, signature: str, now: float | None = None) -> bool:
        """True while the URL is unexpired and its signature is ours."""
        try:
            at = int(expires)
        except (TypeError, ValueError):
            return False
        if at < (now if now is not None else time.time()):
            return False
        return hmac.compare_digest(self._signature(key_id, asset_key, at), signature or "")

    def sign_url(self, url: str | None, caller: Caller) -> str | None:
        """A ``/v1/assets/<key>`` URL signed for the caller (other values unchanged)."""
        prefix = ASSETS_PATH + "/"
        if not url or not url.startswith(prefix) or "?" in url:
            return url
        return self.sign(url[len(prefix):], caller)

    def sign_rows(self, rows: list[dict], caller: Caller) -> list[dict]:
        """Search results (or page records) with their image URLs signed for the caller, in place."""
        for row in rows:
            for name in URL_FIELDS:
                if row.get(name):
                    row[name] = self.sign_url(row[name], caller)
        return rows
