"""Analysts' shorthand spelled out in the words filings print (issue 53, ``structure/vocabulary.py``): the query
every stage reads, the BM25 words, the analyses routed to; the manuals' questions are left as they are."""

from __future__ import annotations

import json
from pathlib import Path

from kb_assets.retrieval.instructions import retrieval_query
from kb_assets.retrieval.lexical_query import bm25_query
from kb_assets.retrieval.routing import routing
from kb_assets.structure.vocabulary import TERMS, is_shorthand, spelled_out

ROOT = Path(__file__).resolve().parents[1]


def test_shorthand_is_spelled_out_where_it_stands_and_only_once():
    assert spelled_out("NKE ETR FY23 vs FY22?") == "NKE ETR (effective tax rate) FY23 vs FY22?"
    assert spelled_out("Walmart capex FY2020") == "Walmart capex (capital expenditures) FY2020"
    assert spelled_out("AAPL D&A and PP&E") == (
        "AAPL D&A (depreciation and amortization) and PP&E (property, plant and equipment)"
    )
    assert spelled_out("effective tax rate (ETR) of Nike") == "effective tax rate (ETR) of Nike"  # said already
    assert spelled_out("Who is Nike's CFO?") == "Who is Nike's CFO?"  # an officer, not cash from operations
    assert "net cash provided by operating activities" in spelled_out("NKE FY23: CFO vs CFI vs CFF?")


def test_the_bm25_words_get_what_a_statements_row_prints():
    words = bm25_query(retrieval_query("AAPL capex FY19?")).split()
    assert {"capital", "expenditures", "payments", "acquire", "property", "plant", "equipment"} <= set(words)


def test_shorthand_reaches_the_analysis_it_names():
    route = routing(retrieval_query("NKE ETR FY23 vs FY22 - why the jump?"))
    assert route is not None and "effective tax rate" in {a.name for a in route.analyses}
    route = routing(retrieval_query("AAPL FY22 CFO vs CFI vs CFF - which was largest?"))
    assert route is not None and "cash flow mix" in {a.name for a in route.analyses}


def test_shorthand_is_told_from_a_ticker():
    assert is_shorthand("ETR") and is_shorthand("GM") and is_shorthand("CFO")
    assert not is_shorthand("NKE") and not is_shorthand("KO")


def test_every_term_has_a_label_and_the_manuals_questions_are_left_as_they_are():
    assert all(t.label and t.words for t in TERMS)
    files = [ROOT / "benchmarks" / name for name in ("detail_questions.jsonl", "paraphrased_questions.jsonl")]
    for line in (line for path in files for line in path.read_text().splitlines() if line.strip()):
        question = json.loads(line)["query"]
        assert spelled_out(question) == question, question


def test_a_line_item_named_routes_to_the_statement_that_prints_it():
    route = routing(retrieval_query("AAPL capex FY19?"))
    assert route is not None and route.weights.get("cash flows", 0) >= 0.6  # capital intensity names it first
    route = routing(retrieval_query("BBY inventories at FY19 year end"))
    assert route is not None and route.weights.get("balance sheet") == 0.6
    assert routing(retrieval_query("Who is Nike's CFO?")) is None
