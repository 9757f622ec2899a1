"""Every HTTP error of the REST API is an RFC 9457 problem (issue 54): ``application/problem+json`` with
``type``, ``title``, ``status``, ``detail`` and the command line's ``kind`` for the same failure, on each
route family (search, pages, lineage, assets, knowledge bases, documents, files, the service, readiness,
unknown routes), for refusals made before any route (no key, a foreign Host, loopback only) and for the
503 of a store that is down (with ``Retry-After``); OpenAPI documents the shape. MCP keeps its tool errors."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from kb_assets_tests.corpora import ensure_retrieval_corpus

LOCAL = ("127.0.0.1", 50000)
ALPHA = {"Authorization": "Bearer alpha-key"}


@pytest.fixture(scope="module")
def searcher(kb_home, settings):
    from kb_assets.service.api import make_searcher

    ensure_retrieval_corpus(kb_home, settings)
    searcher = make_searcher(settings)
    yield searcher
    searcher.close()


def client_of(settings, searcher, host: str = "localhost", client=LOCAL, **changes) -> TestClient:
    from kb_assets.service.api import create_app

    app = create_app(replace(settings, **{"api_keys": "alpha-key=alpha", **changes}), searcher)
    return TestClient(app, client=client, base_url=f"http://{host}", raise_server_exceptions=False)


def assert_problem(response, status: int, kind: str) -> dict:
    """The response is the problem of ``status`` and ``kind``; its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json", response.headers
    body = response.json()
    assert body["type"] == "about:blank" and body["status"] == status and body["kind"] == kind, body
    assert body["title"] and isinstance(body["detail"], str) and body["detail"], body
    return body


def test_each_route_family_answers_its_errors_as_problems_with_the_command_lines_kinds(settings, searcher, catalog):
    client = client_of(settings, searcher)
    beta = next(d for d in catalog.list_documents(["beta"]) if d.source_path == "warehouse.md")
    alpha = next(d for d in catalog.list_documents(["alpha"]) if d.source_path == "backups.md")

    assert_problem(client.post("/v1/kb/search", json={"query": "backups"}), 401, "unauthorized")
    unknown = client.post("/v1/kb/search", json={"query": "backups", "knowledgeBaseIds": ["nope"]}, headers=ALPHA)
    assert (
        assert_problem(unknown, 404, "unknown_knowledge_base")["detail"]
        == "no knowledge base 'nope': known ones are alpha"
    )
    invalid = assert_problem(client.post("/v1/kb/search", json={"limit": 0}, headers=ALPHA), 422, "invalid_input")
    assert {tuple(e["loc"]) for e in invalid["errors"]} == {("body", "query"), ("body", "limit")}
    assert "query" in invalid["detail"] and "limit" in invalid["detail"]

    assert_problem(client.get(f"/v1/documents/{beta.document_id}/pages/0", headers=ALPHA), 404, "not_found")
    assert_problem(client.get(f"/v1/documents/{alpha.document_id}/pages/999", headers=ALPHA), 404, "not_found")
    assert_problem(client.get("/v1/documents/x/pages/first", headers=ALPHA), 422, "invalid_input")
    assert_problem(client.get("/v1/chunks/nope/lineage", headers=ALPHA), 404, "not_found")
    assert_problem(client.get("/v1/assets/pages/nope/v/0.png", headers=ALPHA), 404, "not_found")
    assert_problem(client.get("/v1/knowledge-bases/beta/documents", headers=ALPHA), 404, "unknown_knowledge_base")
    assert_problem(client.get("/v1/knowledge-bases/a,b/documents", headers=ALPHA), 422, "invalid_input")
    assert_problem(client.get(f"/v1/documents/{beta.document_id}/chunks", headers=ALPHA), 404, "not_found")
    assert_problem(client.get(f"/v1/documents/{alpha.document_id}/file?k=alpha-key&e=1&s=x"), 403, "forbidden")
    assert_problem(client.get("/v1/service"), 401, "unauthorized")
    assert_problem(client.get("/v1/nothing-here", headers=ALPHA), 404, "not_found")
    assert_problem(client.delete("/v1/kb/search", headers=ALPHA), 405, "method_not_allowed")
    assert_problem(client.get("/static/secrets.txt"), 404, "not_found")
    assert client.post("/v1/kb/search", json={"query": "backups"}, headers=ALPHA).status_code == 200


def test_refusals_before_any_route_are_problems_too(settings, searcher):
    foreign = client_of(settings, searcher, host="evil.example.com")
    assert (
        "KB_ALLOWED_HOSTS"
        in assert_problem(foreign.get("/v1/service", headers=ALPHA), 421, "misdirected_request")["detail"]
    )
    remote = client_of(settings, searcher, client=("10.1.2.3", 40000), api_keys="")
    assert "127.0.0.1" in assert_problem(remote.get("/v1/service"), 403, "forbidden")["detail"]
    mcp = client_of(settings, searcher).post("/mcp", json={})
    assert_problem(mcp, 401, "unauthorized")
    assert mcp.headers["WWW-Authenticate"].startswith("Bearer ")


def test_a_store_that_is_down_is_a_503_problem_naming_it_with_retry_after(settings, searcher, frozen_searcher):
    from kb_assets.retrieval.search import Searcher
    from kb_assets.stores.catalog import Catalog

    dead = Catalog("postgresql://kb@127.0.0.1:9/kb", statement_timeout_ms=1000)  # nothing listens there
    no_postgres = client_of(
        settings, Searcher(searcher.client, dead, searcher.alias, searcher.load_model, searcher.config)
    )
    ready = no_postgres.get("/readyz")
    assert assert_problem(ready, 503, "postgres_unavailable")["detail"] == "Postgres unavailable"
    assert ready.headers["Retry-After"]
    no_milvus = client_of(settings, frozen_searcher(searcher))
    ready = no_milvus.get("/readyz")
    assert assert_problem(ready, 503, "milvus_unavailable")["detail"] == "Milvus unavailable"
    assert ready.headers["Retry-After"]


def test_openapi_documents_problem_answers_on_every_route(settings, searcher):
    spec = client_of(settings, searcher).get("/openapi.json").json()
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            for status in ("4XX", "503"):
                content = operation["responses"][status]["content"]
                assert list(content) == ["application/problem+json"], (path, method, status)
                schema = content["application/problem+json"]["schema"]
                assert {"type", "title", "status", "detail", "kind"} <= set(schema["properties"])
    assert "HTTPValidationError" not in spec["components"]["schemas"]  # no second error shape
