"""The service answers only the names it is meant to be called by (DNS rebinding), tells a probe whether
its stores answer, never waits long for a request body, and accepts only valid knowledge-base names
wherever one enters (API, KB_API_KEYS, KB_WATCH, the CLI)."""

from __future__ import annotations

import socket
from dataclasses import replace

import httpx
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from kb_assets.lib.names import validate_knowledge_base_id
from kb_assets_tests.live_server import live_server

LOCAL = ("127.0.0.1", 50000)
KEYS = "alpha-key=alpha;all-key=*"
ALL = {"Authorization": "Bearer all-key"}
EVIL = "evil.example.com"
BAD_NAMES = ["", "*", "../../etc", "x" * 300, "a,b;c=*"]
GOOD_NAMES = ["handbook", "alpha", "soak-stable", "edu-zh", "r-manuals", "v1.2_docs", "7"]
DATA_ROUTES = [
    ("GET", "/"),
    ("GET", "/v1/knowledge-bases"),
    ("GET", "/v1/service"),
    ("POST", "/v1/kb/search"),
    ("GET", "/v1/assets/pages/doc/v/0.png"),
    ("POST", "/mcp"),
]


@pytest.fixture(scope="module")
def searcher(settings):
    from kb_assets.service.api import make_searcher

    searcher = make_searcher(settings)
    yield searcher
    searcher.close()


def client_of(settings, searcher, host: str = "localhost", **changes) -> TestClient:
    from kb_assets.service.api import create_app

    app = create_app(replace(settings, **{"api_keys": "", **changes}), searcher)
    return TestClient(app, client=LOCAL, base_url=f"http://{host}", raise_server_exceptions=False)


def call(client, method, path, **kwargs):
    body = {"query": "backups"} if path == "/v1/kb/search" else {} if path == "/mcp" else None
    return client.request(method, path, json=body, **kwargs)


# -- Host ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method,path", DATA_ROUTES)
def test_without_keys_a_foreign_host_is_refused_on_every_data_route(settings, searcher, method, path):
    response = call(client_of(settings, searcher, host=EVIL), method, path)
    assert response.status_code == 421, response.text
    assert "KB_ALLOWED_HOSTS" in response.json()["detail"] and EVIL in response.json()["detail"]


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8000", "127.0.0.1", "127.9.8.7:1234", "[::1]:8000", "LOCALHOST."]
)
def test_without_keys_loopback_names_are_answered(settings, searcher, host):
    assert client_of(settings, searcher, host=host).get("/v1/service").status_code == 200


def test_the_service_names_its_search_version_with_the_page_scorers():
    from kb_assets.retrieval import search_version
    from kb_assets.settings import Settings

    info = client_of(Settings.from_env({}), None).get("/v1/service").json()
    assert info["searchVersion"] == search_version() and "+scorer:" in info["searchVersion"]


def test_health_and_readiness_answer_any_host_and_hold_no_data(settings, searcher):
    client = client_of(settings, searcher, host=EVIL)
    assert client.get("/healthz").json()["status"] == "ok"
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}


def test_without_keys_a_page_of_another_site_is_refused(settings, searcher):
    client = client_of(settings, searcher)
    assert client.get("/v1/service", headers={"Origin": "http://localhost:8000"}).status_code == 200
    refused = client.post("/v1/kb/search", json={"query": "x"}, headers={"Origin": f"https://{EVIL}"})
    assert refused.status_code == 403 and "KB_ALLOWED_HOSTS" in refused.json()["detail"]


def test_with_keys_only_loopback_public_url_and_allowed_hosts_are_answered(settings, searcher):
    keyed = {"api_keys": KEYS, "public_url": "https://kb.example.com"}
    assert call(client_of(settings, searcher, host=EVIL, **keyed), "GET", "/v1/service", headers=ALL).status_code == 421
    for host in ("kb.example.com", "KB.example.com:443", "localhost:8000"):
        assert client_of(settings, searcher, host=host, **keyed).get("/v1/service", headers=ALL).status_code == 200
    listed = {**keyed, "allowed_hosts": "kb-assets-search, kb-assets-search.kb-assets.svc.cluster.local:8000"}
    for host in ("kb-assets-search", "kb-assets-search.kb-assets.svc.cluster.local", "kb.example.com"):
        assert client_of(settings, searcher, host=host, **listed).get("/v1/service", headers=ALL).status_code == 200
    assert client_of(settings, searcher, host=EVIL, **listed).get("/v1/service", headers=ALL).status_code == 421
    anyone = client_of(settings, searcher, host=EVIL, api_keys=KEYS, allowed_hosts="*")
    assert anyone.get("/v1/service", headers=ALL).status_code == 200


def test_any_host_without_keys_and_a_malformed_public_url_are_refused(settings, searcher):
    from kb_assets.service.api import create_app

    with pytest.raises(ValueError, match="KB_API_KEYS"):
        create_app(replace(settings, api_keys="", allowed_hosts="*"), searcher)
    with pytest.raises(ValueError, match="KB_PUBLIC_URL"):
        create_app(replace(settings, api_keys=KEYS, public_url="kb.example.com"), searcher)


def test_settings_read_the_host_and_body_timeout_variables(kb_home):
    from kb_assets.settings import Settings

    read = Settings.from_env(
        {
            "KB_HOME": str(kb_home),
            "KB_PUBLIC_URL": "https://kb.example.com/",
            "KB_ALLOWED_HOSTS": "a.example.com,b",
            "KB_BODY_TIMEOUT_S": "2.5",
        }
    )
    assert (read.public_url, read.allowed_hosts, read.body_timeout_s) == (
        "https://kb.example.com",
        "a.example.com,b",
        2.5,
    )
    assert Settings.from_env({"KB_HOME": str(kb_home)}).body_timeout_s == 10


@pytest.mark.parametrize(
    "env,host",
    [
        ({}, "0.0.0.0"),
        ({"KB_ALLOWED_HOSTS": "*"}, "127.0.0.1"),
        ({"KB_API_KEYS": KEYS, "KB_PUBLIC_URL": "ftp://x"}, "0.0.0.0"),
    ],
)
def test_serve_refuses_an_unsafe_configuration_with_one_line_and_exit_code_2(kb_home, monkeypatch, env, host):
    from kb_assets.cli import main

    monkeypatch.delenv("KB_API_KEYS", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    out = CliRunner().invoke(main, ["serve", "--host", host, "--port", "1"])
    assert out.exit_code == 2, out.output
    assert len(out.output.strip().splitlines()) == 1 and out.output.startswith("Error: ")


# -- readiness ----------------------------------------------------------------------------------------
def test_readyz_is_503_naming_postgres_when_it_cannot_be_reached(settings, searcher):
    from kb_assets.retrieval.search import Searcher
    from kb_assets.stores.catalog import Catalog

    dead = Catalog("postgresql://kb@127.0.0.1:9/kb", statement_timeout_ms=1000)  # nothing listens there
    down = Searcher(searcher.client, dead, searcher.alias, searcher.load_model, searcher.config)
    response = client_of(settings, down, host=EVIL).get("/readyz")
    assert response.status_code == 503 and response.headers["Retry-After"]
    assert response.json()["detail"] == "Postgres unavailable"


def test_readyz_is_503_naming_milvus_when_it_does_not_answer(settings, searcher, frozen_searcher):
    down = frozen_searcher(searcher)
    response = client_of(settings, down).get("/readyz")
    assert response.status_code == 503 and response.headers["Retry-After"]
    assert response.json()["detail"] == "Milvus unavailable"


# -- request bodies -----------------------------------------------------------------------------------
@pytest.mark.parametrize("sent", [b"", b'{"query": '])
def test_a_body_that_never_arrives_is_answered_408_and_closed_within_the_timeout(settings, searcher, sent):
    from kb_assets.service.api import create_app

    timeout_s, margin_s = 1.0, 10.0
    app = create_app(replace(settings, api_keys="", body_timeout_s=timeout_s), searcher)
    with live_server(app) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=timeout_s + margin_s) as raw:
            raw.sendall(
                b"POST /v1/kb/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100\r\n\r\n" + sent
            )
            answer = b""
            while chunk := raw.recv(65536):  # raises socket.timeout past timeout + margin
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"KB_BODY_TIMEOUT_S" in answer


@pytest.mark.parametrize("sent", [b"", b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"])
def test_headers_that_never_end_are_answered_408_and_closed_within_the_timeout(settings, searcher, sent):
    """A connection that sends nothing, or a request line and one header and no blank line, is closed."""
    from kb_assets.service.api import create_app

    timeout_s, margin_s = 1.0, 10.0
    app = create_app(replace(settings, api_keys=""), searcher)
    with live_server(app, header_timeout_s=timeout_s) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=timeout_s + margin_s) as raw:
            raw.sendall(sent)
            answer = b""
            while chunk := raw.recv(65536):  # raises socket.timeout past timeout + margin
                answer += chunk
        # a request that arrives whole on the same server is answered as before
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200
    assert answer.startswith(b"HTTP/1.1 408") and b"headers did not arrive" in answer, answer[:200]


# -- knowledge-base names -----------------------------------------------------------------------------
def test_the_test_corpora_and_ordinary_names_match_the_pattern():
    from kb_assets_tests.corpora import RETRIEVAL_CORPUS

    for name in [*GOOD_NAMES, *RETRIEVAL_CORPUS]:
        assert validate_knowledge_base_id(name) == name
    for name in [*BAD_NAMES, "-x", "a b", "x\n", "数据", "a/b"]:
        with pytest.raises(ValueError, match="not valid"):
            validate_knowledge_base_id(name)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_bad_name_is_refused_by_the_api(settings, searcher, name):
    client = client_of(settings, searcher)
    search = client.post("/v1/kb/search", json={"query": "backups", "knowledgeBaseIds": ["alpha", name]})
    assert search.status_code == 422 and search.json()["errors"][0]["loc"] == ["body", "knowledgeBaseIds", 1]
    if name not in ("", "../../etc"):  # those name another route (or none)
        from urllib.parse import quote

        assert client.get(f"/v1/knowledge-bases/{quote(name, safe='')}/documents").status_code == 422


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_bad_name_is_refused_in_api_keys_watch_and_the_cli(kb_home, settings, monkeypatch, name):
    from kb_assets.cli import main
    from kb_assets.service.auth import parse_api_keys

    if name not in ("*", "a,b;c=*"):  # in KB_API_KEYS "*" is every knowledge base, ",;=" its syntax
        with pytest.raises(ValueError, match="KB_API_KEYS"):
            parse_api_keys(f"key={name}")
    with pytest.raises(ValueError, match="KB_WATCH"):
        replace(settings, watch=f"{name}=/tmp/x").watched_folders()
    for command in (["docs", "--kb", name], ["ingest", "--kb", name, str(kb_home)]):
        out = CliRunner().invoke(main, command)
        assert out.exit_code == 2 and "not valid" in out.output, out.output


def test_ordinary_names_are_accepted_everywhere(settings, searcher, kb_home):
    from kb_assets.cli import main
    from kb_assets.service.auth import parse_api_keys

    assert parse_api_keys(f"key={','.join(GOOD_NAMES)};other=*") == {"key": set(GOOD_NAMES), "other": None}
    assert [
        kb for kb, _ in replace(settings, watch=";".join(f"{n}=/tmp/{n}" for n in GOOD_NAMES)).watched_folders()
    ] == GOOD_NAMES
    client = client_of(settings, searcher)
    for name in GOOD_NAMES:
        assert client.get(f"/v1/knowledge-bases/{name}/documents").status_code == 200
    out = CliRunner().invoke(main, ["docs", "--json", *[a for n in GOOD_NAMES for a in ("--kb", n)]])
    # the names pass the --kb check (a refused one is a usage error, exit 2); these hold no documents yet
    assert out.exit_code == 1 and "no knowledge base" in out.output and "not valid" not in out.output, out.output


# -- outages in the service's log ---------------------------------------------------------------------
def test_a_milvus_outage_is_one_log_line_and_its_end_another_without_tracebacks(
    settings, handbook, searcher, frozen_searcher, caplog, capfd
):
    import logging

    down = client_of(settings, frozen_searcher(searcher))
    caplog.set_level(logging.DEBUG, logger="kb_assets.retrieval")
    for _ in range(4):
        answer = down.post(
            "/v1/kb/search", json={"query": "How long are backups kept?", "knowledgeBaseIds": ["handbook"]}
        )
        assert answer.status_code == 200 and answer.json()["results"]  # the page fallback answers
    down.app.state.service.searcher = searcher  # Milvus answers again: the same service, its searcher's client
    answered = down.post("/v1/kb/search", json={"query": "backups", "knowledgeBaseIds": ["handbook"]})
    assert answered.status_code == 200 and not answered.json()["warnings"], answered.json()["warnings"]

    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "Milvus" in r.getMessage()]
    assert len(warned) == 2, warned
    assert warned[0].startswith("Milvus is unavailable: ") and warned[1].startswith("Milvus is back after ")
    assert sum("still unavailable" in r.getMessage() for r in caplog.records) == 3  # the others: debug lines
    assert "Traceback" not in capfd.readouterr().err  # pymilvus logs none for the failed calls


def test_readiness_names_the_server_profile_once_the_collection_outgrows_the_engines_measured_range(
    settings, searcher, handbook
):
    from kb_assets.stores import vectors

    runs_on = vectors.engine(searcher.client)
    assert runs_on.measured_chunks == 503_602  # the embedded engine, as docs/decisions.md measured it
    assert "note" not in client_of(settings, searcher).get("/readyz").json()  # the test collection is small
    with vectors._ENGINES_LOCK:
        vectors._ENGINES[searcher.client] = replace(runs_on, measured_chunks=1)  # the range, not the count
    try:
        ready = client_of(settings, searcher, host=EVIL).get("/readyz")
    finally:
        with vectors._ENGINES_LOCK:
            vectors._ENGINES[searcher.client] = runs_on
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    note = ready.json()["note"]
    assert "past the embedded Milvus Lite 2.5.1's measured range (1 chunks)" in note and "KB_MILVUS_URI" in note
    assert vectors.size_note(vectors.SERVER, 10**9) is None


def test_collections_report_the_published_size_against_the_engines_measured_range(handbook):
    import json

    from kb_assets.cli import main

    result = CliRunner().invoke(main, ["collections", "--json"])

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["engineMeasuredChunks"] == 503_602 and report["sizeNote"] is None  # the handbook is small
    assert any(c["published"] and c["count"] > 0 for c in report["collections"])
