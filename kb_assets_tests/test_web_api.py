"""What the web page and agents use (issue 14): signed image URLs, knowledge bases and their documents,
lineage with regions in page units, and the MCP tool ``kb_search`` over streamable HTTP, which answers
as ``POST /v1/kb/search`` does and refuses knowledge bases outside the key's scope."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import httpx
import pytest
from fastapi.testclient import TestClient

from kb_assets_tests.corpora import ensure_retrieval_corpus
from kb_assets_tests.live_server import live_server

LOCAL = ("127.0.0.1", 50000)
BASE_URL = "http://localhost"  # a Host the service answers (not TestClient's "testserver")
KEYS = "alpha-key=alpha;all-key=*"
ALPHA, ALL = {"Authorization": "Bearer alpha-key"}, {"Authorization": "Bearer all-key"}


@pytest.fixture(scope="module")
def web_settings(kb_home, settings, handbook):
    ensure_retrieval_corpus(kb_home, settings)
    return replace(settings, api_keys=KEYS, url_signing_secret="test-secret", dagster_url="http://dagster.test")


@pytest.fixture(scope="module")
def client(web_settings):
    from kb_assets.service.api import create_app

    with TestClient(create_app(web_settings, heal=False), client=LOCAL, base_url=BASE_URL) as client:
        yield client


@pytest.fixture(scope="module")
def server(web_settings):
    """A real uvicorn server on 127.0.0.1 (what the MCP client talks to)."""
    from kb_assets.service.api import create_app

    with live_server(create_app(web_settings, heal=False)) as url:
        yield url


def handbook_pdf_result(client) -> dict:
    answer = client.post(
        "/v1/kb/search",
        headers=ALL,
        json={"query": "How long are backups kept?", "knowledgeBaseIds": ["handbook"], "strategy": "hybrid"},
    )
    assert answer.status_code == 200
    return next(r for r in answer.json()["results"] if r["sourceUri"].endswith(".pdf"))


def test_image_urls_are_signed_short_lived_and_bound_to_the_key(client, web_settings):
    from kb_assets.service.auth import ApiKeys
    from kb_assets.service.signing import UrlSigner

    row = handbook_pdf_result(client)
    url = row["pageImageUrl"]
    assert url.startswith("/v1/assets/pages/") and "&s=" in url
    image = client.get(url)  # no header: the URL is its own proof
    assert image.status_code == 200 and image.content.startswith(b"\x89PNG")
    assert client.get(url[:-1] + ("0" if url[-1] != "0" else "1")).status_code == 403
    assert client.get(url.split("?")[0]).status_code == 401  # neither signed nor a key
    assert client.get(url.split("?")[0], headers=ALL).status_code == 200  # a Bearer key still works
    key = url.split("?")[0].removeprefix("/v1/assets/")
    caller = ApiKeys(KEYS).from_header("Bearer all-key")
    expired = UrlSigner("test-secret", ttl_seconds=-1).sign(key, caller)
    assert client.get(expired).status_code == 403
    other_secret = UrlSigner("another-secret").sign(key, caller)
    assert client.get(other_secret).status_code == 403
    alpha_signed = UrlSigner("test-secret").sign(key, ApiKeys(KEYS).from_header("Bearer alpha-key"))
    assert client.get(alpha_signed).status_code == 404  # a valid URL for a key that may not read it


def test_the_url_key_id_is_an_hmac_under_the_signing_secret_not_a_hash_of_the_key(client):
    """A leaked URL's key id cannot be recomputed from guessed API keys without the secret."""
    import hashlib
    from urllib.parse import parse_qs, urlsplit

    from kb_assets.service.auth import ApiKeys
    from kb_assets.service.signing import UrlSigner

    url = handbook_pdf_result(client)["pageImageUrl"]
    key_id = parse_qs(urlsplit(url).query)["k"][0]
    unsalted = [hashlib.sha256(guess.encode()).hexdigest() for guess in ("all-key", "alpha-key")]
    assert not any(h.startswith(key_id) or key_id.startswith(h[:16]) for h in unsalted)
    caller = ApiKeys(KEYS).from_header("Bearer all-key")
    assert UrlSigner("test-secret").key_id(caller) == key_id != UrlSigner("another-secret").key_id(caller)
    assert client.get(url).status_code == 200


@pytest.mark.parametrize("signature", ["%C3%A9", "abc", "zz" * 32, "A" * 64, "0" * 63, "é" * 64, ""])
def test_malformed_signatures_are_403(client, signature):
    from urllib.parse import quote

    url = handbook_pdf_result(client)["pageImageUrl"]
    base = url.split("&s=")[0]
    value = signature if signature.startswith("%") else quote(signature)
    assert client.get(f"{base}&s={value}").status_code == 403
    assert client.get(url.replace("k=", "k=%C3%A9")).status_code == 403  # a non-ASCII key id


def test_knowledge_bases_and_documents_are_listed_within_the_key_scope(client):
    everything = client.get("/v1/knowledge-bases", headers=ALL).json()["knowledgeBases"]
    assert {"alpha", "beta", "handbook"} <= {kb["knowledgeBaseId"] for kb in everything}
    handbook = next(kb for kb in everything if kb["knowledgeBaseId"] == "handbook")
    assert handbook["documents"] == handbook["published"] == 8
    scoped = client.get("/v1/knowledge-bases", headers=ALPHA).json()["knowledgeBases"]
    assert [kb["knowledgeBaseId"] for kb in scoped] == ["alpha"]
    assert client.get("/v1/knowledge-bases/beta/documents", headers=ALPHA).status_code == 404
    docs = client.get("/v1/knowledge-bases/handbook/documents", headers=ALL).json()["documents"]
    assert len(docs) == 8 and all(d["status"] == "published" and d["pages"] and d["chunks"] for d in docs)
    assert all(d["lastRunUrl"] == f"http://dagster.test/runs/{d['lastRunId']}" for d in docs)
    info = client.get("/v1/service", headers=ALPHA).json()
    assert set(info["strategies"]) == {"hybrid", "pageindex"} and info["dagsterUrl"] == "http://dagster.test"


def test_a_failed_document_shows_its_reason_in_the_documents_view(client, kb_home, settings):
    from kb_assets.launch.ingest import ingest

    folder = kb_home / "web-failed"
    folder.mkdir(exist_ok=True)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a PDF")
    (folder / "fine.md").write_text("# Fine\n\nA fine document about gamma rays.\n", encoding="utf-8")
    ingest([folder], "gamma", settings)
    docs = {
        d["sourcePath"]: d for d in client.get("/v1/knowledge-bases/gamma/documents", headers=ALL).json()["documents"]
    }
    assert docs["fine.md"]["status"] == "published"
    assert docs["broken.pdf"]["status"] == "failed" and "broken.pdf" in docs["broken.pdf"]["error"]


def test_lineage_returns_the_chunk_regions_in_page_units_with_the_page_size_and_image(client):
    row = handbook_pdf_result(client)
    lineage = client.get(f"/v1/chunks/{row['chunkId']}/lineage", headers=ALL).json()
    assert lineage["verified"] and lineage["regions"]
    pages = {p["pageIndex"]: p for p in lineage["pages"]}
    for region in lineage["regions"]:
        page = pages[region["pageIndex"]]
        assert 0 <= region["l"] < region["r"] <= page["width"] and 0 <= region["t"] < region["b"] <= page["height"]
    assert all(p["imageUrl"] and "&s=" in p["imageUrl"] for p in lineage["pages"])
    assert {r["asset"] for r in lineage["runs"]} == {
        "parsed_pages",
        "pageindex_trees",
        "chunks",
        "embeddings",
        "milvus_collection",
    }
    assert all(r["url"] == f"http://dagster.test/runs/{r['runId']}" for r in lineage["runs"] if r["runId"])
    assert lineage["document"]["sizeBytes"] > 0 and lineage["document"]["sourceKind"] == "pdf"
    markdown = client.post("/v1/kb/search", headers=ALPHA, json={"query": "How long are backups kept?"}).json()
    text_only = client.get(f"/v1/chunks/{markdown['results'][0]['chunkId']}/lineage", headers=ALPHA).json()
    assert text_only["regions"] == [] and text_only["pages"][0]["width"] is None  # the text view


async def mcp_search(url: str, key: str, arguments: dict):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as mcp:
            tools = await mcp.list_tools()
            return [t.name for t in tools.tools], await mcp.call_tool("kb_search", arguments)


def test_mcp_kb_search_answers_as_the_search_endpoint_and_keeps_keys_to_their_scope(server):
    query = {"query": "How long are backups kept?", "knowledgeBaseIds": ["alpha", "beta"], "limit": 4}
    rest = httpx.post(f"{server}/v1/kb/search", headers=ALL, json=query, timeout=120).json()
    tools, result = asyncio.run(
        mcp_search(
            server, "all-key", {"query": query["query"], "knowledge_base_ids": query["knowledgeBaseIds"], "limit": 4}
        )
    )
    assert tools == ["kb_search", "kb_list"] and not result.is_error
    answer = result.structured_content
    strip = lambda rows: [{k: v for k, v in r.items() if not k.endswith("Url")} for r in rows]  # noqa: E731
    assert strip(answer["results"]) == strip(rest["results"]) and rest["results"]
    assert answer["warnings"] == rest["warnings"]

    _, refused = asyncio.run(mcp_search(server, "alpha-key", {"query": "backups", "knowledge_base_ids": ["beta"]}))
    assert refused.is_error and refused.content[0].text.endswith("no knowledge base 'beta': known ones are alpha")
    _, invalid = asyncio.run(mcp_search(server, "all-key", {"query": "backups", "knowledge_base_ids": ["../etc"]}))
    assert invalid.is_error and "knowledge_base_ids[0]" in invalid.content[0].text
    assert "not valid" in invalid.content[0].text
    _, scoped = asyncio.run(mcp_search(server, "alpha-key", {"query": "backups"}))
    assert not scoped.is_error and {r["knowledgeBaseId"] for r in scoped.structured_content["results"]} == {"alpha"}
    unknown = httpx.post(
        f"{server}/mcp",
        headers={"Authorization": "Bearer nope", "Accept": "application/json"},
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        timeout=30,
    )
    assert unknown.status_code == 401
    # stateless JSON: no standalone SSE stream that would hold a connection open forever
    stream = httpx.get(
        f"{server}/mcp", headers={"Authorization": "Bearer all-key", "Accept": "text/event-stream"}, timeout=30
    )
    assert stream.status_code == 405


def handbook_document(client, name: str) -> dict:
    docs = client.get("/v1/knowledge-bases/handbook/documents", headers=ALL).json()["documents"]
    return next(d for d in docs if d["sourcePath"] == name)


def test_the_original_file_is_served_inline_on_a_signed_url_within_the_key_scope(client, corpus_dir):
    from urllib.parse import quote

    from kb_assets.service.auth import ApiKeys
    from kb_assets.service.signing import UrlSigner

    pdf = handbook_document(client, "platform-handbook.pdf")
    url = client.get(f"/v1/documents/{pdf['documentId']}/chunks", headers=ALL).json()["fileUrl"]
    assert url.startswith(f"/v1/documents/{pdf['documentId']}/file?") and "&s=" in url
    served = client.get(url)  # no header: the URL is its own proof
    assert served.status_code == 200 and served.content == (corpus_dir / "platform-handbook.pdf").read_bytes()
    assert served.headers["content-type"] == "application/pdf"
    assert served.headers["content-disposition"].startswith('inline; filename="platform-handbook.pdf"')
    assert served.headers["content-security-policy"] == "sandbox"  # an HTML original runs no script here
    assert client.get(url[:-1] + ("0" if url[-1] != "0" else "1")).status_code == 403
    path = url.split("?")[0]
    assert client.get(path).status_code == 401
    assert client.get(path, headers=ALL).content == served.content  # a Bearer key works too
    caller = ApiKeys(KEYS).from_header("Bearer all-key")
    assert client.get(UrlSigner("test-secret", ttl_seconds=-1).sign_file(pdf["documentId"], caller)).status_code == 403
    assert client.get(UrlSigner("another-secret").sign_file(pdf["documentId"], caller)).status_code == 403
    image = handbook_pdf_result(client)["pageImageUrl"]  # an image's signature opens no file
    assert client.get(path + "?" + image.split("?")[1]).status_code == 403
    alpha = ApiKeys(KEYS).from_header("Bearer alpha-key")  # a valid URL of a key that may not read it
    assert client.get(UrlSigner("test-secret").sign_file(pdf["documentId"], alpha)).status_code == 404
    assert client.get(path, headers=ALPHA).status_code == 404

    chinese = handbook_document(client, "数据平台简介.md")
    text = client.get(UrlSigner("test-secret").sign_file(chinese["documentId"], caller))
    assert text.status_code == 200 and text.headers["content-type"] == "text/markdown; charset=utf-8"
    assert text.text == (corpus_dir / "数据平台简介.md").read_text(encoding="utf-8")
    assert f"filename*=UTF-8''{quote('数据平台简介.md')}" in text.headers["content-disposition"]


def test_a_document_lists_its_chunks_in_page_order_with_sections(client):
    row = handbook_pdf_result(client)
    answer = client.get(f"/v1/documents/{row['documentId']}/chunks", headers=ALL).json()
    chunks = answer["chunks"]
    assert answer["published"] and answer["document"]["chunks"] == len(chunks)
    order = [(c["pageIndex"], c["chunkIndex"]) for c in chunks]
    assert order == sorted(order) and len({c["pageIndex"] for c in chunks}) == answer["document"]["pages"]
    found = next(c for c in chunks if c["chunkId"] == row["chunkId"])
    assert found["content"] == row["content"] and found["sectionTitle"] == row["sectionTitle"]
    assert client.get(f"/v1/documents/{row['documentId']}/chunks", headers=ALPHA).status_code == 404


def test_a_rest_401_names_the_protected_resource_metadata(client):
    missing = client.post("/v1/kb/search", json={"query": "backups"})
    metadata = f"{BASE_URL}/.well-known/oauth-protected-resource"
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata}"'
    unknown = client.get("/v1/knowledge-bases", headers={"Authorization": "Bearer nope"})
    assert unknown.headers["www-authenticate"] == f'Bearer error="invalid_token", resource_metadata="{metadata}"'
    described = client.get(metadata.removeprefix(BASE_URL))
    assert described.status_code == 200 and described.json()["bearer_methods_supported"] == ["header"]


def test_lineage_credits_milvus_collection_only_to_a_run_that_wrote_entities(
    client, kb_home, settings, stores, milvus_client
):
    from kb_assets.launch.ingest import ingest
    from kb_assets.pipeline.steps.publish import publish_document

    folder = kb_home / "web-runs"
    folder.mkdir(exist_ok=True)
    (folder / "runs.md").write_text("# Runs\n\nThe lineage of this note names its runs.\n", encoding="utf-8")
    report = ingest([folder], "runs", settings)
    document_id = client.get("/v1/knowledge-bases/runs/documents", headers=ALL).json()["documents"][0]["documentId"]
    chunk_id = client.get(f"/v1/documents/{document_id}/chunks", headers=ALL).json()["chunks"][0]["chunkId"]
    runs = {r["asset"]: r["runId"] for r in client.get(f"/v1/chunks/{chunk_id}/lineage", headers=ALL).json()["runs"]}
    assert runs["milvus_collection"] == runs["chunks"] and runs["chunks"] in report.run_ids

    # a run that publishes the document again (a new step version) and finds every entity in place
    doc = stores.catalog.get_document(document_id)
    again = publish_document(doc, stores.catalog, stores.lake, milvus_client, doc.collection_name, "idle-run", "2")
    assert again.written == again.deleted == 0 and not again.skipped
    assert stores.catalog.get_document(document_id).last_run_id == "idle-run"
    after = {r["asset"]: r["runId"] for r in client.get(f"/v1/chunks/{chunk_id}/lineage", headers=ALL).json()["runs"]}
    assert after == runs
