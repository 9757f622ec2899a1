"""Who is calling the service: API keys scoped to knowledge bases (``KB_API_KEYS="key1=kbA,kbB;key2=*"``,
sent as ``Authorization: Bearer KEY``), or, without keys, anyone on this machine.

A caller is known by a fingerprint of its key (never the key itself), which signed image URLs carry
(``kb_assets/web/signing.py``): a URL stops working when its key is removed from ``KB_API_KEYS``.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass


def parse_api_keys(spec: str) -> dict[str, set[str] | None]:
    """``key1=kbA,kbB;key2=*`` -> {key1: {kbA, kbB}, key2: None (every knowledge base)}."""
    keys: dict[str, set[str] | None] = {}
    for item in filter(None, (part.strip() for part in spec.split(";"))):
        key, _, scope = item.partition("=")
        kbs = {kb.strip() for kb in scope.split(",") if kb.strip()}
        if not key.strip() or not kbs:
            raise ValueError(f"KB_API_KEYS: {item!r} is not KEY=kbA,kbB or KEY=*")
        keys[key.strip()] = None if "*" in kbs else kbs
    return keys


def is_loopback(host: str | None) -> bool:
    """127.0.0.0/8, ::1 or ``localhost``: this machine only."""
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return host == "localhost"


def fingerprint(key: str) -> str:
    """A short, stable name of an API key that does not reveal it."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Caller:
    """An authenticated caller: its key's fingerprint ("" without keys) and the knowledge bases it may
    read (None: every one)."""

    key_id: str
    scope: frozenset[str] | None

    def may_read(self, knowledge_base_id: str | None) -> bool:
        return self.scope is None or knowledge_base_id in self.scope

    def knowledge_bases(self, requested: list[str] | None) -> list[str] | None:
        """The knowledge bases a request searches: those asked for (deduplicated), else every one the
        caller may read (None: all). PermissionError names those outside the caller's scope."""
        requested = list(dict.fromkeys(requested)) if requested else None
        if self.scope is None:
            return requested
        if requested and not set(requested) <= self.scope:
            raise PermissionError(f"this key may not read {sorted(set(requested) - self.scope)}")
        return requested or sorted(self.scope)


ANONYMOUS = Caller("", None)


class ApiKeys:
    """The configured keys; without any, every (loopback) caller is ``ANONYMOUS``."""

    def __init__(self, spec: str):
        self.keys = parse_api_keys(spec)
        self._by_id = {fingerprint(key): key for key in self.keys}

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

    def from_key_id(self, key_id: str) -> Caller | None:
        """The caller whose key has this fingerprint, while that key is configured."""
        if not self.keys:
            return ANONYMOUS if key_id == "" else None
        key = self._by_id.get(key_id)
        return self._caller(key) if key is not None else None

    def _caller(self, key: str) -> Caller:
        scope = self.keys[key]
        return Caller(fingerprint(key), None if scope is None else frozenset(scope))
