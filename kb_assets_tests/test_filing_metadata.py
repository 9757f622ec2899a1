"""Filings' metadata rules (issue 32) on generated covers read by the real parser, as pageindex_trees reads
them (``parse_document``, then ``read_pdf_info`` and ``read_metadata``): a release's headline quarter over
its outlook, a quarterly report's own quarter label, a year ending in January labelled by the year the
document compares, an 8-K's date printed before its label, a table of registrants, a cover whose words
run together. Each rule is checked both ways (two covers that differ only in what the rule reads)."""

from __future__ import annotations

from pathlib import Path

from kb_assets.parsing import ParseOptions, parse_document
from kb_assets.structure.metadata import read_metadata
from kb_assets.structure.outline import read_pdf_info


def _read(path: Path, *pages: list[str]) -> dict:
    """Write the pages as a PDF, parse it with the ingest's parser and read its metadata."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=letter)
    for lines in pages:
        y = letter[1] - 72
        for line in lines:
            c.drawString(54, y, line)
            y -= 26  # a gap between lines, as a cover has: no paragraph of them
        c.showPage()
    c.save()
    parsed = parse_document(path, options=ParseOptions(images=False))
    return read_metadata([page.text for page in parsed.pages], read_pdf_info(path.read_bytes()))


def _label(meta: dict) -> str:
    return meta["period"]["label"]


def test_a_release_is_of_the_quarter_its_headline_names_not_of_its_outlook(tmp_path):
    def release(headline: str) -> dict:
        return _read(
            tmp_path / "release.pdf",
            [
                "Initech Corporation 100 Main Street",
                "News Release",
                headline,
                "Forecasting first-quarter 2023 revenue of $10.5 billion to $11.5 billion.",
                "SPRINGFIELD, Jan. 26, 2023 -- Initech Corporation today reported its results.",
            ],
        )

    full_year = release("Initech Reports Fourth-Quarter and Full-Year 2022 Financial Results")
    assert full_year["kind"] == "earnings release" and _label(full_year) == "Q4 FY2022"
    assert full_year["organisation"] == "Initech Corporation"
    third = release("Initech Reports Third-Quarter 2022 Financial Results")
    assert _label(third) == "Q3 FY2022"


def test_a_fiscal_label_beats_the_calendar_year_of_the_quarter_end(tmp_path):
    def release(label: str) -> dict:
        return _read(
            tmp_path / "release.pdf",
            [
                "Globex Reports Second Quarter Results",
                "Comparable Sales Declined 6.2%",
                "MINNEAPOLIS, August 29, 2023 -- Globex Co., Inc. (NYSE: GBX) today announced results",
                f"for the 13-week second quarter ended July 29, 2023{label}.",
            ],
        )

    assert _label(release(' ("Q2 FY24")')) == "Q2 FY2024"  # the year it ends in February 2024
    assert _label(release("")) == "Q2 FY2023"  # nothing says otherwise: the quarter end's year


def _quarterly(tmp_path: Path, year_label: int) -> dict:
    cover = [
        "UNITED STATES SECURITIES AND EXCHANGE COMMISSION",
        "FORM 10-Q",
        "QUARTERLY REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934",
        "For the quarterly period ended: October 29, 2022",
        "HOOLI SHOES, INC.",
        "(Exact name of registrant as specified in its charter)",
    ]
    statements = [
        "CONDENSED CONSOLIDATED STATEMENTS OF OPERATIONS",
        "Thirteen weeks ended Thirty-nine weeks ended",
        "Sales 2,173 2,200 6,618 6,723",
        f"Third Quarter {year_label} Form 10-Q Page 2",
    ]
    return _read(
        tmp_path / "q.pdf", cover, statements, [*statements[:3], f"Third Quarter {year_label} Form 10-Q Page 3"]
    )


def test_a_quarter_of_a_year_ending_in_january_takes_the_reports_own_label(tmp_path):
    # the year ends in January 2023: labelled 2022 by some issuers, 2023 by others; the report says which
    by_start = _quarterly(tmp_path, 2022)
    assert by_start["kind"] == "quarterly report" and _label(by_start) == "Q3 FY2022"
    assert by_start["organisation"] == "Hooli Shoes, Inc."
    assert _label(_quarterly(tmp_path, 2023)) == "Q3 FY2023"


def _annual(tmp_path: Path, current: int) -> dict:
    cover = [
        "FORM 10-K",
        "ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934",
        "For the fiscal year ended January 31, 2015",
        "VANDELAY STORES, INC.",
        "(Exact name of registrant as specified in its charter)",
    ]
    # the prior year is named more often than the year itself, as in a real discussion of results
    discussion = [
        f"Results of operations: fiscal {current} compared with fiscal {current - 1}.",
        f"Revenue in fiscal {current - 1} was lower; fiscal {current - 1} had one more week.",
        f"In fiscal {current - 1}, we closed stores; fiscal {current - 1} also saw a restructuring.",
        f"Fiscal {current - 1} compared with fiscal {current - 2}: revenue grew.",
    ]
    return _read(tmp_path / "k.pdf", cover, discussion)


def test_a_year_ending_in_january_is_labelled_as_the_report_compares_it(tmp_path):
    by_end = _annual(tmp_path, 2015)
    assert by_end["kind"] == "annual report" and _label(by_end) == "FY2015"
    assert _label(_annual(tmp_path, 2014)) == "FY2014"  # an issuer that labels the year by its start


def test_an_8k_event_date_printed_before_its_label(tmp_path):
    def current_report(date_line: str) -> dict:
        return _read(
            tmp_path / "8k.pdf",
            [
                "UNITED STATES SECURITIES AND EXCHANGE COMMISSION",
                "FORM 8-K",
                "CURRENT REPORT Pursuant to Section 13 or 15(d) of the Securities Exchange Act of 1934",
                date_line,
                "umbrella.com, inc.",
                "(Exact name of Registrant as specified in its charter)",
            ],
        )

    before = current_report("July 21, 2021 Date of Report (date of earliest event reported)")
    assert before["kind"] == "current report" and before["period"]["end"] == "2021-07-21"
    after = current_report("Date of Report (Date of earliest event reported): March 14, 2023")
    assert after["period"]["end"] == "2023-03-14"


def test_a_table_of_registrants_names_the_first_one(tmp_path):
    def cover(first: str) -> dict:
        return _read(
            tmp_path / "two.pdf",
            [
                "FORM 8-K",
                "CURRENT REPORT Pursuant to Section 13 or 15(d) of the Securities Exchange Act of 1934",
                "Date of Report: June 1, 2023 (Date of earliest event reported)",
                "Commission File Number",
                "Exact Name of Registrant as specified in its charter",
                "State or Other Jurisdiction of Incorporation or Organization",
                f"001-12609 {first} California 94-3234914",
                "001-02348 SOYLENT GAS AND ELECTRIC COMPANY California 94-0742640",
                "First preferred stock, cumulative, par value $25 per share PCG-PA NYSE American LLC",
                "First preferred stock, cumulative, par value $25 per share PCG-PB NYSE American LLC",
            ],
        )

    assert cover("SG&E CORPORATION")["organisation"] == "SG&E Corporation"
    assert cover("SOYLENT HOLDINGS CORPORATION")["organisation"] == "Soylent Holdings Corporation"


def test_a_cover_whose_words_run_together_still_names_an_annual_report(tmp_path):
    meta = _read(tmp_path / "ar.pdf", ["2023Annual Report"], ["To our stockholders, this year we marked 50 years."])
    assert meta["kind"] == "annual report"
    plain = _read(tmp_path / "ar.pdf", ["2023 Sustainability Summary"], ["To our stockholders, this year."])
    assert plain["kind"] != "annual report"


def test_a_form_cover_without_the_registrant_label_names_its_issuer_on_a_line_of_its_own(tmp_path):
    def annual(issuer: str) -> dict:
        cover = [
            "FORM 10-K",
            "ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934",
            "For the Fiscal Year Ended June 30, 2017",
            "Commission File Number 001-37845",
            issuer,
            "WASHINGTON 91-1144442",
            "COMMON STOCK, $0.00000625 par value per share NASDAQ",
        ]
        # the subsidiary it bought is named more often than the issuer itself
        body = [f"We acquired Hooli Networks Corporation; Hooli Networks Corporation {n} grew." for n in range(6)]
        return _read(tmp_path / "k.pdf", cover, body)

    assert annual("UMBRELLA CORPORATION")["organisation"] == "Umbrella Corporation"
    assert annual("MGM HOLDINGS INC.")["organisation"] == "MGM Holdings Inc."


def test_a_quarterly_reports_quarter_is_the_longest_period_ending_on_its_own_date(tmp_path):
    def quarterly(spans: str) -> dict:
        cover = [
            "FORM 10-Q",
            "QUARTERLY REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934",
            "For the quarterly period ended March 31, 2023",
            "INITECH CORPORATION",
            "(Exact name of registrant as specified in its charter)",
        ]
        notes = [
            f"Revenue for the {spans} ended March 31, 2023 was $1.2 billion.",
            "A lawsuit settled in the nine months ended September 30, 2022 cost $4 million.",
        ]
        return _read(tmp_path / "q.pdf", cover, notes)

    assert _label(quarterly("three months")) == "Q1 FY2023"  # not the third: that period ended last year
    assert _label(quarterly("three and six months")) == "Q2 FY2023"


def test_a_quarterly_cover_that_says_quarter_ended_is_of_that_quarter(tmp_path):
    def quarterly(cover_line: str) -> dict:
        cover = [
            "FORM 10-Q",
            "QUARTERLY REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934",
            cover_line,
            "CYBERDYNE SYSTEMS CORPORATION",
            "(Exact name of registrant as specified in its charter)",
        ]
        return _read(tmp_path / "q.pdf", cover, ["Net sales for the three months ended March 31, 2021 rose 4%."])

    assert _label(quarterly("For the quarter ended March 31, 2021")) == "Q1 FY2021"
    assert _label(quarterly("For the fiscal quarter ended March 31, 2021")) == "Q1 FY2021"
    assert _label(quarterly("For the period ended March 31, 2021")) == "Q1 FY2021"  # the statements say which
    # without a period ended on the cover, the report's quarter is not guessed from the statements' dates
    assert _label(quarterly("Commission file number 001-00001")) != "Q1 FY2021"


def test_a_release_that_quotes_the_form_it_is_filed_with_is_a_release(tmp_path):
    quoting = _read(
        tmp_path / "release.pdf",
        [
            "Acme Widgets Reports Second Quarter 2022 Results",
            "CHICAGO, July 28, 2022 -- Acme Widgets, Inc. (NYSE: AWI) today reported results.",
            "Further details are in our Quarterly Report on Form 10-Q for the quarter ended June 30, 2022.",
        ],
    )
    assert quoting["kind"] == "earnings release" and quoting["form"] is None
    assert _label(quoting) == "Q2 FY2022"
    # a 10-Q's own cover still names its form
    cover = _read(
        tmp_path / "q.pdf",
        [
            "FORM 10-Q",
            "For the quarterly period ended June 30, 2022",
            "ACME WIDGETS, INC.",
            "(Exact name of registrant)",
        ],
    )
    assert cover["form"] == "10-Q" and cover["kind"] == "quarterly report"
    titled = _read(tmp_path / "k.pdf", ["2022 ANNUAL REPORT ON FORM 10-K", "To our shareholders"])
    assert titled["form"] == "10-K"  # a cover's title, not a quote


def test_a_name_that_starts_in_lower_case_is_read_whole(tmp_path):
    meta = _read(
        tmp_path / "release.pdf",
        [
            "eWidget Reports Fourth Quarter and Full Year 2022 Results",
            "SAN JOSE, Calif.--(BUSINESS WIRE)--eWidget Inc. (Nasdaq: EWDG) today reported its results.",
        ],
    )
    assert meta["organisation"] == "eWidget Inc."
    upper = _read(
        tmp_path / "release.pdf",
        [
            "Widget Reports Fourth Quarter 2022 Results",
            "SAN JOSE -- Widget Inc. (Nasdaq: WDGT) today reported results.",
        ],
    )
    assert upper["organisation"] == "Widget Inc."


def test_our_company_is_no_issuers_name(tmp_path):
    pages = [
        ["Annual Report 2021", "Our Company"],
        ["Our Company", "Our Company designs widgets. Our Company sells them worldwide."],
        ["Initrode Holdings Corporation and its subsidiaries make widgets.", "Our Company employs 900 people."],
        ["Initrode Holdings Corporation was founded in 1990.", "Our Company is based in Ohio."],
    ]
    assert _read(tmp_path / "ar.pdf", *pages)["organisation"] == "Initrode Holdings Corporation"
    headed = [
        ["Annual Report 2021"],
        ["Part III. THE INITRODE COMPANY", "Directors and officers of the registrant."],
        ["Our Company sells widgets.", "Item 5. THE INITRODE COMPANY shares trade on the NYSE."],
        ["Executive compensation of THE INITRODE COMPANY is set by its board."],
    ]
    assert _read(tmp_path / "ar.pdf", *headed)["organisation"] == "Initrode Company"


def test_a_covers_trading_symbols_file_number_and_short_name_are_read(tmp_path):
    cover = [
        "UNITED STATES SECURITIES AND EXCHANGE COMMISSION",
        "FORM 10-K",
        "ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934",
        "For the fiscal year ended December 31, 2022",
        "Commission File Number 1-12345",
        "Initech Holdings, Inc.",
        "(Exact name of registrant as specified in its charter)",
        "Securities registered pursuant to Section 12(b) of the Act:",
        "Title of each class   Trading Symbol(s)   Name of each exchange on which registered",
        "Common Stock, $0.01 par value   INTK   New York Stock Exchange",
        "1.500% Notes due 2026   INTK26   New York Stock Exchange",
        "Securities registered pursuant to Section 12(g) of the Act: None",
    ]
    business = ['Initech Holdings, Inc. ("Initech" or the "Company") makes staplers.', "Item 1. Business"]
    meta = _read(tmp_path / "k.pdf", cover, business)
    assert meta["tickers"] == ["INTK"]  # a note's symbol is not the issuer's
    assert meta["file_number"] == "001-12345"
    assert meta["names"] == ["Initech"]
    before = _read(
        tmp_path / "old.pdf", cover[:8] + ["Common Stock, $0.01 par value   New York Stock Exchange"], business
    )
    assert before["tickers"] == []  # a cover from before 2019: no symbol column, its capitals are words


def test_a_release_and_an_annual_reports_market_section_name_the_symbol(tmp_path):
    release = ["Initech Reports Second Quarter 2023 Results", "AUSTIN, Texas -- Initech Holdings, Inc. (NYSE: INTK)"]
    assert _read(tmp_path / "r.pdf", release)["tickers"] == ["INTK"]
    market = [
        "Item 5. Market for Registrant's Common Equity",
        'Our common stock is traded on the New York Stock Exchange under the symbol "INTK".',
    ]
    cover = [
        "FORM 10-K",
        "For the fiscal year ended December 31, 2017",
        "Initech Holdings, Inc.",
        "(Exact name of registrant as specified in its charter)",
    ]
    assert _read(tmp_path / "m.pdf", cover, market)["tickers"] == ["INTK"]


def test_a_former_name_is_read_where_the_document_says_so_and_only_a_companys(tmp_path):
    cover = [
        "FORM 10-K",
        "For the fiscal year ended December 31, 2022",
        "Block, Inc.",
        "(Exact name of registrant as specified in its charter)",
    ]
    renamed = ["Block, Inc. (formerly Square, Inc.) builds tools for sellers."]
    assert _read(tmp_path / "b.pdf", cover, renamed)["former_names"] == ["Square, Inc."]
    officer = ["Jane Roe, formerly Chief Operating Officer, became Chief Executive Officer."]
    assert _read(tmp_path / "c.pdf", cover, officer)["former_names"] == []
