"""The HTTP server of ``kb-assets serve``: uvicorn on httptools, with a deadline on a request's headers.

uvicorn times a request's body out nowhere (``errors.BodyTimeout`` does, after the headers) and its
headers nowhere either: a connection that sends a request line and one header and then nothing stays
open for ever. ``HeaderDeadline`` gives every connection ``KB_BODY_TIMEOUT_S`` from its start, or from a
new request's first byte, to finish the request's headers; else it answers 408 and closes.
"""

from __future__ import annotations

import asyncio
import json

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# an RFC 9457 problem, as every error of the service (``errors.problem``)
BODY = json.dumps(
    {
        "type": "about:blank",
        "title": "Request Timeout",
        "status": 408,
        "detail": "the request's headers did not arrive within KB_BODY_TIMEOUT_S",
        "kind": "request_timeout",
    }
).encode()
LATE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/problem+json\r\nconnection: close\r\n"
    + b"content-length: %d\r\n\r\n" % len(BODY)
    + BODY
)


class HeaderDeadline(HttpToolsProtocol):
    """httptools' protocol with a deadline for the headers of each request (``timeout_s``)."""

    timeout_s = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = self.loop.call_later(self.timeout_s, self._headers_late)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:  # the next request of a kept-alive connection
            self._deadline = self.loop.call_later(self.timeout_s, self._headers_late)

    def on_headers_complete(self) -> None:
        self._cancel_deadline()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        super().connection_lost(exc)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _headers_late(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.write(LATE)
            self.transport.close()


def server_config(app, host: str, port: int, header_timeout_s: float, **options) -> uvicorn.Config:
    """uvicorn's configuration of the service: ``HeaderDeadline`` with ``header_timeout_s``."""
    protocol = type("HeaderDeadline", (HeaderDeadline,), {"timeout_s": header_timeout_s})
    return uvicorn.Config(app, host=host, port=port, http=protocol, **options)
