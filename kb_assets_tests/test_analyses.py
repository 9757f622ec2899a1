"""Analyses mapped to their evidence (issue 44): the map's breadth, and every analysis reaching a statement or
section node of a generated 10-K read by the real parser and tree builder; on real services, analysts'
questions rank the page that holds their inputs first."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_assets.retrieval.routing import node_sources, routed_pages, routing
from kb_assets.retrieval.search import SearchRequest
from kb_assets.structure.analyses import ANALYSES, FAMILIES, analyses_asked, source_weights
from kb_assets.structure.statements import SYNONYMS, statement_family
from kb_assets.structure.topics import TOPICS, section_nodes, topics_of
from kb_assets_tests.generated_filing import PAGES, write_filing

KB = "analyses"
STATEMENTS = {statement_family(name) for name in SYNONYMS}


def test_the_map_holds_at_least_40_analyses_of_every_family_each_asked_by_its_example():
    assert len(ANALYSES) >= 40 and len({a.name for a in ANALYSES}) == len(ANALYSES)
    assert {a.family for a in ANALYSES} == set(FAMILIES)
    for analysis in ANALYSES:
        assert set(analysis.sources) <= STATEMENTS | set(TOPICS), analysis
        assert analysis in analyses_asked(analysis.example), analysis.name


def test_questions_that_name_no_analysis_are_not_routed():
    assert routing("How do I configure the backup retention period?") is None
    assert routing("Who wrote the R installation manual?") is None


def test_titles_name_their_topics_and_statements():
    assert topics_of("Note 7 – Debt") == {"debt"}
    assert "market for equity" in topics_of(
        "Item 5. Market for Registrant's Common Equity, Related Stockholder Matters"
    )
    assert "segments" in topics_of("Note 11 – Segment Information and Geographic Data")
    assert node_sources("n28", "CONSOLIDATED BALANCE SHEETS") == {"balance sheet"}
    assert node_sources("statement-35", "Consolidated Statements of Cash Flows") == {"cash flows"}
    assert "cash flows" not in node_sources("n31", "Notes to Consolidated Financial Statements")


@pytest.fixture(scope="module")
def generated_nodes(tmp_path_factory) -> list[tuple[str, str, str, int, int]]:
    """The statement and section nodes of the generated 10-K, as the ingest's structure step makes them."""
    from kb_assets.parsing import ParseOptions, parse_document
    from kb_assets.structure.pageindex import build_document_tree
    from kb_assets.structure.statements import statement_nodes

    path = write_filing(tmp_path_factory.mktemp("filing") / "filing.pdf")
    parsed = parse_document(path, options=ParseOptions(images=False))
    pages = [
        {"page_index": p.page_index, "text": p.text, "blocks": [{"kind": b.kind, "text": b.text} for b in p.blocks]}
        for p in parsed.pages
    ]
    tree = build_document_tree("filing", pages, [])
    navigation = set(tree.navigation_pages)
    statements = statement_nodes(pages, "n0", len(tree.nodes), navigation)
    sections = section_nodes(pages, "n0", 100, navigation, {n["start_page"] for n in statements})
    return [("doc", n["node_id"], n["title"], n["start_page"], n["end_page"]) for n in statements + sections]


def test_every_analysis_reaches_a_statement_or_section_node_of_a_generated_filing(generated_nodes):
    for analysis in ANALYSES:
        pages = routed_pages(generated_nodes, source_weights([analysis]))
        assert pages, f"{analysis.name}: no node of {analysis.sources}"


@pytest.mark.parametrize(
    "question, page",
    [
        ("Does Initech have positive working capital based on FY2023 data?", "balance sheet"),
        (
            "Which debt securities are registered to trade on a national securities exchange under Initech's name?",
            "cover",
        ),
        ("Among operations, investing, and financing activities, which brought in the most cash flow?", "cash flows"),
        ("What are major acquisitions that Initech has done in FY2023 and FY2022?", "acquisitions"),
        ("Has Initech paid dividends to common shareholders in FY2023?", "market"),
        ("What is the quantity of restructuring costs in Initech's income statement?", "income"),
        ("Is Initech involved in any legal battles?", "legal"),
    ],
)
def test_an_analysts_question_routes_first_to_the_page_holding_its_inputs(generated_nodes, question, page):
    route = routing(question)
    assert route is not None
    pages = routed_pages(generated_nodes, route.weights)
    best = max(pages.values())
    assert pages[("doc", PAGES[page])] == best, (question, pages)


# on real services: ingest the generated 10-K and search it ----------------------------------------------
@pytest.fixture(scope="module")
def filing(settings, tmp_path_factory) -> str:
    from kb_assets.launch.ingest import ingest

    path = write_filing(tmp_path_factory.mktemp("filing-kb") / "report.pdf")
    report = ingest([path], KB, settings)
    assert not report.failures, report.failures
    return path.name


@pytest.fixture(scope="module")
def filing_searcher(settings, filing):
    from kb_assets.service.api import make_searcher

    searcher = make_searcher(settings)
    yield searcher
    searcher.close()


@pytest.mark.services
@pytest.mark.parametrize(
    "question, page",
    [
        ("Does Initech Corporation have positive working capital based on FY2023 data?", "balance sheet"),
        (
            "Which debt securities are registered to trade on a national securities exchange under Initech's name?",
            "cover",
        ),
        (
            "Among operations, investing, and financing activities, which brought in the most cash for Initech?",
            "cash flows",
        ),
    ],
)
def test_search_ranks_the_routed_page_first_with_its_analysis_score(filing_searcher, filing, question, page):
    response = filing_searcher.search(SearchRequest(question, [KB], 5))
    first = response.results[0]
    assert Path(first["sourceUri"]).name == filing and first["pageIndex"] == PAGES[page], response.results
    assert first["scores"]["analysis"] > 0


@pytest.mark.services
def test_the_page_scorer_orders_a_filings_pages_and_its_missing_file_is_a_warning(
    filing_searcher, filing, tmp_path, monkeypatch
):
    from kb_assets.retrieval import page_scorer

    question = "Does Initech Corporation have positive working capital based on FY2023 data?"
    scored = filing_searcher.search(SearchRequest(question, [KB], 5))
    assert "pageScore" in scored.results[0]["scores"] and not any("page scorer" in w for w in scored.warnings)
    monkeypatch.setattr(page_scorer, "SCORER_FILE", tmp_path / "page_scorer.json")  # a deployment without the file
    summed = filing_searcher.search(SearchRequest(question, [KB], 5))
    assert summed.results and all("pageScore" not in r["scores"] for r in summed.results)
    assert any("page scorer page_scorer.json not used" in w for w in summed.warnings), summed.warnings
