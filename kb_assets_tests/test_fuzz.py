"""Hypothesis-generated malformed requests to every endpoint (issue 9): path segments, query strings,
JSON bodies, Authorization and Host headers and image-URL signatures of any shape; the service answers
each one, and never with a 5xx while its stores are up."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from kb_assets_tests.corpora import ensure_retrieval_corpus

LOCAL = ("127.0.0.1", 50000)
BASE_URL = "http://localhost"  # a Host the service answers (not TestClient's "testserver")
# derandomize: the same few hundred requests every run, so a red run is reproducible (vary them by hand)
FUZZ = hypothesis_settings(
    max_examples=60,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# anything that may reach a handler: surrogates, NUL, slashes, dots, percent signs, very long text
segment = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        ["", ".", "..", "%00", "%2e%2e", "%ff", "0", "-1", "99999999999999999999", "a/b", "\\", "x" * 3000]
    ),
)
scalar = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30)
)
json_value = st.recursive(
    scalar,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
search_body = st.fixed_dictionaries(
    {},
    optional={
        "query": st.one_of(st.text(max_size=300), scalar),
        "knowledgeBaseIds": st.one_of(st.lists(segment, max_size=3), scalar),
        "limit": st.one_of(st.integers(-10, 10**6), scalar),
        "minScore": scalar,
        "strategy": st.one_of(st.sampled_from(["hybrid", "pageindex", "nope"]), scalar),
        "extra": json_value,
    },
)
authorization = st.one_of(
    st.just(b"Bearer all-key"),
    st.just(b"Bearer alpha-key"),  # raw header bytes
    st.binary(max_size=40).filter(lambda b: b"\r" not in b and b"\n" not in b and b"\0" not in b),
)


@pytest.fixture(scope="module")
def client(kb_home, settings):
    from kb_assets.service.api import create_app

    ensure_retrieval_corpus(kb_home, settings)
    app = create_app(replace(settings, api_keys="alpha-key=alpha;all-key=*", url_signing_secret="fuzz"), heal=False)
    with TestClient(app, client=LOCAL, base_url=BASE_URL, raise_server_exceptions=False) as client:
        yield client


def quote(text: str) -> str:
    from urllib.parse import quote as url_quote

    return url_quote(text.encode("utf-8", "surrogatepass"), safe="")


def assert_answered(response):
    assert response.status_code < 500, (
        response.request.method,
        str(response.request.url)[:200],
        response.status_code,
        response.text[:300],
    )


@FUZZ
@given(body=st.one_of(search_body, json_value), auth=authorization)
def test_search_bodies(client, body, auth):
    content = json.dumps(body, allow_nan=True).encode()
    assert_answered(
        client.post(
            "/v1/kb/search", content=content, headers={"Authorization": auth, "Content-Type": "application/json"}
        )
    )


@FUZZ
@given(raw=st.binary(max_size=200), content_type=st.sampled_from(["application/json", "text/plain", ""]))
def test_search_raw_bodies(client, raw, content_type):
    assert_answered(
        client.post(
            "/v1/kb/search", content=raw, headers={"Authorization": "Bearer all-key", "Content-Type": content_type}
        )
    )


@FUZZ
@given(document=segment, page=segment, auth=authorization)
def test_page_and_document_paths(client, document, page, auth):
    headers = {"Authorization": auth}
    assert_answered(client.get(f"/v1/documents/{quote(document)}/pages/{quote(page)}", headers=headers))
    assert_answered(client.get(f"/v1/knowledge-bases/{quote(document)}/documents", headers=headers))


@FUZZ
@given(
    chunk=segment,
    key=st.lists(segment, max_size=4),
    params=st.dictionaries(st.sampled_from(["e", "s", "k", "x"]), segment, max_size=3),
    auth=authorization,
)
def test_lineage_and_asset_paths(client, chunk, key, params, auth):
    headers = {"Authorization": auth}
    assert_answered(client.get(f"/v1/chunks/{quote(chunk)}/lineage", headers=headers))
    path = "/v1/assets/" + "/".join(quote(part) for part in key)
    assert_answered(
        client.get(
            path,
            params={k: v.encode("utf-8", "surrogatepass").decode("utf-8", "replace") for k, v in params.items()},
            headers=headers,
        )
    )


# signatures of every malformed shape, on URLs that are otherwise well formed (an unexpired e), so each reaches
# the signature check: non-ASCII, odd length, not hex, the right length but upper case
signature = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=80),
    st.text("0123456789abcdef", max_size=129).filter(lambda s: len(s) % 2 == 1),
    st.text(st.characters(min_codepoint=0x80, blacklist_categories=("Cs",)), min_size=1, max_size=64),
    st.text("0123456789ABCDEFghijxyz", min_size=64, max_size=64),
)
key_id = st.one_of(
    st.text("0123456789abcdef", min_size=32, max_size=32),
    st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass").decode("utf-8", "replace")),
)


@FUZZ
@given(s=signature, k=key_id, ahead=st.integers(1, 10**12))
def test_malformed_image_signatures_are_403(client, s, k, ahead):
    import time

    response = client.get("/v1/assets/pages/doc/v1/0.png", params={"k": k, "e": str(int(time.time()) + ahead), "s": s})
    assert response.status_code == 403, (k, s, response.status_code, response.text[:200])


def test_a_non_ascii_signature_is_403_not_500(client):
    assert client.get("/v1/assets/pages/doc/v1/0.png?k=00&e=99999999999&s=%C3%A9").status_code == 403
    assert client.get("/v1/assets/pages/doc/v1/0.png?k=&e=99999999999&s=abc").status_code == 403


@FUZZ
@given(
    host=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=60),
    path=st.sampled_from(["/", "/v1/knowledge-bases", "/v1/service", "/healthz", "/readyz"]),
)
def test_any_host_header_is_answered_and_only_loopback_names_reach_data(client, host, path):
    response = client.get(path, headers={"Host": host, "Authorization": "Bearer all-key"})
    assert_answered(response)
    if path not in ("/healthz", "/readyz") and response.status_code != 421:
        assert re.fullmatch(r"(localhost\.?|127(\.\d+){3}|\[::1\]|::1)(:.*)?", host, re.IGNORECASE), host


@FUZZ
@given(
    path=st.sampled_from(
        ["/", "/static/app.js", "/static/", "/healthz", "/v1/knowledge-bases", "/v1/service", "/mcp", "/openapi.json"]
    ),
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE"]),
    auth=authorization,
    raw=st.binary(max_size=100),
)
def test_other_endpoints_and_methods(client, path, method, auth, raw):
    assert_answered(client.request(method, path, content=raw, headers={"Authorization": auth}))
