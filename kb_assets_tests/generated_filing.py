"""A generated annual report (Form 10-K) for tests: a cover with its registered securities, the items, the four
statements and a note a page, each section's heading in a larger font as a filing prints it. Nothing in it comes
from a real filing; ``PAGES`` says which page holds what."""

from __future__ import annotations

from pathlib import Path

COMPANY = "Initech Corporation"
YEAR = 2023


def _rows(rows: list[tuple[str, int, int, int]]) -> list[str]:
    return [f"{label:48} {a:>9,} {b:>9,} {c:>9,}" for label, a, b, c in rows]


STATEMENT_HEAD = f"(in millions)                                      {YEAR}      {YEAR - 1}      {YEAR - 2}"
# (page key, heading, body lines); statements carry at least 25 figures
SECTIONS: list[tuple[str, str, list[str]]] = [
    (
        "cover",
        "FORM 10-K",
        [
            "ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934",
            f"For the fiscal year ended December 31, {YEAR}",
            COMPANY.upper(),
            "(Exact name of registrant as specified in its charter)",
            "Securities registered pursuant to Section 12(b) of the Act:",
            "Title of each class          Trading symbol(s)          Name of each exchange on which registered",
            "Common Stock, $0.01 par value          INTC          New York Stock Exchange",
            "4.250% Notes due 2031          INTC31          New York Stock Exchange",
        ],
    ),
    (
        "business",
        "Item 1. Business",
        [
            "Initech designs and sells billing software, payment terminals and support services.",
            "Human capital: we had 12,400 employees at year end.",
        ],
    ),
    ("risk", "Item 1A. Risk Factors", ["Our results depend on a small number of large banks as customers."]),
    ("legal", "Item 3. Legal Proceedings", ["A patent lawsuit filed by Globex Inc. was settled in October."]),
    (
        "market",
        "Item 5. Market for Registrant's Common Equity and Issuer Purchases of Equity Securities",
        ["We paid quarterly cash dividends of $0.25 per share and repurchased 2.1 million shares in the year."],
    ),
    (
        "results",
        "Results of Operations",
        [
            "Net sales increased 8% on higher terminal volumes; gross margin rose to 41%.",
            "Operating income grew faster than sales as the Americas region recovered.",
        ],
    ),
    (
        "liquidity",
        "Liquidity and Capital Resources",
        [
            "Cash flow from operations and our revolving credit facility fund",
            "capital expenditures, dividends and debt repayments.",
        ],
    ),
    ("outlook", "Outlook", ["For the next fiscal year we expect net sales growth of 4% to 6%."]),
    (
        "market risk",
        "Item 7A. Quantitative and Qualitative Disclosures About Market Risk",
        ["Interest rate risk arises on our floating-rate borrowings; foreign currency risk on European sales."],
    ),
    (
        "income",
        "Consolidated Statements of Operations",
        [
            STATEMENT_HEAD,
            *_rows(
                [
                    ("Net sales", 5200, 4815, 4410),
                    ("Cost of sales", 3068, 2890, 2700),
                    ("Gross profit", 2132, 1925, 1710),
                    ("Selling, general and administrative", 910, 880, 850),
                    ("Research and development", 402, 390, 371),
                    ("Restructuring charges", 41, 12, 0),
                    ("Operating income", 779, 643, 489),
                    ("Interest expense", 88, 91, 95),
                    ("Provision for income taxes", 145, 120, 84),
                    ("Net income", 546, 432, 310),
                    ("Diluted earnings per share", 3, 2, 2),
                ]
            ),
        ],
    ),
    (
        "balance sheet",
        "Consolidated Balance Sheets",
        [
            STATEMENT_HEAD,
            *_rows(
                [
                    ("Cash and cash equivalents", 640, 510, 480),
                    ("Accounts receivable, net", 702, 655, 610),
                    ("Inventories", 530, 498, 470),
                    ("Total current assets", 1872, 1663, 1560),
                    ("Property, plant and equipment, net", 1410, 1350, 1300),
                    ("Goodwill", 820, 700, 700),
                    ("Total assets", 4102, 3713, 3560),
                    ("Accounts payable", 455, 430, 410),
                    ("Total current liabilities", 1103, 1010, 990),
                    ("Long-term debt", 1250, 1180, 1210),
                    ("Total shareholders' equity", 1749, 1523, 1360),
                ]
            ),
        ],
    ),
    (
        "cash flows",
        "Consolidated Statements of Cash Flows",
        [
            STATEMENT_HEAD,
            *_rows(
                [
                    ("Net income", 546, 432, 310),
                    ("Depreciation and amortization", 190, 182, 176),
                    ("Net cash provided by operating activities", 801, 690, 540),
                    ("Purchases of property and equipment", -250, -232, -210),
                    ("Acquisitions, net of cash acquired", -180, 0, 0),
                    ("Net cash used in investing activities", -430, -232, -210),
                    ("Dividends paid", -104, -98, -90),
                    ("Repurchases of common stock", -120, -80, -60),
                    ("Net cash used in financing activities", -241, -428, -300),
                    ("Net increase in cash and cash equivalents", 130, 30, 30),
                ]
            ),
        ],
    ),
    (
        "equity",
        "Consolidated Statements of Shareholders' Equity",
        [
            STATEMENT_HEAD,
            *_rows(
                [
                    ("Balance at beginning of year", 1523, 1360, 1250),
                    ("Net income", 546, 432, 310),
                    ("Cash dividends declared", -104, -98, -90),
                    ("Repurchases of common stock", -120, -80, -60),
                    ("Stock-based compensation", 64, 61, 58),
                    ("Other comprehensive income", -160, -152, -108),
                    ("Balance at end of year", 1749, 1523, 1360),
                    ("Shares outstanding", 182, 184, 186),
                ]
            ),
        ],
    ),
    (
        "revenue",
        "Note 1 — Revenue",
        [
            "Net sales by geography: Americas 60%, Europe 28%, Asia 12%.",
            "No customer accounted for more than 10% of net sales.",
        ],
    ),
    ("acquisitions", "Note 2 — Acquisitions", ["In March we acquired Penetrode Ltd for $180 million in cash."]),
    (
        "divestitures",
        "Note 3 — Discontinued Operations",
        ["We sold our printing business; it is shown as discontinued."],
    ),
    ("inventories", "Note 4 — Inventories", ["Inventories are stated at the lower of cost and net realizable value."]),
    ("property", "Note 5 — Property, Plant and Equipment", ["Buildings, machinery and software, net of depreciation."]),
    ("goodwill", "Note 6 — Goodwill and Intangible Assets", ["No impairment of goodwill was recorded this year."]),
    (
        "debt",
        "Note 7 — Debt",
        ["The 4.250% notes mature in 2031; the revolving credit facility of $500 million is undrawn."],
    ),
    ("leases", "Note 8 — Leases", ["Operating lease liabilities were $210 million at year end."]),
    ("income taxes", "Note 9 — Income Taxes", ["The effective tax rate was 21.0% against the statutory rate of 21%."]),
    (
        "restructuring",
        "Note 10 — Restructuring",
        ["Severance for 300 positions in the printing business: $41 million."],
    ),
    ("stock compensation", "Note 11 — Stock-Based Compensation", ["Restricted stock units vest over four years."]),
    ("earnings per share", "Note 12 — Earnings Per Share", ["Diluted shares include 1.2 million unvested units."]),
    ("pensions", "Note 13 — Pension and Retirement Plans", ["The plans were 94% funded at year end."]),
    ("commitments", "Note 14 — Commitments and Contingencies", ["Purchase commitments total $95 million."]),
    ("segments", "Note 15 — Segment Information", ["Two segments: Software and Terminals; Terminals sales fell 2%."]),
    ("fair value", "Note 16 — Fair Value and Derivatives", ["Interest rate swaps hedge part of the floating debt."]),
    ("subsequent events", "Note 17 — Subsequent Events", ["In January the board raised the quarterly dividend."]),
]
PAGES = {key: number for number, (key, _, _) in enumerate(SECTIONS)}


def write_filing(path: Path) -> Path:
    """The filing as a PDF, one section a page, headings in 14-point bold over 10-point text."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=letter)
    for key, heading, lines in SECTIONS:
        y = letter[1] - 72
        if key != "cover":
            c.setFont("Helvetica", 9)
            c.drawString(54, y, COMPANY)
            y -= 28
        c.setFont("Helvetica-Bold", 14)
        c.drawString(54, y, heading)
        y -= 30
        c.setFont("Courier" if key in ("income", "balance sheet", "cash flows", "equity") else "Helvetica", 9)
        for line in lines:
            c.drawString(54, y, line)
            y -= 18
        c.showPage()
    c.save()
    return path
