"""The filing a question means (issue 53): issuers named by ticker, short name, former name or initials, analysts'
fiscal shorthand, the filing meant first, and a note where another filing than the one named is searched
(``retrieval/scope.py`` on documents' metadata as ``structure/metadata.py`` reads it). Plain functions: the
search that carries the note is tested in ``test_document_metadata.py``."""

from __future__ import annotations

from kb_assets.retrieval.scope import resolve


def _filing(organisation, year, quarter=None, kind="annual report", end=None, **names) -> dict:
    label = f"Q{quarter} FY{year}" if quarter else f"FY{year}"
    period = {"fiscal_year": year, "fiscal_quarter": quarter, "end": end, "label": label}
    return {"organisation": organisation, "kind": kind, "period": period, **names}


KNOWN = {
    "nke-2018": _filing("NIKE, Inc.", 2018, file_number="001-10635"),  # a cover of 2018 lists no ticker
    "nke-2022": _filing("NIKE, Inc.", 2022, end="2022-05-31", tickers=["NKE"], file_number="001-10635"),
    "nke-2023": _filing("NIKE, Inc.", 2023, end="2023-05-31", tickers=["NKE"], file_number="001-10635"),
    "wmt-2017": _filing("Wal-Mart Stores, Inc.", 2017, file_number="001-06991"),
    "wmt-2020": _filing("Walmart Inc.", 2020, tickers=["WMT"], file_number="001-06991"),
    "ko-2021": _filing("The Coca-Cola Company", 2021, tickers=["KO"]),
    "jnj-q2": _filing("Johnson & Johnson", 2023, 2, "earnings release", tickers=["JNJ"]),
    "etr-2023": _filing("Entergy Corporation", 2023, tickers=["ETR"]),
    "gis-2021": _filing("General Mills, Inc.", 2021, tickers=["GIS"]),
    "mmm-2022": _filing("3M Company", 2022, tickers=["MMM"]),
    "cost-2022": _filing("Costco Wholesale Corporation", 2022, names=["Costco"], tickers=["COST"]),
    "sq-2019": _filing("Square, Inc.", 2019, tickers=["SQ"]),
    "block-2022": _filing("Block, Inc.", 2022, tickers=["SQ"], former_names=["Square, Inc."]),
    "ebay-q2": _filing("eBay Inc.", 2023, 2, "quarterly report", end="2023-06-30", tickers=["EBAY"]),
    "ebay-2022": _filing("eBay Inc.", 2022, end="2022-12-31", tickers=["EBAY"]),
}


def _meant(question: str) -> str | None:
    meant = resolve(question, KNOWN).meant
    return meant[0] if meant else None


def test_an_issuer_named_by_ticker_short_or_former_name_or_initials_is_found():
    assert _meant("NKE ETR FY23 vs FY22?") == "nke-2023"
    assert _meant("KO's main regions as of 2021?") == "ko-2021"
    assert _meant("Did JnJ's net earnings as a percent of sales rise in Q2 2023?") == "jnj-q2"
    assert _meant("J&J 2Q23 sales") == "jnj-q2"
    assert _meant("3M's capex 2022") == "mmm-2022"
    assert _meant("Costco NI FY22") == _meant("COST NI FY22") == "cost-2022"
    assert _meant("nike capex fy18") == "nke-2018"  # typed in lower case; the 2018 cover lists no ticker


def test_documents_sharing_a_file_number_or_a_ticker_are_one_issuer_under_every_name():
    assert _meant("Walmart capex FY2020 ($bn)?") == "wmt-2020"
    assert _meant("Wal-Mart revenue FY17") == "wmt-2017"
    assert _meant("WMT revenue FY2017") == "wmt-2017"  # the ticker of the later cover names the earlier filing
    assert _meant("NKE capex FY2018") == "nke-2018"
    assert resolve("Square's revenue in 2022", KNOWN).documents == {"block-2022"}  # a former name


def test_finance_shorthand_is_no_ticker_or_initials_beside_a_named_issuer():
    assert resolve("Nike GM FY22?", KNOWN).documents == {"nke-2022"}  # GM: gross margin, not General Mills
    assert resolve("NKE ETR FY23", KNOWN).documents == {"nke-2023"}  # ETR: effective tax rate, not Entergy
    assert resolve("ETR 2023 dividends", KNOWN).documents == {"etr-2023"}  # nothing else named: the ticker
    assert resolve("Which segment grew best?", KNOWN).documents is None  # "best" is no issuer


def test_fiscal_shorthand_names_its_year_and_quarter():
    assert _meant("eBay op margin 2Q23") == _meant("EBAY 1H23 revenue") == "ebay-q2"
    assert _meant("EBAY total current liabs 6/30/23") == "ebay-q2"
    assert _meant("EBAY total current liabs at 12/31/22") == "ebay-2022"
    assert _meant("eBay revenue FYE22") == "ebay-2022"
    assert _meant("eBay revenue Q2'23") == "ebay-q2"
    assert _meant("eBay revenue in the first half of 2023") == "ebay-q2"


def test_a_year_without_its_own_report_is_searched_in_the_next_with_a_note_naming_it():
    scoped = resolve("Nike capex FY2016", KNOWN)
    assert scoped.documents == {"nke-2018"}
    assert len(scoped.notes) == 1 and "FY2016" in scoped.notes[0] and "FY2018" in scoped.notes[0]
    assert resolve("Nike capex FY2018", KNOWN).notes == []
    assert resolve("Nike capex FY2010", KNOWN).documents == {"nke-2018", "nke-2022", "nke-2023"}  # never emptied
    assert "searched all of its documents" in resolve("Nike capex FY2010", KNOWN).notes[0]


def test_the_filing_meant_first_is_the_periods_own_report():
    assert _meant("eBay revenue 2023") == "ebay-q2"  # the only 2023 filing
    assert _meant("eBay revenue 2022") == "ebay-2022"
    assert resolve("eBay's annual report", KNOWN).meant[0] == "ebay-2022"  # no period: the latest annual report


def test_a_year_past_every_report_is_a_forecasts_not_the_report_asked():
    assert resolve("As of FY2022, how much did eBay expect to pay its retirees in 2026?", KNOWN).documents == {
        "ebay-2022"
    }
