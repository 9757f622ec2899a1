"""The HTTP service: result fields, API keys scoped to knowledge bases, loopback-only without keys,
validation, injection attempts, never a 500, OpenAPI, and one real uvicorn server on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import replace

import httpx
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from kb_assets.retrieval.overlap import units
from kb_assets.settings import SearchConfig
from kb_assets_tests.corpora import INJECTIONS, ensure_retrieval_corpus

LOCAL = ("127.0.0.1", 50000)
BASE_URL = "http://localhost"  # a Host the service answers (not TestClient's "testserver")
RESULT_FIELDS = {
    "chunkId",
    "documentId",
    "knowledgeBaseId",
    "documentTitle",
    "sourceUri",
    "pageIndex",
    "pageEnd",
    "chunkIndex",
    "sectionTitle",
    "content",
    "score",
    "scores",
    "retrievalSource",
    "pageImageUrl",
    "figureImageUrl",
}


@pytest.fixture(scope="module")
def api_searcher(kb_home, settings):
    from kb_assets.service.api import make_searcher

    ensure_retrieval_corpus(kb_home, settings)
    searcher = make_searcher(settings)
    yield searcher
    searcher.close()


@pytest.fixture(scope="module")
def corpus_for_api(api_searcher):
    """The knowledge bases alpha and beta of ``corpora`` (ingested by ``api_searcher``)."""


@pytest.fixture(scope="module")
def open_client(settings, api_searcher):
    from kb_assets.service.api import create_app

    return TestClient(create_app(replace(settings, api_keys=""), api_searcher), client=LOCAL, base_url=BASE_URL)


@pytest.fixture(scope="module")
def keyed_app(settings, api_searcher):
    from kb_assets.service.api import create_app

    return create_app(replace(settings, api_keys="alpha-key=alpha;all-key=*"), api_searcher)


def test_search_results_carry_every_contract_field(open_client):
    response = open_client.post(
        "/v1/kb/search", json={"query": "How long are backups kept?", "knowledgeBaseIds": ["alpha"], "limit": 3}
    )
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"results", "warnings", "timingsMs"} and 1 <= len(body["results"]) <= 3
    for row in body["results"]:
        assert RESULT_FIELDS <= set(row)
        assert row["retrievalSource"] == "hybrid" and isinstance(row["score"], float)
        assert {"dense", "lexical", "exactBoost"} <= set(row["scores"])  # + the rerank parts (pageindex)
        assert len(row["context"]) <= 800  # the chunk inside (what an earlier result of its page holds taken out)
        page = [
            " ".join(r["context"].split())
            for r in body["results"]
            if (r["documentId"], r["pageIndex"]) == (row["documentId"], row["pageIndex"])
        ]
        assert all(" ".join(unit.split()) in " ".join(page) for unit, _ in units(row["content"]))
        assert row["knowledgeBaseId"] == "alpha" and row["sourceUri"].endswith(".md")
        assert isinstance(row["pageIndex"], int) and row["pageEnd"] >= row["pageIndex"]
        assert isinstance(row["chunkIndex"], int) and row["content"]
    assert "35 days" in body["results"][0]["content"]


def test_a_search_reports_the_time_of_every_stage(open_client):
    from kb_assets.retrieval.request import STAGES
    from kb_assets.service.schemas import Timings

    response = open_client.post("/v1/kb/search", json={"query": "How long are backups kept?", "limit": 3})
    assert response.status_code == 200
    timings = response.json()["timingsMs"]
    assert list(timings) == list(STAGES) and set(Timings.model_fields) == set(STAGES)
    assert all(isinstance(ms, float) and 0 <= ms <= timings["total"] for ms in timings.values()), timings
    ran = {"queryEncoding", "locate", "denseSearch", "bm25Search", "versions", "lexicalStatistics", "pageFacts"}
    assert all(timings[stage] > 0 for stage in ran), timings  # the default strategy ran each of them
    spec = open_client.get("/openapi.json").json()["components"]["schemas"]
    assert set(spec["Timings"]["properties"]) == set(STAGES)
    # the time outside the stages is named: total less the stages' critical path (the searches, and the
    # locating followed by the located pages' chunks, beside the encoding)
    beside = max(
        timings["queryEncoding"] + timings["denseSearch"],
        timings["bm25Search"],
        timings["locate"] + timings["locatedChunks"],
    )
    after = sum(ms for stage, ms in timings.items() if stage not in PARALLEL)
    assert timings["other"] == pytest.approx(max(0.0, timings["total"] - beside - after), abs=0.2)
    assert "model" in spec["Timings"]["properties"]["other"]["description"]


PARALLEL = ("queryEncoding", "denseSearch", "bm25Search", "locate", "locatedChunks", "other", "total")


def test_search_reads_are_never_jit_compiled(catalog):
    # compiling locate_pages cost ~1 s of 1.2 s at 41,620 chunks (docs/retrieval-log.md, section 7)
    with catalog.reader() as conn, conn.cursor() as cur:
        cur.execute("SHOW jit")
        assert cur.fetchone()[0] == "off"


def test_without_api_keys_only_loopback_clients_are_answered(settings, api_searcher, open_client):
    from kb_assets.service.api import create_app

    app = create_app(replace(settings, api_keys=""), api_searcher)
    for host in ("10.1.2.3", "testclient"):
        remote = TestClient(app, client=(host, 40000), base_url=BASE_URL).post(
            "/v1/kb/search", json={"query": "backups"}
        )
        assert remote.status_code == 403 and "127.0.0.1" in remote.json()["detail"]
    assert open_client.get("/healthz").json()["status"] == "ok"


def test_api_keys_scope_every_search_to_their_knowledge_bases(keyed_app):
    client = TestClient(
        keyed_app, client=("10.1.2.3", 40000), base_url=BASE_URL
    )  # with keys, remote callers are allowed
    query = {"query": "How long are backups kept?", "limit": 20}
    assert client.post("/v1/kb/search", json=query).status_code == 401
    assert client.post("/v1/kb/search", json=query, headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.post("/v1/kb/search", json=query, headers={"Authorization": "alpha-key"}).status_code == 401
    alpha = {"Authorization": "Bearer alpha-key"}
    denied = client.post("/v1/kb/search", json={**query, "knowledgeBaseIds": ["alpha", "beta"]}, headers=alpha)
    unknown = client.post("/v1/kb/search", json={**query, "knowledgeBaseIds": ["alpha", "nope"]}, headers=alpha)
    # a name outside the key's scope and one that does not exist look the same: 404 naming what the key reads
    assert denied.status_code == unknown.status_code == 404
    assert denied.json()["detail"] == "no knowledge base 'beta': known ones are alpha"
    assert unknown.json()["detail"] == "no knowledge base 'nope': known ones are alpha"
    everything_key = {"Authorization": "Bearer all-key"}
    every = client.post("/v1/kb/search", json={**query, "knowledgeBaseIds": ["nope"]}, headers=everything_key)
    known = every.json()["detail"].partition("known ones are ")[2].split(", ")
    assert every.status_code == 404 and {"alpha", "beta"} <= set(known)
    scoped = client.post("/v1/kb/search", json=query, headers=alpha).json()["results"]
    assert scoped and {r["knowledgeBaseId"] for r in scoped} == {"alpha"}
    everything = client.post("/v1/kb/search", json=query, headers={"Authorization": "Bearer all-key"}).json()
    assert {"alpha", "beta"} <= {r["knowledgeBaseId"] for r in everything["results"]}
    for injected in INJECTIONS:  # not a knowledge-base name: refused before any filter is built
        assert (
            client.post("/v1/kb/search", json={**query, "knowledgeBaseIds": [injected]}, headers=alpha).status_code
            == 422
        )


def test_injection_attempts_and_control_characters_in_knowledge_base_ids_are_refused(open_client):
    for injected in INJECTIONS:
        refused = open_client.post("/v1/kb/search", json={"query": "backups kept", "knowledgeBaseIds": [injected]})
        assert refused.status_code == 422 and "not valid" in refused.text
    nul = open_client.post("/v1/kb/search", json={"query": "backups", "knowledgeBaseIds": ['a\x00" or 1==1']})
    assert nul.status_code == 422


@pytest.mark.parametrize(
    "body",
    [
        {"query": ""},
        {"query": "x", "limit": 0},
        {"query": "x", "limit": 101},
        {"query": "x", "strategy": "bogus"},
        {"query": "x", "knowledgeBaseIds": [""]},
        {"limit": 3},
    ],
)
def test_invalid_requests_are_422(open_client, body):
    assert open_client.post("/v1/kb/search", json=body).status_code == 422


def test_milvus_timeouts_answer_200_from_page_fallback_never_500(settings, api_searcher, frozen_searcher):
    from kb_assets.service.api import create_app

    down = frozen_searcher(api_searcher)
    client = TestClient(create_app(replace(settings, api_keys=""), down), client=LOCAL, base_url=BASE_URL)
    response = client.post("/v1/kb/search", json={"query": "数据备份", "knowledgeBaseIds": ["beta"]})
    assert response.status_code == 200
    body = response.json()
    assert body["results"] and all(
        r["retrievalSource"] == "fallback_pages" and r["score"] is None for r in body["results"]
    )
    assert any("chunk search failed" in w for w in body["warnings"])


def test_openapi_documents_the_search_endpoint(open_client):
    assert open_client.get("/docs").status_code == 200
    spec = open_client.get("/openapi.json").json()
    assert "/v1/kb/search" in spec["paths"] and "SearchResult" in spec["components"]["schemas"]


def test_a_real_uvicorn_server_on_loopback_answers_search_over_http(settings, api_searcher):
    import uvicorn

    from kb_assets.service.api import create_app

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(replace(settings, api_keys=""), api_searcher), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        response = httpx.post(
            f"http://127.0.0.1:{port}/v1/kb/search",
            timeout=30,
            json={
                "query": "When does the on-call rotation change?",
                "knowledgeBaseIds": ["alpha"],
                "strategy": "hybrid",
                "limit": 2,
            },
        )
        assert response.status_code == 200
        assert "Monday" in response.json()["results"][0]["content"]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert not thread.is_alive()


def test_serve_refuses_a_public_host_without_api_keys(kb_home, monkeypatch):
    from kb_assets.cli import main

    monkeypatch.delenv("KB_API_KEYS", raising=False)
    out = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0", "--port", "1"])
    assert out.exit_code == 2 and "127.0.0.1 only" in out.output and "KB_API_KEYS" in out.output


def test_the_configured_default_strategy_is_pageindex(api_searcher):
    assert api_searcher.config.strategy == SearchConfig().strategy == "pageindex"


def test_assets_are_served_only_to_keys_that_may_read_their_document(keyed_app, stores, catalog, corpus_for_api):
    beta = next(d for d in catalog.list_documents(["beta"]) if d.source_path == "warehouse.md")
    key = f"pages/{beta.document_id}/{beta.version}/0.png"
    stores.objects.put(key, b"\x89PNG test image")
    client = TestClient(keyed_app, client=LOCAL, base_url=BASE_URL)
    allowed = client.get(f"/v1/assets/{key}", headers={"Authorization": "Bearer all-key"})
    assert allowed.status_code == 200 and allowed.content == b"\x89PNG test image"
    assert client.get(f"/v1/assets/{key}", headers={"Authorization": "Bearer alpha-key"}).status_code == 404
    assert (
        client.get("/v1/assets/pages/../../etc/passwd", headers={"Authorization": "Bearer all-key"}).status_code == 404
    )


def test_lineage_is_scoped_before_any_lookup_and_ids_never_become_filter_syntax(
    keyed_app, lake, catalog, corpus_for_api
):
    """A key scoped to alpha cannot test conditions on beta's content through a chunk id, nor learn
    beta's document ids from an error; its own chunks' lineage is served."""
    client = TestClient(keyed_app, client=LOCAL, base_url=BASE_URL)
    alpha_key, all_key = {"Authorization": "Bearer alpha-key"}, {"Authorization": "Bearer all-key"}
    beta_docs = [d for d in catalog.list_documents(["beta"]) if d.status == "published"]
    beta_chunk = lake.read("chunks", beta_docs[0].document_id)["chunk_id"][0]
    alpha_doc = next(d for d in catalog.list_documents(["alpha"]) if d.status == "published")
    alpha_chunk = lake.read("chunks", alpha_doc.document_id)["chunk_id"][0]
    word = "备份"
    probes = [
        f"x'] or (knowledge_base_id == 'beta' and content like '%{word}%') or chunk_id in ['y",
        f'x"] or (knowledge_base_id == "beta" and content like "%{word}%") or chunk_id in ["y',
        f'{beta_chunk}" or chunk_id != "',
        beta_chunk,
    ]
    beta_ids = {d.document_id for d in catalog.list_documents(["beta"])}
    for probe in probes:
        answer = client.get(f"/v1/chunks/{probe}/lineage", headers=alpha_key)
        assert answer.status_code == 404, (probe, answer.text)
        assert not any(doc_id in answer.text for doc_id in beta_ids), answer.text
    own = client.get(f"/v1/chunks/{alpha_chunk}/lineage", headers=alpha_key)
    assert own.status_code == 200 and own.json()["document"]["documentId"] == alpha_doc.document_id
    other = client.get(f"/v1/chunks/{beta_chunk}/lineage", headers=all_key)
    assert other.status_code == 200 and other.json()["document"]["knowledgeBaseId"] == "beta"
