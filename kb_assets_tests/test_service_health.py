"""The service under hostile requests and failing stores (issue 9, item 6; issue 54), on the real embedded
services: 4xx for every malformed request, 503 with a reason while Postgres is down, and the embedded
Postgres and Milvus engine restarted by ``serve`` itself after they stopped."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from kb_assets_tests.corpora import ensure_retrieval_corpus

LOCAL = ("127.0.0.1", 50000)
ALL = {"Authorization": "Bearer all-key"}


@pytest.fixture(scope="module")
def app(kb_home, settings):
    from kb_assets.service.api import create_app

    ensure_retrieval_corpus(kb_home, settings)
    return create_app(replace(settings, api_keys="alpha-key=alpha;all-key=*"), heal=True)


@pytest.fixture(scope="module")
def client(app):
    with TestClient(
        app, client=LOCAL, base_url="http://localhost"
    ) as client:  # runs the lifespan: warm-up, watchdog, MCP
        yield client


def beta_document(catalog):
    return next(d for d in catalog.list_documents(["beta"]) if d.source_path == "warehouse.md")


def test_malformed_requests_answer_4xx_never_500(client, catalog):
    beta = beta_document(catalog)
    assert client.get(f"/v1/assets/pages/{beta.document_id}/", headers=ALL).status_code == 404  # a folder
    assert client.get(f"/v1/assets/pages/{beta.document_id}", headers=ALL).status_code == 404
    assert client.get("/v1/documents/%00/pages/0", headers=ALL).status_code == 404
    assert client.get("/v1/chunks/%00/lineage", headers=ALL).status_code == 404
    assert client.get(f"/v1/documents/{beta.document_id}/pages/99999999999", headers=ALL).status_code in (404, 422)
    surrogate = client.post(
        "/v1/kb/search", headers={**ALL, "Content-Type": "application/json"}, content=b'{"query": "\\ud800"}'
    )
    assert surrogate.status_code == 422 and surrogate.json()["errors"][0]["loc"] == ["body", "query"]
    nul = client.post("/v1/kb/search", headers=ALL, json={"query": "backups\x00"})
    assert nul.status_code == 422
    assert client.post("/v1/kb/search", headers=ALL, json={"query": "x", "minScore": "NaN"}).status_code == 422


def test_a_fast_shutdown_of_postgres_is_503_meanwhile_and_serve_brings_it_back_locating_again(app, client, kb_home):
    """The postmaster stops (a fast shutdown, SIGINT): requests that need Postgres answer 503 problems, searches
    answer from chunks alone; then ``serve``'s watchdog starts it again, with no other command run, and
    searches locate pages again within 30 s."""
    from kb_assets.services import postgres_status
    from kb_assets.services.local import locked

    beta = beta_document(app.state.service.stores.catalog)
    path = f"/v1/documents/{beta.document_id}/pages/0"
    query = {"query": "How long are warehouse backups kept?", "knowledgeBaseIds": ["beta"], "strategy": "pageindex"}
    assert client.get(path, headers=ALL).status_code == 200
    assert not located_warnings(client.post("/v1/kb/search", headers=ALL, json=query).json())
    restarts = app.state.service.postgres_watchdog.restarts
    with locked(kb_home / "postgres.lock"):  # the watchdog's start waits for this lock: Postgres stays down
        os.kill(postgres_status(kb_home)["pid"], signal.SIGINT)  # a fast shutdown of the postmaster
        deadline = time.monotonic() + 60
        while postgres_status(kb_home)["running"] and time.monotonic() < deadline:
            time.sleep(0.1)
        down = client.get(path, headers=ALL)
        assert down.status_code == 503 and down.headers["content-type"] == "application/problem+json"
        assert down.json()["kind"] == "postgres_unavailable" and "Postgres unavailable" in down.json()["detail"]
        assert down.headers["Retry-After"]
        assert client.get("/v1/knowledge-bases", headers=ALL).status_code == 503
        meanwhile = client.post("/v1/kb/search", headers=ALL, json=query)
        assert meanwhile.status_code == 200 and meanwhile.json()["results"]  # from chunks alone
        assert located_warnings(meanwhile.json())
    # released: the watchdog starts Postgres again; the service reconnects, nothing else is run
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        search = client.post("/v1/kb/search", headers=ALL, json=query)
        if search.status_code == 200 and not located_warnings(search.json()):
            break
        time.sleep(0.5)
    assert not located_warnings(search.json()), search.json()["warnings"]
    assert "90 days" in search.json()["results"][0]["context"]
    assert app.state.service.postgres_watchdog.restarts == restarts + 1
    answer = client.get(path, headers=ALL)
    assert answer.status_code == 200 and "90 days" in answer.json()["text"]


def located_warnings(answer: dict) -> list[str]:
    """The warnings of a search answer that say pages were not located (Postgres did not answer)."""
    return [w for w in answer["warnings"] if "locating pages failed" in w or "no page located" in w]


def test_serve_restarts_a_killed_milvus_lite_server_and_answers_from_milvus_again(app, client, kb_home):
    from kb_assets.services import milvus_status

    query = {"query": "How long are backups kept?", "knowledgeBaseIds": ["alpha"], "strategy": "hybrid"}
    assert client.post("/v1/kb/search", headers=ALL, json=query).json()["results"][0]["retrievalSource"] == "hybrid"
    before = milvus_status(kb_home)["pid"]
    restarts = app.state.service.watchdog.restarts
    os.kill(before, signal.SIGKILL)
    sources = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        answer = client.post("/v1/kb/search", headers=ALL, json=query)
        assert answer.status_code == 200
        rows = answer.json()["results"]
        sources.append(rows[0]["retrievalSource"] if rows else None)
        if sources[-1] == "hybrid" and milvus_status(kb_home)["pid"] not in (None, before):
            break
        time.sleep(0.5)
    assert sources[-1] == "hybrid", sources
    # pymilvus reconnects by itself once the new server listens, which can be before the watchdog
    # thread, back from ensure_milvus, has counted its restart: give it a moment.
    counted = time.monotonic() + 10
    while app.state.service.watchdog.restarts == restarts and time.monotonic() < counted:
        time.sleep(0.1)
    assert app.state.service.watchdog.restarts == restarts + 1
    assert "35 days" in answer.json()["results"][0]["content"]
