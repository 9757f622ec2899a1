"""Document metadata read from content (issue 32): organisation, period and kind from generated covers
(PDF, DOCX, Markdown) at ingest, kept in the catalog, returned with results; a question that names one
period of an organisation ranks that period's document first among its look-alikes; the API and the MCP
tool filter by period and kind. Real Postgres, Milvus Lite and model (conftest fixtures)."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from kb_assets.retrieval.search import SearchRequest
from kb_assets.structure.metadata import read_metadata
from kb_assets.structure.statements import is_statement_node

KB = "covers"
REVENUE = {2021: (150, 120), 2022: (200, 150), 2023: (260, 200)}


def _pdf(path: Path, cover: list[str], body: list[str], title: str | None = None, more: list[list[str]] = ()) -> Path:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    if title:
        c.setTitle(title)
    for lines in (cover, body, *more):
        y = A4[1] - 100
        for line in lines:
            c.drawString(72, y, line)
            y -= 18
        c.showPage()
    c.save()
    return path


CASH_FLOWS = [
    "ACME Corp",
    "Consolidated Statements of Cash Flows",
    "(in millions)                                   2023      2022      2021",
    *[
        f"{label:45} {a:>8,} {b:>8,} {c:>8,}"
        for label, a, b, c in [
            ("Net income", 61, 44, 30),
            ("Depreciation and amortization", 12, 11, 10),
            ("Changes in operating assets and liabilities", -5, 3, 2),
            ("Net cash provided by operating activities", 68, 58, 42),
            ("Purchases of property and equipment", -21, -19, -15),
            ("Net cash used in investing activities", -25, -22, -17),
            ("Repayments of debt", -10, -12, -8),
            ("Dividends paid", -6, -5, -4),
            ("Net cash used in financing activities", -16, -17, -12),
            ("Net increase in cash and cash equivalents", 27, 19, 13),
        ]
    ],
]

# a discussion page after the statement that talks about the same figures in the question's words
LIQUIDITY = [
    "Liquidity and capital resources",
    "In 2023 ACME spent $21 million on purchases of property and equipment, against $19 million in 2022.",
    "Cash flow from operations paid for the purchases of property and equipment and for the dividends.",
]


def _annual(folder: Path, year: int) -> Path:
    now, before = REVENUE[year]
    return _pdf(
        folder / f"report-{year % 7}.pdf",  # names tell nothing: metadata comes from the content
        ["ACME Corp", f"Annual Report for the fiscal year ended December 31, {year}"],
        [
            "Results of operations",
            f"Net revenue was ${now} million in {year}, compared with ${before} million in {year - 1}.",
            "Revenue grew with more storage subscriptions sold to new customers.",
        ],
        more=[CASH_FLOWS, LIQUIDITY] if year == 2023 else [],
    )


@pytest.fixture(scope="module")
def covers(settings, tmp_path_factory):
    """Three ACME annual reports, an ACME quarterly report, a Globex manual (DOCX) and a meeting note (MD)."""
    import docx

    from kb_assets.launch.ingest import ingest

    folder = tmp_path_factory.mktemp("covers")
    files = {year: _annual(folder, year) for year in REVENUE}
    files["quarter"] = _pdf(
        folder / "q.pdf",
        ["ACME Corp", "Quarterly Report for the quarterly period ended June 30, 2023"],
        ["Net revenue was $130 million for the three and six months ended June 30, 2023."],
    )
    manual = docx.Document()
    manual.add_heading("Globex Inc. Storage Appliance User Manual", 0)
    manual.add_paragraph("Version 4, published March 2, 2023. Revenue reports are exported from the admin page.")
    files["manual"] = folder / "appliance.docx"
    manual.save(str(files["manual"]))
    files["note"] = folder / "n.md"
    files["note"].write_text("# Meeting notes\n\nInitech Ltd. sync of May 4, 2023: revenue dashboard review.\n")
    report = ingest(list(files.values()), KB, settings)
    assert not report.failures, report.failures
    return {key: path.name for key, path in files.items()}


@pytest.fixture(scope="module")
def cover_searcher(settings, covers):
    from kb_assets.service.api import make_searcher

    searcher = make_searcher(settings)
    yield searcher
    searcher.close()


def _by_file(catalog) -> dict[str, dict]:
    documents = catalog.list_documents([KB])
    metadata = catalog.document_metadata([KB])
    return {Path(d.source_uri).name: metadata.get(d.document_id) or {} for d in documents}


def test_metadata_is_read_from_covers_of_pdf_docx_and_markdown(catalog, covers):
    found = _by_file(catalog)
    for year in REVENUE:
        meta = found[covers[year]]
        assert "ACME Corp" in meta["organisation"] and meta["kind"] == "annual report"
        assert meta["period"]["label"] == f"FY{year}" and meta["period"]["end"] == f"{year}-12-31"
        assert 0 < meta["confidence"]["period"] <= 1
    quarter = found[covers["quarter"]]
    assert quarter["kind"] == "quarterly report" and quarter["period"]["label"] == "Q2 FY2023"
    manual = found[covers["manual"]]
    assert manual["kind"] == "manual" and manual["organisation"].startswith("Globex")
    assert found[covers["note"]]["kind"] == "note" and found[covers["note"]]["organisation"] == "Initech Ltd."


def test_period_is_the_period_covered_not_the_release_date():
    release = read_metadata(
        [
            "Globex Inc. Reports Second Quarter 2023 Results\nBOSTON, July 27, 2023 -- Globex Inc. (NYSE: GBX) today "
            "announced results for the second quarter ended June 30, 2023."
        ]
    )
    assert release["kind"] == "earnings release" and release["organisation"] == "Globex Inc."
    assert release["period"]["label"] == "Q2 FY2023" and release["period"]["end"] == "2023-06-30"
    assert release["date"] == "2023-07-27"


def test_a_question_naming_a_period_ranks_that_documents_first_among_one_issuers(cover_searcher, covers):
    for year in REVENUE:
        answer = cover_searcher.search(SearchRequest(f"What was ACME Corp's net revenue in FY{year}?", [KB], 5))
        assert answer.results, answer.warnings
        first = answer.results[0]
        assert Path(first["sourceUri"]).name == covers[year], [Path(r["sourceUri"]).name for r in answer.results]
        assert first["documentMetadata"]["period"]["label"] == f"FY{year}"


def test_a_year_without_its_own_report_is_answered_from_the_next_with_a_warning_naming_it(cover_searcher, covers):
    answer = cover_searcher.search(SearchRequest("What was ACME Corp's net revenue in FY2020?", [KB], 5))
    assert Path(answer.results[0]["sourceUri"]).name == covers[2021]
    notes = [w for w in answer.warnings if w.startswith("scope:")]
    assert len(notes) == 1 and "FY2020" in notes[0] and "FY2021" in notes[0], answer.warnings
    named = cover_searcher.search(SearchRequest("What was ACME Corp's net revenue in FY2022?", [KB], 5))
    assert not [w for w in named.warnings if w.startswith("scope:")], named.warnings


def test_api_filters_by_period_and_kind(settings, cover_searcher, covers):
    from kb_assets.service.api import create_app

    client = TestClient(
        create_app(replace(settings, api_keys=""), cover_searcher),
        client=("127.0.0.1", 50000),
        base_url="http://localhost",
    )
    body = {"query": "net revenue", "knowledgeBaseIds": [KB], "limit": 10}
    annual = client.post("/v1/kb/search", json={**body, "period": "FY2021", "kind": "annual report"}).json()
    assert annual["results"] and {Path(r["sourceUri"]).name for r in annual["results"]} == {covers[2021]}
    quarterly = client.post("/v1/kb/search", json={**body, "period": "Q2 2023", "kind": "10-Q"}).json()
    assert quarterly["results"] and {Path(r["sourceUri"]).name for r in quarterly["results"]} == {covers["quarter"]}
    manual = client.post("/v1/kb/search", json={**body, "kind": "manual"}).json()
    assert manual["results"] and {Path(r["sourceUri"]).name for r in manual["results"]} == {covers["manual"]}
    nothing = client.post("/v1/kb/search", json={**body, "period": "FY1999"}).json()
    assert nothing["results"] == []


def test_mcp_kb_search_filters_by_period_and_kind(settings, cover_searcher, covers):
    from kb_assets.service.api import create_app
    from kb_assets_tests.live_server import live_server
    from kb_assets_tests.test_mcp_tools import call

    keyed = replace(settings, api_keys="meta=covers", url_signing_secret="metadata-test", public_url="")
    with ExitStack() as stack:
        url = stack.enter_context(live_server(create_app(keyed, cover_searcher, heal=False)))
        found = call(url, "meta", "kb_search", {"query": "net revenue", "period": "FY2022", "kind": "annual report"})
        assert not found.is_error
        results = found.structured_content["results"]
        assert results and {Path(r["sourceUri"]).name for r in results} == {covers[2022]}
        assert all(r["documentMetadata"]["organisation"].startswith("ACME") for r in results)


def test_a_statement_page_is_a_tree_node_that_chunks_do_not_take_as_their_section(catalog, lake, covers):
    (document,) = [d for d in catalog.list_documents([KB]) if Path(d.source_uri).name == covers[2023]]
    nodes = catalog.read_nodes(document.document_id)
    (statement,) = [n for n in nodes if n["title"] == "Consolidated Statements of Cash Flows"]
    assert statement["start_page"] == statement["end_page"] == 2 and statement["depth"] == 1
    assert "cash flow statement" in statement["keywords"]
    assert [n for n in nodes if is_statement_node(n)] == [statement]  # the other pages are no statement
    sections = set(lake.read("chunks", document.document_id)["section_title"].to_list())
    assert "Consolidated Statements of Cash Flows" not in sections


def test_instructions_to_the_answerer_leave_the_query_but_the_source_they_name_stays():
    from kb_assets.retrieval.instructions import retrieval_query

    question = (
        "What is ACME's FY2023 free cash flow (in USD millions)? Round your answer to two decimal places. "
        "Answer using the details shown in the cash flow statement."
    )
    assert retrieval_query(question) == "What is ACME's FY2023 free cash flow ? cash flow statement"
    assert retrieval_query("Use backports to install newer software.") == "Use backports to install newer software."


def test_a_document_whose_metadata_does_not_say_is_not_ruled_out_by_a_question_that_names_one():
    from kb_assets.retrieval.scope import cued

    annual = {"period": {"fiscal_year": 2022, "fiscal_quarter": None}, "kind": "annual report"}
    known = {
        "acme-2022": {"organisation": "Acme Corporation", **annual},
        "globex-2022": {"organisation": "Globex Corporation", **annual},
        "handbook": {"organisation": None, "kind": "manual"},  # its cover names no one and no period
    }
    assert cued("What did Acme report for fiscal 2022?", known) == {"acme-2022", "handbook"}
    assert cued("What does the Acme handbook say about backups?", known) == {"acme-2022", "handbook"}
    assert cued("Globex's 10-K for 2022", known) == {"globex-2022", "handbook"}


def test_a_question_naming_a_quarter_by_its_end_date_or_a_quarterly_report_reaches_the_quarters_document():
    from kb_assets.retrieval.scope import cued

    def period(year, quarter, end):
        return {"period": {"fiscal_year": year, "fiscal_quarter": quarter, "end": end}}

    known = {
        "k2023": {"organisation": "Apple Inc.", "kind": "annual report", **period(2023, None, "2023-09-30")},
        "q3-2023": {"organisation": "Apple Inc.", "kind": "quarterly report", **period(2023, 3, "2023-07-01")},
        "k2022": {"organisation": "Apple Inc.", "kind": "annual report", **period(2022, None, "2022-09-24")},
    }
    assert cued("Apple's inventories for the three months ended July 1, 2023", known) == {"q3-2023"}
    assert cued("Apple's 10-Q for 2023: total net sales", known) == {"q3-2023"}  # a quarterly report, not the year
    assert cued("Apple's net sales in Q3'23", known) == cued("Apple's 3Q23 net sales", known) == {"q3-2023"}
    assert cued("Apple's FY2023 net sales", known) == {"k2023"}  # a year alone: the full-year report


def test_a_question_naming_a_statement_finds_the_statement_page_before_the_discussion_of_its_figures(
    cover_searcher, covers
):
    question = "How much did ACME Corp spend on purchases of property and equipment in FY2023"
    named = cover_searcher.search(SearchRequest(f"{question}, per the cash flow statement?", [KB], 5))
    first = named.results[0]
    assert Path(first["sourceUri"]).name == covers[2023] and first["pageIndex"] == 2, named.results
    assert first["scores"]["namedStatement"] > 0
    plain = cover_searcher.search(SearchRequest(f"{question}?", [KB], 5))  # names no statement: no such bonus
    assert plain.results and all("namedStatement" not in r["scores"] for r in plain.results)
    pages = {(Path(r["sourceUri"]).name, r["pageIndex"]) for r in plain.results}
    assert (covers[2023], 3) in pages  # the discussion page is a candidate the bonus had to pass
