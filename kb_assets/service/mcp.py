"""The search as an MCP tool: ``kb_search`` over streamable HTTP at ``/mcp`` (the official ``mcp`` SDK's
``MCPServer``, stateless, JSON answers), behind the same API keys and through the same code path as
``POST /v1/kb/search`` (``Service.search``).

A request to ``/mcp`` without a valid ``Authorization: Bearer`` key is refused with 401 before the
MCP layer sees it (without ``KB_API_KEYS``, the service's loopback-only rule applies instead). Host and
Origin are checked by the service for every route, ``/mcp`` included (``auth.HostCheck``), so the SDK's
own DNS-rebinding check is off: one rule, one setting (``KB_ALLOWED_HOSTS``). The tool reads the
caller's key from the request it serves; asking for a knowledge base outside the key's scope, or one
whose name is not valid, is a tool error naming it.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Annotated, Any

import anyio
from fastapi import HTTPException
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import Field
from starlette.responses import JSONResponse
from starlette.routing import Route

from kb_assets.lib.names import validate_knowledge_base_id
from kb_assets.service.auth import ANONYMOUS
from kb_assets.service.schemas import SearchAnswer

MCP_PATH = "/mcp"


class McpEndpoint:
    """The ``/mcp`` route: the service's ASGI app of the MCP server, its lifespan, its auth gate."""

    def __init__(self, server, keys):
        self.server, self.keys = server, keys
        server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        # POST only: a stateless JSON server sends nothing unasked, so GET (a standalone SSE stream that would
        # hold the connection forever) and DELETE (ending a session it never made) answer 405, as the spec allows
        self.route = Route(MCP_PATH, endpoint=self, methods=["POST"])

    @asynccontextmanager
    async def lifespan(self):
        async with self.server.session_manager.run():
            yield

    async def __call__(self, scope, receive, send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if self.keys.from_header(headers.get("authorization")) is None:
            response = JSONResponse(
                {"detail": "missing or unknown API key (send Authorization: Bearer KEY)"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        await self.server.session_manager.handle_request(scope, receive, send)


def mcp_app(service) -> McpEndpoint:
    """The MCP server with its one tool, ``kb_search``, searching through ``service``."""
    server = MCPServer(
        "kb-assets",
        instructions="Search the knowledge bases this API key may read: "
        "chunks of documents with their page, section and score.",
    )

    @server.tool(
        name="kb_search",
        description=(
            "Search knowledge bases for passages that answer a question. Returns the best chunks, each with its "
            "document, 0-based pageIndex, section, content and score (null for page-fallback rows)."
        ),
    )
    async def kb_search(
        query: Annotated[str, Field(min_length=1, max_length=2000, description="the question or keywords")],
        ctx: Context,
        knowledge_base_ids: Annotated[
            list[str] | None,
            Field(max_length=100, description="knowledge bases to search; none: every one the key may read"),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
        min_score: Annotated[float | None, Field(description="drop results below this score")] = None,
    ) -> dict[str, Any]:
        caller = service.keys.from_header((ctx.headers or {}).get("authorization")) or ANONYMOUS
        if service.keys.enabled and caller is ANONYMOUS:
            raise ToolError("missing or unknown API key")
        for name in knowledge_base_ids or []:
            try:
                validate_knowledge_base_id(name)
            except ValueError as error:
                raise ToolError(f"422: {error}") from None
        try:
            answer = await anyio.to_thread.run_sync(
                lambda: service.search(caller, query, knowledge_base_ids, limit, min_score)
            )
        except HTTPException as error:  # 403 outside the key's scope, 422 a refused request
            raise ToolError(f"{error.status_code}: {error.detail}") from None
        return SearchAnswer.model_validate(answer).model_dump()  # the fields POST /v1/kb/search answers

    return McpEndpoint(server, service.keys)
