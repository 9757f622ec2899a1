"""What the service answers when a store is down or a request is malformed: 503 with the reason, or a
4xx, never a 500 (issue 9), each as an RFC 9457 problem (issue 54): ``application/problem+json`` with
``type`` (``about:blank``: the status says what kind of failure it is), ``title`` (the status's phrase),
``status``, ``detail`` (one line: what failed and what to do) and ``kind``, the word the command line's
``--json`` errors use for the same failure (``postgres_unavailable``, ``unknown_knowledge_base``,
``invalid_input``, ...; ``KINDS`` for the rest). A 422 also lists ``errors`` (``loc``, ``msg``, ``type``).

- Postgres unreachable (connection refused, server restarting, pool exhausted) and Milvus errors that
  reach a route: 503 ``postgres_unavailable`` / ``milvus_unavailable`` with ``Retry-After``. Pooled
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
from collections.abc import Mapping
from http import HTTPStatus

import anyio
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, Field
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException

from kb_assets.lib.logs import Outages
from kb_assets.lib.names import validate_knowledge_base_id

log = logging.getLogger("kb_assets.retrieval")
RETRY_AFTER_S = "2"


PROBLEM_JSON = "application/problem+json"
# the kind of a failure by its status, where the raiser names none (the command line's words where it has them)
KINDS = {
    400: "invalid_input",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    421: "misdirected_request",
    422: "invalid_input",
    503: "service_unavailable",
}


class ProblemDetails(BaseModel):
    """An error answer (RFC 9457), as ``application/problem+json``."""

    type: str = Field("about:blank", description="about:blank: the status and ``kind`` say what failed")
    title: str = Field(description="the status's phrase: Not Found, Service Unavailable, ...")
    status: int
    detail: str = Field(description="what failed and what to do, in one line")
    kind: str = Field(
        description="the failure's name, as the command line's --json errors give it: postgres_unavailable, "
        "milvus_unavailable, service_unavailable, unknown_knowledge_base, not_found, invalid_input, "
        "unauthorized, forbidden, request_timeout, misdirected_request, method_not_allowed"
    )
    errors: list[dict] | None = Field(None, description="422: each invalid field (loc, msg, type)")


# every route's error answers in OpenAPI (``FastAPI(responses=...)``)
PROBLEM_RESPONSES: dict[int | str, dict] = {
    status: {"description": description, "content": {PROBLEM_JSON: {"schema": ProblemDetails.model_json_schema()}}}
    for status, description in (
        ("4XX", "the request cannot be answered: a problem (RFC 9457) whose kind says why"),
        (503, "a store is down: a problem naming it, with Retry-After"),
    )
}


class Problem(HTTPException):
    """An HTTP error with the ``kind`` its problem answer names (else ``KINDS`` by status)."""

    def __init__(self, status: int, detail: str, kind: str, headers: Mapping[str, str] | None = None):
        super().__init__(status, detail, dict(headers) if headers else None)
        self.kind = kind


def problem(
    status: int, detail: str, kind: str | None = None, headers: Mapping[str, str] | None = None, **extra
) -> Response:
    """The RFC 9457 answer of an error (``extra``: members such as ``errors``)."""
    body = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "kind": kind or KINDS.get(status, "invalid_input" if status < 500 else "service_unavailable"),
        **extra,
    }
    # ASCII JSON: a detail or an echoed field may hold a lone surrogate, which UTF-8 cannot carry
    content = json.dumps(body, ensure_ascii=True, default=str).encode()
    return Response(content, status_code=status, headers=dict(headers or {}), media_type=PROBLEM_JSON)


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
            response = problem(
                408,
                f"the request body did not arrive within {self.timeout_s:g} s (KB_BODY_TIMEOUT_S)",
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
    from pymilvus.exceptions import MilvusException

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, error: StarletteHTTPException):
        """Every 4xx a route or the router raises (no such route: 404, a wrong method: 405)."""
        return problem(error.status_code, str(error.detail), getattr(error, "kind", None), error.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, error: RequestValidationError):
        """422 listing each invalid field; the input is not echoed (it may be raw bytes that are not UTF-8)."""
        errors = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
            for e in error.errors()
        ]
        detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors)[:500]
        return problem(422, detail or "the request is not valid", "invalid_input", errors=errors)

    def unavailable(store: str, kind: str, error: BaseException) -> Response:
        outages.failed(store, f"{type(error).__name__}: {_reason(error)}")
        return problem(503, f"{store} unavailable: {_reason(error)}", kind, {"Retry-After": RETRY_AFTER_S})

    @app.exception_handler(StoreUnavailable)
    async def store_unavailable(_: Request, error: StoreUnavailable):
        return unavailable("a store", "service_unavailable", error)

    @app.exception_handler(psycopg2.OperationalError)
    @app.exception_handler(psycopg2.InterfaceError)
    @app.exception_handler(psycopg2.pool.PoolError)
    async def postgres_unavailable(_: Request, error: Exception):
        return unavailable("Postgres", "postgres_unavailable", error)

    @app.exception_handler(MilvusException)
    async def milvus_unavailable(_: Request, error: Exception):
        return unavailable("Milvus", "milvus_unavailable", error)
