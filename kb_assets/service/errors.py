"""What the service answers when a store is down or a request is malformed: 503 with the reason, or a
4xx, never a 500 (issue 9).

- Postgres unreachable (connection refused, server restarting, pool exhausted) and Milvus errors that
  reach a route: 503 ``{"detail": "... unavailable: <reason>"}`` with ``Retry-After``. Pooled
  connections that saw an error are dropped, so the next request reconnects (``catalog/connection.py``).
- Text that is not valid Unicode (a lone surrogate such as ``"\\ud800"``) or holds NUL: 422, by
  ``valid_text`` in the request models and ``check_id`` on path parameters; a knowledge-base name
  that breaks ``kb_assets/lib/names.py``'s pattern: 422 (``check_knowledge_base_ids``).
- A request body that has not fully arrived ``KB_BODY_TIMEOUT_S`` after the headers: 408, and the
  connection is closed (``BodyTimeout``), so a client that never sends its body holds nothing.
"""

from __future__ import annotations

import json
import logging

import anyio
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import Headers

from kb_assets.lib.logs import Outages
from kb_assets.lib.names import validate_knowledge_base_id

log = logging.getLogger("kb_assets.retrieval")
RETRY_AFTER_S = "2"


class StoreUnavailable(RuntimeError):
    """A store the request needs cannot be reached now; the message says which and why."""


def _reason(error: BaseException) -> str:
    return " ".join(str(error).split())[:200] or type(error).__name__


def valid_text(value: str) -> str:
    """Request text must be UTF-8 encodable (no lone surrogates) and hold no NUL."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text is not valid Unicode (a lone surrogate)") from None
    if "\x00" in value:
        raise ValueError("text contains a NUL character")
    return value


def check_id(value: str, what: str) -> str:
    """A path identifier (document id, chunk id, asset key): 404 when it cannot name anything stored."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise HTTPException(404, f"no {what} with that id") from None
    if not value or len(value) > 512 or any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise HTTPException(404, f"no {what} with that id")
    return value


def check_knowledge_base_ids(names: list[str] | None) -> list[str] | None:
    """A search body's ``knowledgeBaseIds`` when each is a valid name; else a 422 as a request model's."""
    errors = []
    for index, name in enumerate(names or []):
        try:
            validate_knowledge_base_id(name)
        except ValueError as error:
            errors.append(
                {"type": "value_error", "loc": ("body", "knowledgeBaseIds", index), "msg": str(error), "input": name}
            )
    if errors:
        raise RequestValidationError(errors)
    return names


class BodyTimeout:
    """ASGI middleware: a request that announces a body (``Content-Length`` or chunked) must deliver all
    of it within ``timeout_s``, else 408 and the connection closes. The body is read here, then handed
    on: the service's bodies are small JSON."""

    def __init__(self, app, timeout_s: float):
        self.app, self.timeout_s = app, timeout_s

    async def __call__(self, scope, receive, send) -> None:
        headers = Headers(scope=scope) if scope["type"] == "http" else {}
        if not ("content-length" in headers or "transfer-encoding" in headers):
            await self.app(scope, receive, send)
            return
        messages = []
        with anyio.move_on_after(self.timeout_s):
            while True:
                message = await receive()
                messages.append(message)
                if message["type"] != "http.request" or not message.get("more_body", False):
                    break
        if not messages or messages[-1].get("more_body", False):
            log.warning(
                "request body of %s %s not received within %s s", scope["method"], scope["path"], self.timeout_s
            )
            response = JSONResponse(
                {"detail": f"the request body did not arrive within {self.timeout_s:g} s (KB_BODY_TIMEOUT_S)"},
                status_code=408,
                headers={"Connection": "close"},
            )
            await response(scope, receive, send)
            return

        async def replay():
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


def install_error_handlers(app: FastAPI, outages: Outages) -> None:
    """Error answers of the app; ``outages``: its log of stores going away and coming back."""
    import psycopg2
    import psycopg2.pool
    from fastapi.encoders import jsonable_encoder
    from pymilvus.exceptions import MilvusException

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, error: RequestValidationError):
        """422 as FastAPI answers it, in ASCII JSON: the echoed input may hold a lone surrogate, which
        UTF-8 cannot carry, or be raw bytes that are not UTF-8 (the default handler then fails with a 500)."""
        detail = jsonable_encoder(error.errors(), custom_encoder={bytes: lambda b: b.decode("utf-8", "replace")})
        body = json.dumps({"detail": detail}, ensure_ascii=True, default=str)
        return Response(body, status_code=422, media_type="application/json")

    def unavailable(store: str, error: BaseException) -> JSONResponse:
        outages.failed(store, f"{type(error).__name__}: {_reason(error)}")
        return JSONResponse(
            {"detail": f"{store} unavailable: {_reason(error)}"},
            status_code=503,
            headers={"Retry-After": RETRY_AFTER_S},
        )

    @app.exception_handler(StoreUnavailable)
    async def store_unavailable(_: Request, error: StoreUnavailable):
        return unavailable("a store", error)

    @app.exception_handler(psycopg2.OperationalError)
    @app.exception_handler(psycopg2.InterfaceError)
    @app.exception_handler(psycopg2.pool.PoolError)
    async def postgres_unavailable(_: Request, error: Exception):
        return unavailable("Postgres", error)

    @app.exception_handler(MilvusException)
    async def milvus_unavailable(_: Request, error: Exception):
        return unavailable("Milvus", error)
