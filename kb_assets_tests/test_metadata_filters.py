"""Document metadata on the command line and in the document lists (issue 32): `kb-assets search --period
/ --kind / --organisation` filter as the API does and refuse a bad value in one line naming the option,
with the API's reason; results and `kb-assets docs` show a document's organisation, period and kind.
Real Postgres, Milvus Lite and model (conftest fixtures), two generated annual reports of one issuer."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from kb_assets_tests.corpora import ensure_fiscal_years

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def years(kb_home, settings) -> dict[int, str]:
    return ensure_fiscal_years(kb_home, settings)


@pytest.fixture(scope="module")
def client(settings, years):
    from kb_assets.service.api import create_app, make_searcher

    searcher = make_searcher(settings)
    app = create_app(replace(settings, api_keys=""), searcher, heal=False)
    with TestClient(app, client=("127.0.0.1", 50000), base_url="http://localhost") as client:
        yield client
    searcher.close()


def kb_assets(*args: str):
    from kb_assets.cli import main

    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("year", [2022, 2023])
def test_search_with_a_period_returns_only_that_periods_document(years, year):
    result = kb_assets("search", "What was the net revenue?", "--kb", "filings", "--period", f"FY{year}", "--json")

    assert result.exit_code == 0, result.output
    found = json.loads(result.output)["results"]
    assert found and {Path(r["sourceUri"]).name for r in found} == {years[year]}
    assert all(r["documentMetadata"]["period"]["label"] == f"FY{year}" for r in found)


def test_search_text_shows_each_results_organisation_period_and_kind(years):
    result = kb_assets("search", "net revenue", "--kb", "filings", "--kind", "10-K", "--organisation", "initech")

    assert result.exit_code == 0, result.output
    described = [line.strip() for line in result.output.splitlines() if " · " in line]
    labelled = {f"organisation: Initech Corporation · period: FY{year} · kind: annual report" for year in (2022, 2023)}
    assert labelled <= set(described)


def test_a_filter_no_document_matches_returns_nothing(years):
    result = kb_assets("search", "net revenue", "--kb", "filings", "--period", "FY2019", "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["results"] == []


@pytest.mark.parametrize(
    "option, value, reason",
    [
        ("--period", "last year", "'last year' names no year, quarter or date"),
        ("--kind", "k" * 201, "at most 200 characters"),
        ("--organisation", "", "at least 1 character"),
    ],
)
def test_a_bad_filter_is_one_line_naming_the_option_with_the_apis_reason(client, option, value, reason):
    result = kb_assets("search", "net revenue", "--kb", "filings", option, value)

    assert result.exit_code == 1
    assert result.output.splitlines() == [result.output.strip()]  # one line, no traceback, no usage
    assert result.output.startswith(f"Error: invalid value for {option}: ") and reason in result.output
    answer = client.post("/v1/kb/search", json={"query": "net revenue", option.removeprefix("--"): value})
    assert answer.status_code == 422
    assert reason in answer.json()["errors"][0]["msg"]


def test_the_mcp_tool_refuses_a_bad_period_with_the_same_reason_and_filters_a_good_one(settings, years):
    from kb_assets.service.api import create_app
    from kb_assets_tests.live_server import live_server
    from kb_assets_tests.test_mcp_tools import call

    keyed = replace(settings, api_keys="reader=filings", url_signing_secret="filters-test", public_url="")
    with live_server(create_app(keyed, heal=False)) as url:
        refused = call(url, "reader", "kb_search", {"query": "net revenue", "period": "last year"})
        found = call(url, "reader", "kb_search", {"query": "net revenue", "period": "FY2023"})
    assert refused.is_error and "'last year' names no year, quarter or date" in refused.content[0].text
    assert not found.is_error
    results = found.structured_content["results"]
    assert results and {Path(r["sourceUri"]).name for r in results} == {years[2023]}
    head = found.content[0].text.splitlines()[0]  # what the model reads: the document's metadata with its title
    assert head.startswith("[1] ") and " (Initech Corporation · FY2023 · annual report) | p. 1" in head


def test_docs_and_the_document_list_show_each_documents_metadata(years, client):
    result = kb_assets("docs", "--kb", "filings")
    assert result.exit_code == 0, result.output
    assert "organisation: Initech Corporation · period: FY2022 · kind: annual report" in result.output
    assert "organisation: Initech Corporation · period: FY2023 · kind: annual report" in result.output

    listed = json.loads(kb_assets("docs", "--kb", "filings", "--json").output)["documents"]
    by_name = {Path(d["sourceUri"]).name: d["metadata"] for d in listed}
    assert by_name[years[2022]]["period"]["label"] == "FY2022" and by_name[years[2023]]["kind"] == "annual report"

    documents = client.get("/v1/knowledge-bases/filings/documents").json()["documents"]
    assert {Path(d["sourceUri"]).name: d["metadata"]["period"]["label"] for d in documents} == {
        years[2022]: "FY2022",
        years[2023]: "FY2023",
    }


def test_a_field_read_with_little_confidence_is_not_shown():
    from kb_assets.retrieval.scope import describe

    handbook = {  # a handbook's "founded in 2019" read as its period, its kind only the generic one
        "organisation": "Northwind Ltd",
        "period": {"label": "2019", "fiscal_year": 2019},
        "kind": "document",
        "confidence": {"organisation": 0.6, "period": 0.3, "kind": 0.2},
    }
    assert describe(handbook) == "Northwind Ltd"
    filing = {**handbook, "period": {"label": "FY2022"}, "kind": "annual report"}
    assert describe({**filing, "confidence": {"organisation": 0.9, "period": 0.9, "kind": 0.95}}) == (
        "Northwind Ltd · FY2022 · annual report"
    )
