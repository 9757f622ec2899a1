"""What an assistant sees through ``/mcp``, driven by the official ``mcp`` SDK client against real uvicorn
servers: the server's version, read-only tools with titles and output schemas, ``kb_list``, compact
``kb_search`` text beside the API's structured answer, absolute signed image URLs, argument errors that
name the argument, and the RFC 9728 metadata a 401 points to. Then deploy/kubernetes: two replicas given
the Secret's ``KB_URL_SIGNING_SECRET`` accept each other's image URLs."""

from __future__ import annotations

import asyncio
import json
from contextlib import ExitStack
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import yaml

from kb_assets.retrieval.overlap import covered_by
from kb_assets_tests.live_server import live_server

KEYS = "reader=handbook;other=elsewhere"
PUBLIC_URL = "https://kb.example.test"
QUESTION = "How long are backups kept?"
DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "kubernetes"


@pytest.fixture(scope="module")
def mcp_settings(settings, handbook):
    return replace(settings, api_keys=KEYS, url_signing_secret="mcp-test-secret", public_url=PUBLIC_URL)


def start(stack: ExitStack, settings, searcher) -> str:
    from kb_assets.service.api import create_app

    return stack.enter_context(live_server(create_app(settings, searcher, heal=False)))


@pytest.fixture(scope="module")
def server(mcp_settings, searcher):
    with ExitStack() as stack:
        yield start(stack, mcp_settings, searcher)


async def session(url: str, key: str | None, calls: list[tuple[str, dict]]):
    """(server info, tools, results of ``calls``) over one SDK client session."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            results = [await client.call_tool(name, arguments) for name, arguments in calls]
            return client.server_info, tools, results


def call(url: str, key: str, name: str, arguments: dict):
    return asyncio.run(session(url, key, [(name, arguments)]))[2][0]


def local(url: str, server: str) -> str:
    """A public URL (``KB_PUBLIC_URL``) as asked of the test server."""
    assert url.startswith(PUBLIC_URL + "/"), url
    return server + url.removeprefix(PUBLIC_URL)


# -- what the server announces --------------------------------------------------------------------------
def test_the_server_names_its_version_and_read_only_tools_with_titles_and_output_schemas(server):
    info, tools, _ = asyncio.run(session(server, "reader", []))
    assert info is not None and info.name == "kb-assets" and info.version == version("kb-assets")
    assert set(tools) == {"kb_search", "kb_list"}
    for tool in tools.values():
        assert tool.title and tool.annotations is not None
        assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False
    search = tools["kb_search"]
    assert set(search.input_schema["properties"]) == {
        "query",
        "knowledge_base_ids",
        "limit",
        "min_score",
        "period",
        "kind",
        "organisation",
    }
    result = search.output_schema["$defs"]["SearchResult"]["properties"]
    assert set(search.output_schema["properties"]) == {"results", "warnings", "timingsMs"}
    assert {"chunkId", "content", "context", "score", "pageIndex", "pageImageUrl"} <= set(result)
    assert set(tools["kb_list"].output_schema["properties"]) == {"knowledgeBases"}


# -- kb_list -------------------------------------------------------------------------------------------------
def test_kb_list_names_the_knowledge_bases_the_key_may_read_with_document_counts(server):
    listed = call(server, "reader", "kb_list", {})
    assert not listed.is_error
    (handbook,) = listed.structured_content["knowledgeBases"]
    assert handbook["knowledgeBaseId"] == "handbook" and handbook["documents"] == handbook["published"] == 8
    assert listed.content[0].text == "handbook: 8 documents (8 published, 0 pending, 0 failed)"
    nothing = call(server, "other", "kb_list", {})  # a key whose knowledge base holds no documents
    assert not nothing.is_error and nothing.structured_content == {"knowledgeBases": []}
    assert "no knowledge base" in nothing.content[0].text


# -- kb_search ----------------------------------------------------------------------------------------------
def test_kb_search_text_is_one_short_block_per_result_beside_the_api_answer(server):
    result = call(server, "reader", "kb_search", {"query": QUESTION, "limit": 10})
    assert not result.is_error
    answer, text = result.structured_content, result.content[0].text
    rows = answer["results"]
    assert len(rows) == 10 and text.count("\n\n[") == 9 and text.startswith("[1] ")

    # the structured content is the API's answer, image and file URLs absolute on KB_PUBLIC_URL
    rest = httpx.post(
        f"{server}/v1/kb/search", headers={"Authorization": "Bearer reader"}, json={"query": QUESTION}, timeout=120
    ).json()
    urls = ("pageImageUrl", "figureImageUrl", "fileUrl")
    assert [{k: v for k, v in r.items() if k not in urls} for r in rows] == [
        {k: v for k, v in r.items() if k not in urls} for r in rest["results"]
    ]
    for mine, theirs in zip(rows, rest["results"], strict=True):
        for name in urls:
            assert (mine[name] is None) == (theirs[name] is None)
            if mine[name]:
                assert urlsplit(mine[name]).path == urlsplit(theirs[name]).path
                assert mine[name].startswith(PUBLIC_URL + ("/v1/documents/" if name == "fileUrl" else "/v1/assets/"))

    # compact: the context once (not content and context twice), no JSON, a fraction of the answer's size
    pretty = json.dumps(answer, indent=2)
    assert len(text) < len(pretty) / 2 and '"content"' not in text
    for number, row in enumerate(rows, 1):
        block = text.split(f"[{number}] ", 1)[1].split("\n\n[", 1)[0]
        head, passage = block.split("\n", 2)[:2]
        assert head.startswith(row["documentTitle"] or row["sourceUri"]) and f"p. {row['pageIndex'] + 1}" in head
        assert (row["sectionTitle"] or "") in head
        assert f"score {row['score']:.4g}" in head if row["score"] is not None else "no score" in head
        holder = covered_by(rows, number - 1)  # its page's text handed over by a result above
        shown = f"(its passage is in [{holder + 1}] above)" if holder is not None else row["context"] or row["content"]
        assert passage[:100] == shown.strip().splitlines()[0].strip()[:100]
        image = row["figureImageUrl"] or row["pageImageUrl"]
        assert (f"image: {image}" in block) == bool(image)

    # an image URL in the text answers without a key, once asked of the server behind KB_PUBLIC_URL
    image = next(line.removeprefix("image: ") for line in text.splitlines() if line.startswith("image: "))
    fetched = httpx.get(local(image, server), timeout=60)
    assert fetched.status_code == 200 and fetched.content.startswith(b"\x89PNG")


def test_without_a_public_url_image_urls_start_with_the_address_asked(mcp_settings, searcher):
    with ExitStack() as stack:
        url = start(stack, replace(mcp_settings, public_url=""), searcher)
        rows = call(url, "reader", "kb_search", {"query": QUESTION}).structured_content["results"]
        image = next(r["pageImageUrl"] for r in rows if r["pageImageUrl"])
        assert image.startswith(f"{url}/v1/assets/")
        assert httpx.get(image, timeout=60).status_code == 200


@pytest.mark.parametrize(
    ("arguments", "names"),
    [
        ({"query": QUESTION, "limit": 500}, ["limit: input should be less than or equal to 100 (got 500)"]),
        ({"query": QUESTION, "limit": "ten"}, ["limit: input should be a valid integer", "(got 'ten')"]),
        ({"limit": 3}, ["query: required"]),
        ({"query": ""}, ["query: string should have at least 1 character"]),
        ({"query": "a\x00b"}, ["query: text contains a NUL character"]),
        (
            {"query": QUESTION, "knowledge_base_ids": ["handbook", "../etc"]},
            ["knowledge_base_ids[1]: knowledge base name '../etc' is not valid: 1-64 ASCII letters"],
        ),
        (
            {"query": QUESTION, "knowledgeBaseIds": ["handbook"]},
            ["knowledgeBaseIds not accepted", "knowledge_base_ids"],
        ),
        ({"query": QUESTION, "min_score": "high"}, ["min_score: input should be a valid number"]),
    ],
)
def test_a_bad_argument_is_a_tool_error_naming_it_and_its_rule(server, arguments, names):
    result = call(server, "reader", "kb_search", arguments)
    text = result.content[0].text
    assert result.is_error and text.startswith("invalid arguments for kb_search: "), text
    assert all(name in text for name in names), text
    assert "pydantic" not in text and "validation error" not in text.lower()


def test_a_knowledge_base_outside_the_key_or_unknown_is_the_same_tool_error(server):
    refused = call(server, "other", "kb_search", {"query": QUESTION, "knowledge_base_ids": ["handbook"]})
    unknown = call(server, "reader", "kb_search", {"query": QUESTION, "knowledge_base_ids": ["nope"]})
    said = refused.content[0].text  # the SDK puts "Error executing tool kb_search: " before the tool's words
    assert refused.is_error and "no knowledge base 'handbook': known ones are " in said
    assert "handbook" not in said.partition("known ones are ")[2]
    assert unknown.is_error and unknown.content[0].text.endswith("no knowledge base 'nope': known ones are handbook")


# -- 401 and the protected-resource metadata ---------------------------------------------------------------
@pytest.mark.parametrize(("authorization", "error"), [(None, None), ("Bearer nope", "invalid_token")])
def test_a_401_names_the_protected_resource_metadata(server, authorization, error):
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization:
        headers["Authorization"] = authorization
    refused = httpx.post(
        f"{server}/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30
    )
    assert refused.status_code == 401
    challenge = refused.headers["WWW-Authenticate"]
    metadata_url = f"{PUBLIC_URL}/.well-known/oauth-protected-resource"
    assert challenge.startswith("Bearer ") and f'resource_metadata="{metadata_url}"' in challenge
    assert ('error="invalid_token"' in challenge) == (error is not None)
    for path in ("", "/mcp"):  # the root document and RFC 9728's path-inserted form
        document = httpx.get(local(metadata_url + path, server), timeout=30)
        assert document.status_code == 200
        assert document.json() == {
            "resource": f"{PUBLIC_URL}/mcp",
            "bearer_methods_supported": ["header"],
            "resource_name": "kb-assets knowledge bases",
        }  # no authorization_servers: keys are configured, not issued
    assert httpx.post(local(metadata_url, server), timeout=30).status_code == 405
    assert httpx.get(f"{server}/mcp", headers={"Authorization": "Bearer reader"}, timeout=30).status_code == 405


def test_the_sdk_oauth_discovery_finds_the_metadata_and_no_authorization_server(server):
    """What an OAuth-only client of the SDK learns: where the metadata is, and that it names no
    authorization server (the SDK requires one, RFC 9728 does not): it needs a Bearer key instead."""
    import httpx2
    from mcp.client.auth.utils import (
        build_protected_resource_metadata_discovery_urls,
        extract_resource_metadata_from_www_auth,
    )
    from mcp.shared.auth import ProtectedResourceMetadata
    from pydantic import ValidationError

    refused = httpx2.post(f"{server}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30)
    assert refused.status_code == 401
    found = extract_resource_metadata_from_www_auth(refused)
    assert found == f"{PUBLIC_URL}/.well-known/oauth-protected-resource"
    assert build_protected_resource_metadata_discovery_urls(found, f"{PUBLIC_URL}/mcp") == [
        found,
        found + "/mcp",
        found,
    ]
    document = httpx2.get(local(found, server), timeout=30).json()
    with pytest.raises(ValidationError) as invalid:
        ProtectedResourceMetadata.model_validate(document)
    assert [error["loc"] for error in invalid.value.errors()] == [("authorization_servers",)]
    assert "missing or unknown API key" in refused.json()["detail"]


# -- deploy/kubernetes: one signing secret for every replica -----------------------------------------------
def deployed_signing_secret() -> str:
    """The KB_URL_SIGNING_SECRET every replica of retrieval-service.yaml reads, from config.example.yaml's Secret."""
    deployment = next(
        d for d in yaml.safe_load_all((DEPLOY / "retrieval-service.yaml").read_text()) if d["kind"] == "Deployment"
    )
    assert deployment["spec"]["replicas"] >= 2
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (entry,) = [e for e in container["env"] if e["name"] == "KB_URL_SIGNING_SECRET"]
    ref = entry["valueFrom"]["secretKeyRef"]
    assert not ref.get("optional", False)  # a pod without it does not start with a secret of its own
    assert ref["name"] in [s["secretRef"]["name"] for s in container["envFrom"] if "secretRef" in s]
    secret = next(
        d
        for d in yaml.safe_load_all((DEPLOY / "config.example.yaml").read_text())
        if d["kind"] == "Secret" and d["metadata"]["name"] == ref["name"]
    )
    return secret["stringData"][ref["key"]]


def test_two_replicas_with_the_deployed_secret_accept_each_others_image_urls(mcp_settings, searcher):
    secret = deployed_signing_secret()
    assert secret
    replica = replace(mcp_settings, url_signing_secret=secret)
    with ExitStack() as stack:
        first, second = start(stack, replica, searcher), start(stack, replica, searcher)
        alone = start(stack, replace(mcp_settings, url_signing_secret=""), searcher)  # a secret drawn per process
        rows = call(first, "reader", "kb_search", {"query": QUESTION}).structured_content["results"]
        image = next(r["pageImageUrl"] for r in rows if r["pageImageUrl"])
        for server in (first, second):
            fetched = httpx.get(local(image, server), timeout=60)
            assert fetched.status_code == 200 and fetched.content.startswith(b"\x89PNG")
        assert httpx.get(local(image, alone), timeout=60).status_code == 403
