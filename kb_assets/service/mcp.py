"""The search as MCP tools over streamable HTTP at ``/mcp`` (the official ``mcp`` SDK's ``MCPServer``,
stateless, JSON answers), behind the same API keys and through the same code paths as the REST routes:

- ``kb_search``: ``Service.search`` (``POST /v1/kb/search``). Its text is one short block per result
  (title, page, section, score, the ``context`` window around the hit, an absolute signed image URL);
  its structured content is the ``SearchAnswer`` of the REST route, image URLs made absolute.
- ``kb_list``: ``Service.knowledge_bases`` (``GET /v1/knowledge-bases``): the knowledge bases the key may
  read, with their documents by status.

Both are read-only (``readOnlyHint``) and publish their output schema; ``serverInfo.version`` is the
package's. Absolute URLs start with ``KB_PUBLIC_URL`` (else the address the request came to). Arguments
that break the input schema, or that the tool does not take, are a tool error naming the argument and
the rule.

A request to ``/mcp`` without a valid ``Authorization: Bearer`` key is refused with 401 before the MCP
layer sees it (without ``KB_API_KEYS``, the service's loopback-only rule applies instead); the 401 names
the RFC 9728 protected-resource metadata (``WWW-Authenticate: Bearer resource_metadata="..."``), served
at ``/.well-known/oauth-protected-resource`` (and at ``.../mcp``, the RFC's path-inserted form) when
keys are on. It names no authorization server: keys are configured, not issued by OAuth. Host and Origin
are checked by the service for every route, ``/mcp`` included (``auth.HostCheck``), so the SDK's own
DNS-rebinding check is off: one rule, one setting (``KB_ALLOWED_HOSTS``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Annotated, Any

import anyio
from fastapi import HTTPException
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import AfterValidator, Field, ValidationError, WithJsonSchema
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match, NoMatchFound, Route
from starlette.types import Receive, Scope, Send

from kb_assets.lib.names import KNOWLEDGE_BASE_ID_PATTERN, validate_knowledge_base_id
from kb_assets.retrieval.overlap import covered_by
from kb_assets.retrieval.scope import describe
from kb_assets.service.auth import ANONYMOUS, Caller
from kb_assets.service.errors import problem
from kb_assets.service.handlers import Service
from kb_assets.service.schemas import KnowledgeBases, MetadataText, PeriodText, QueryText, SearchAnswer
from kb_assets.service.signing import URL_FIELDS

MCP_PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource"  # RFC 9728
MAX_PASSAGE_CHARS = 1000  # a result's text in kb_search's text content (context is at most 800 by default)
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

KnowledgeBaseName = Annotated[
    str,
    AfterValidator(validate_knowledge_base_id),
    WithJsonSchema({"type": "string", "pattern": KNOWLEDGE_BASE_ID_PATTERN}),
]


# errors -----------------------------------------------------------------------------------------------
def argument_errors(tool: str, error: ValidationError) -> str:
    """``invalid arguments for kb_search: limit: input should be less than or equal to 100 (got 500)``."""
    problems = []
    for item in error.errors(include_url=False):
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in item["loc"]).lstrip(".")
        rule = "required" if item["type"] == "missing" else item["msg"].removeprefix("Value error, ")
        got = "" if item["type"] in ("missing", "value_error") else f" (got {_shown(item.get('input'))})"
        problems.append(f"{where or 'arguments'}: {rule[:1].lower()}{rule[1:]}{got}")
    return f"invalid arguments for {tool}: " + "; ".join(problems)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class KbMcpServer(MCPServer):
    """``MCPServer`` whose argument errors name the argument and its rule (not pydantic's report), and
    which refuses arguments a tool does not take (a REST-style ``knowledgeBaseIds`` would else be dropped
    silently and every knowledge base searched)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        tool = next((t for t in await self.list_tools() if t.name == name), None)
        if tool is not None:
            accepted = tool.input_schema.get("properties", {})
            unknown = sorted(set(arguments) - set(accepted))
            if unknown:
                raise ToolError(
                    f"invalid arguments for {name}: {', '.join(unknown)} not accepted "
                    f"(it takes {', '.join(accepted) or 'no arguments'})"
                )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            if isinstance(error, UnexpectedToolError) or not isinstance(error.__cause__, ValidationError):
                raise
            raise ToolError(argument_errors(name, error.__cause__)) from error.__cause__


# text content -------------------------------------------------------------------------------------------
def search_text(answer: dict[str, Any]) -> str:
    """One short block per result, then the warnings: what the model reads (the structured content beside
    it holds every field)."""
    rows = answer["results"]
    blocks = [_result_block(number, row, covered_by(rows, number - 1)) for number, row in enumerate(rows, 1)]
    blocks = blocks or ["No results."]
    if answer["warnings"]:
        blocks.append("warnings: " + "; ".join(answer["warnings"]))
    return "\n\n".join(blocks)


def _result_block(number: int, row: dict[str, Any], holder: int | None = None) -> str:
    """A result's head line and passage (``holder``: the index of the result above that holds its passage)."""
    first, last = row["pageIndex"] + 1, row["pageEnd"] + 1  # 1-based, as people cite pages
    page = f"p. {first}" + (f"-{last}" if last > first else "")
    if row.get("pageLabel") and row["pageLabel"] != str(first):
        page += f" ({row['pageLabel']})"  # a printed page number, a sheet's name
    head = [row["documentTitle"] or row["sourceUri"] or row["documentId"], page]
    if about := describe(row.get("documentMetadata")):  # organisation · period · kind, read from its content
        head[0] += f" ({about})"
    if row["sectionTitle"]:
        head.append(row["sectionTitle"])
    head.append(f"score {row['score']:.4g}" if row["score"] is not None else "page match, no score")
    lines = [f"[{number}] " + " | ".join(head)]
    if row.get("versionNotice"):
        lines.append(f"note: {row['versionNotice']}")
    passage = "\n".join(line.strip() for line in (row.get("context") or row["content"]).strip().splitlines())
    if holder is not None:  # its page's text was handed over above (retrieval/overlap.py)
        passage = f"(its passage is in [{holder + 1}] above)"
    lines.append(passage if len(passage) <= MAX_PASSAGE_CHARS else passage[: MAX_PASSAGE_CHARS - 1] + "…")
    image = row.get("figureImageUrl") or row.get("pageImageUrl")
    if image:
        lines.append(f"image: {image}")
    return "\n".join(lines)


def list_text(listing: dict[str, Any]) -> str:
    rows = [
        f"{kb['knowledgeBaseId']}: {kb['documents']} documents ({kb['published']} published, "
        f"{kb['pending']} pending, {kb['failed']} failed)"
        for kb in listing["knowledgeBases"]
    ]
    return "\n".join(rows) or "This key may read no knowledge base that holds documents."


# URLs ---------------------------------------------------------------------------------------------------
def base_url(service: Service, request: Request | None) -> str:
    """The service's public base URL: ``KB_PUBLIC_URL``, else the address the request came to (its Host
    passed ``HostCheck``)."""
    if service.settings.public_url:
        return service.settings.public_url
    return str(request.base_url).rstrip("/") if request is not None else ""


def absolute_urls(rows: list[dict[str, Any]], base: str) -> None:
    for row in rows:
        for name in (*URL_FIELDS, "fileUrl"):
            if isinstance(row.get(name), str) and row[name].startswith("/"):
                row[name] = base + row[name]


# the endpoint ------------------------------------------------------------------------------------------
class Routes(BaseRoute):
    """Several routes that ``create_app`` appends as one (``McpEndpoint.route``)."""

    def __init__(self, *routes: Route):
        self.routes = routes

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        partial: tuple[Match, Scope] = (Match.NONE, {})
        for route in self.routes:
            match, child = route.matches(scope)
            if match is Match.FULL:
                return match, child
            if match is Match.PARTIAL and partial[0] is Match.NONE:
                partial = (match, child)
        return partial

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = next(r for r in self.routes if r.matches(scope)[0] is not Match.NONE)
        await route.handle(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> Any:
        raise NoMatchFound(name, path_params)


class McpEndpoint:
    """The ``/mcp`` route (and its RFC 9728 metadata): the MCP server's transport, its lifespan, its auth gate."""

    def __init__(self, server: MCPServer, service: Service):
        self.server, self.service = server, service
        server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        # POST only: a stateless JSON server sends nothing unasked, so GET (a standalone SSE stream that would
        # hold the connection forever) and DELETE (ending a session it never made) answer 405, as the spec allows
        self.route = Routes(
            Route(MCP_PATH, endpoint=self, methods=["POST"]),
            Route(METADATA_PATH, endpoint=self.metadata, methods=["GET"]),
            Route(METADATA_PATH + MCP_PATH, endpoint=self.metadata, methods=["GET"]),
        )

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with self.server.session_manager.run():
            yield

    async def metadata(self, request: Request) -> Response:
        """RFC 9728 protected-resource metadata: the resource and how to present a key (no authorization
        server: API keys come from the operator's ``KB_API_KEYS``)."""
        if not self.service.keys.enabled:
            return problem(404, "no API keys are configured: /mcp is not a protected resource")
        return JSONResponse(
            {
                "resource": base_url(self.service, request) + MCP_PATH,
                "bearer_methods_supported": ["header"],
                "resource_name": "kb-assets knowledge bases",
            }
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        authorization = request.headers.get("authorization")
        if self.service.keys.from_header(authorization) is None:
            challenge = f'resource_metadata="{base_url(self.service, request)}{METADATA_PATH}"'
            if authorization:
                challenge = f'error="invalid_token", {challenge}'
            response = problem(
                401,
                "missing or unknown API key (send Authorization: Bearer KEY; keys come from the operator)",
                headers={"WWW-Authenticate": f"Bearer {challenge}"},
            )
            await response(scope, receive, send)
            return
        await self.server.session_manager.handle_request(scope, receive, send)


# the tools ----------------------------------------------------------------------------------------------
def mcp_app(service: Service) -> McpEndpoint:
    """The MCP server with its tools ``kb_search`` and ``kb_list``, answering through ``service``."""
    server = KbMcpServer(
        "kb-assets",
        title="kb-assets knowledge bases",
        version=version("kb-assets"),
        instructions="Search the knowledge bases this API key may read (kb_list names them): "
        "passages of documents with their page, section and score.",
    )

    def caller_of(ctx: Context) -> Caller:
        caller = service.keys.from_header((ctx.headers or {}).get("authorization")) or ANONYMOUS
        if service.keys.enabled and caller is ANONYMOUS:
            raise ToolError("missing or unknown API key")
        return caller

    def request_of(ctx: Context) -> Request | None:
        request = ctx.request_context.request
        return request if isinstance(request, Request) else None

    @server.tool(
        name="kb_search",
        title="Search knowledge bases",
        description=(
            "Search knowledge bases for passages that answer a question. The text lists the best results, each "
            "with its document title (and organisation, period, kind when known), page (p. 1 is the first), "
            "section, score, the passage around the hit and an image URL; the structured content holds every "
            "field (chunkId, documentId, 0-based pageIndex, content, context, scores, signed image URLs)."
        ),
        annotations=READ_ONLY,
    )
    async def kb_search(
        query: Annotated[QueryText, Field(description="the question or keywords")],
        ctx: Context,
        knowledge_base_ids: Annotated[
            list[KnowledgeBaseName] | None,
            Field(max_length=100, description="knowledge bases to search (kb_list); none: every one the key may read"),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="results to return")] = 10,
        min_score: Annotated[
            float | None, Field(allow_inf_nan=False, description="drop results below this score")
        ] = None,
        period: Annotated[PeriodText | None, Field(description='only this period: "FY2022", "Q2 FY2023"')] = None,
        kind: Annotated[MetadataText | None, Field(description='only this kind: "annual report", "10-Q"')] = None,
        organisation: Annotated[MetadataText | None, Field(description="only this organisation")] = None,
    ) -> Annotated[CallToolResult, SearchAnswer]:
        caller = caller_of(ctx)
        filters = {"period": period, "kind": kind, "organisation": organisation}
        try:
            found = await anyio.to_thread.run_sync(
                lambda: service.search(
                    caller,
                    query,
                    knowledge_base_ids,
                    limit,
                    min_score,
                    None,
                    filters if any(filters.values()) else None,
                )
            )
        except HTTPException as error:  # 403 outside the key's scope, 422 a request the searcher refuses
            raise ToolError(str(error.detail)) from None
        answer = SearchAnswer.model_validate(found).model_dump(mode="json")  # the fields POST /v1/kb/search answers
        absolute_urls(answer["results"], base_url(service, request_of(ctx)))
        return CallToolResult(content=[TextContent(type="text", text=search_text(answer))], structured_content=answer)

    @server.tool(
        name="kb_list",
        title="List knowledge bases",
        description=(
            "The knowledge bases this API key may read, with their documents by status (published ones are "
            "searchable): the names kb_search takes in knowledge_base_ids."
        ),
        annotations=READ_ONLY,
    )
    async def kb_list(ctx: Context) -> Annotated[CallToolResult, KnowledgeBases]:
        caller = caller_of(ctx)
        listing = await anyio.to_thread.run_sync(lambda: service.knowledge_bases(caller))
        listing = KnowledgeBases.model_validate(listing).model_dump(mode="json")
        return CallToolResult(content=[TextContent(type="text", text=list_text(listing))], structured_content=listing)

    return McpEndpoint(server, service)
