"""The service under hostile requests and failing stores (issue 9, item 6), on the real embedded services:
4xx for every malformed request, 503 with a reason while Postgres is down and answers again once it is
back, and the embedded Milvus Lite server restarted by ``serve`` itself after it was killed."""

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
    return create_app(replace(settings, api_keys="alpha-key=alpha;all-key=*"), heal_milvus=True)


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


def test_the_page_endpoint_answers_503_while_postgres_is_down_and_again_after_its_restart(client, kb_home, catalog):
    from kb_assets.services import ensure_postgres, stop_postgres

    beta = beta_document(catalog)
    path = f"/v1/documents/{beta.document_id}/pages/0"
    assert client.get(path, headers=ALL).status_code == 200
    assert client.post("/v1/kb/search", headers=ALL, json={"query": "warehouse backups"}).status_code == 200
    dsn = catalog.dsn
    stop_postgres(kb_home)
    try:
        down = client.get(path, headers=ALL)
        assert down.status_code == 503 and "Postgres unavailable" in down.json()["detail"]
        assert down.headers["Retry-After"]
        assert client.get("/v1/knowledge-bases", headers=ALL).status_code == 503
    finally:
        assert ensure_postgres(kb_home, "wheel").split("@")[-1] == dsn.split("@")[-1]
    # the service reconnects by itself: fresh connections, and the pool's dead ones replaced
    deadline = time.monotonic() + 30
    while (answer := client.get(path, headers=ALL)).status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert answer.status_code == 200 and "90 days" in answer.json()["text"]
    search = client.post(
        "/v1/kb/search",
        headers=ALL,
        json={"query": "How long are warehouse backups kept?", "knowledgeBaseIds": ["beta"]},
    )
    assert search.status_code == 200 and search.json()["results"]


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
