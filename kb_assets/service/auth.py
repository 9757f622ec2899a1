"""Who is calling the service: API keys scoped to knowledge bases (``KB_API_KEYS="key1=kbA,kbB;key2=*"``,
sent as ``Authorization: Bearer KEY``), or, without keys, anyone on this machine; and under which names
(``Host``) it may be called (``HostPolicy``, against DNS rebinding).

A caller is known inside the process by a fingerprint of its key (never the key itself); signed image
URLs carry an HMAC of that fingerprint under the URL signing secret (``kb_assets/service/signing.py``): a
URL stops working when its key is removed from ``KB_API_KEYS``.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.datastructures import Headers

from kb_assets.lib.names import validate_knowledge_base_id
from kb_assets.service.errors import problem


def parse_api_keys(spec: str) -> dict[str, set[str] | None]:
    """``key1=kbA,kbB;key2=*`` -> {key1: {kbA, kbB}, key2: None (every knowledge base)}. Every knowledge
    base must be a valid name (``kb_assets/lib/names.py``) or ``*``."""
    keys: dict[str, set[str] | None] = {}
    for number, item in enumerate(filter(None, (part.strip() for part in spec.split(";"))), 1):
        key, _, scope = item.partition("=")
        kbs = {kb.strip() for kb in scope.split(",") if kb.strip()}
        if not key.strip() or not kbs:
            raise ValueError(f"KB_API_KEYS: an entry is not KEY=kbA,kbB or KEY=* (scope {scope!r})")
        for kb in kbs - {"*"}:
            try:
                validate_knowledge_base_id(kb)
            except ValueError as error:
                raise ValueError(f"KB_API_KEYS: {error}") from None
        if key.strip() in keys:  # the last entry would silently win; the message never shows a key
            raise ValueError(
                f"KB_API_KEYS: the key of entry {number} is given twice: give each key once, with all its "
                "knowledge bases (KEY=kbA,kbB)"
            )
        keys[key.strip()] = None if "*" in kbs else kbs
    return keys


def is_loopback(host: str | None) -> bool:
    """127.0.0.0/8, ::1 or ``localhost``: this machine only."""
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return host == "localhost"


def fingerprint(key: str) -> str:
    """A short, stable name of an API key inside the process (URLs carry an HMAC of it, never this)."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Caller:
    """An authenticated caller: its key's fingerprint ("" without keys) and the knowledge bases it may
    read (None: every one)."""

    key_id: str
    scope: frozenset[str] | None

    def may_read(self, knowledge_base_id: str | None) -> bool:
        return self.scope is None or knowledge_base_id in self.scope


ANONYMOUS = Caller("", None)


class ApiKeys:
    """The configured keys; without any, every (loopback) caller is ``ANONYMOUS``."""

    def __init__(self, spec: str):
        self.keys = parse_api_keys(spec)

    @property
    def enabled(self) -> bool:
        return bool(self.keys)

    def from_header(self, authorization: str | None) -> Caller | None:
        """The caller of an ``Authorization`` header; None when keys are set and it names none."""
        if not self.keys:
            return ANONYMOUS
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or token not in self.keys:
            return None
        return self._caller(token)

    def callers(self) -> list[Caller]:
        """Every configured caller (``ANONYMOUS`` alone without keys)."""
        return [self._caller(key) for key in self.keys] or [ANONYMOUS]

    def _caller(self, key: str) -> Caller:
        scope = self.keys[key]
        return Caller(fingerprint(key), None if scope is None else frozenset(scope))


# Host names -----------------------------------------------------------------------------------------
UNCHECKED_PATHS = ("/healthz", "/readyz")  # no data: any Host (load balancers, Kubernetes probes)


def host_name(authority: str) -> str:
    """The host of a ``Host`` header or URL authority, lower case, without port or trailing dot:
    ``[::1]:8000`` -> ``::1``, ``KB.example.com:443`` -> ``kb.example.com``."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        authority = authority[1:].partition("]")[0]
    elif authority.count(":") == 1:
        authority = authority.partition(":")[0]
    return authority.rstrip(".")


class HostPolicy:
    """The ``Host`` names the service answers (a page on another site whose name resolves to this
    machine must not read it: DNS rebinding): loopback names (``localhost``, 127.0.0.0/8, ``[::1]``),
    ``KB_PUBLIC_URL``'s host and the names of ``KB_ALLOWED_HOSTS``; ``*`` any, only with API keys."""

    def __init__(self, allowed_hosts: str = "", public_url: str = "", keyed: bool = False):
        names = {host_name(name) for name in allowed_hosts.split(",") if name.strip()}
        self.any = "*" in names
        if self.any and not keyed:
            raise ValueError(
                "KB_ALLOWED_HOSTS=*: any Host is accepted only with KB_API_KEYS set; "
                "without keys name the hosts (or leave it unset: loopback names only)"
            )
        if public_url:
            parsed = urlsplit(public_url)
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise ValueError(
                    f"KB_PUBLIC_URL={public_url!r}: expected the service's base URL, e.g. https://kb.example.com"
                )
            names.add(host_name(parsed.hostname))
        self.names = frozenset(names - {"*", ""})

    @classmethod
    def from_settings(cls, settings) -> HostPolicy:
        return cls(settings.allowed_hosts, settings.public_url, keyed=bool(parse_api_keys(settings.api_keys)))

    def allows(self, authority: str | None) -> bool:
        name = host_name(authority or "")
        return self.any or (bool(name) and (is_loopback(name) or name in self.names))


def _authority(url: str) -> str:
    """The ``host:port`` of a URL ("" for ``null`` or a malformed one)."""
    try:
        return urlsplit(url).netloc
    except ValueError:
        return ""


class HostCheck:
    """ASGI middleware: 421 for a request whose ``Host`` the policy does not allow (every path but
    ``UNCHECKED_PATHS``); without keys also 403 for a browser request from a page of another site
    (its ``Origin``)."""

    def __init__(self, app, policy: HostPolicy, keyed: bool):
        self.app, self.policy, self.keyed = app, policy, keyed

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"] not in UNCHECKED_PATHS:
            headers = Headers(scope=scope)
            refusal = None
            if not self.policy.allows(headers.get("host")):
                refusal = problem(
                    421,
                    "this service does not answer requests to host "
                    f"{headers.get('host', '')[:100]!r}: add it to "
                    "KB_ALLOWED_HOSTS (or set KB_PUBLIC_URL to the address clients use)",
                )
            elif not self.keyed and "origin" in headers and not self.policy.allows(_authority(headers["origin"])):
                refusal = problem(
                    403,
                    "no API keys are configured: pages of other sites may not call "
                    "this service (add their host to KB_ALLOWED_HOSTS)",
                )
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)
